"""Plain-data wire format between the grader and the sandbox (JSON, never pickle).

Values cross as tagged JSON: numbers, strings, None, lists, tuples, str-keyed
dicts, torch dtypes and CPU tensors (raw bytes, base64). A tensor also carries
what autograd knows about it (requires_grad, leaf or not, grad_fn name, .grad)
and, when the sandbox can tell, which argument object it *is* (`origin`) or, when it is a
new tensor object, whose memory it shares (`shares`: a view or `.detach()` of an argument).
Anything else the learner returns arrives as `Unsupported(type name)`.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any, Callable

import torch

_DTYPES = {str(d).removeprefix("torch."): d for d in (
    torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.int8, torch.int16,
    torch.int32, torch.int64, torch.uint8, torch.bool, torch.complex64, torch.complex128)}
MAX_ELEMENTS = 5_000_000
"""Largest tensor that may cross; a bigger one arrives as Unsupported."""
MAX_STRING = 10_000
"""In the grader, characters kept of one string the learner's process sent (a returned value,
a dict key, a type name): the rest is cut, and counted."""


def cut(text: str, limit: int = MAX_STRING) -> str:
    """`text` of at most about `limit` characters; what is left out is counted."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... (cut: {len(text) - limit} characters)"


@dataclass(frozen=True)
class Unsupported:
    """A value of a type that cannot cross the wire (the learner returned something odd)."""

    type_name: str

    def __repr__(self) -> str:
        return f"<{self.type_name}>"


@dataclass(frozen=True)
class Recipe:
    """Trusted code that builds an argument inside the sandbox (graphs, modules).

    `source` defines a function `name(*args)`; it returns the value to pass.
    Objects it stores in the dict `NAMED` (given as a global) are reported back
    after the call, and tensors among them are recognised by identity.
    """

    source: str
    name: str
    args: tuple = ()
    label: str = ""
    """How messages show the argument ("t", "nn.Sequential(...)"); the function name if empty."""


@dataclass
class TensorInfo:
    """What autograd knew about a tensor that came back from the sandbox."""

    requires_grad: bool
    is_leaf: bool
    grad_fn: str | None
    grad: torch.Tensor | None
    origin: str | None
    """Which object passed in this tensor *is*: "arg0", "arg0[2]" (by position), or a key of
    a Recipe's NAMED ("model.0.weight"); None for a new tensor."""
    shares: str | None = None
    """For a tensor that is not an argument object itself: the argument whose memory it shares
    (`g.detach()`, `g.view(-1)`, `g[:]` of argument g), named as `origin` is; None otherwise."""


def encode(value: Any, origin_of: Callable[[Any], tuple[str | None, str | None]] | None = None
           ) -> Any:
    """Turn a value into JSON-able tagged data."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return {"__float__": repr(value)}  # keeps nan and inf exact
    if isinstance(value, torch.Tensor):
        return _encode_tensor(value, origin_of)
    if isinstance(value, torch.dtype):
        return {"__dtype__": str(value).removeprefix("torch.")}
    if isinstance(value, torch.Size):
        return {"__tuple__": [int(v) for v in value]}
    if isinstance(value, tuple):
        return {"__tuple__": [encode(v, origin_of) for v in value]}
    if isinstance(value, list):
        return [encode(v, origin_of) for v in value]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {"__dict__": {k: encode(v, origin_of) for k, v in value.items()}}
    if isinstance(value, Unsupported):
        return {"__unsupported__": value.type_name}
    if isinstance(value, Recipe):
        return {"__recipe__": {"source": value.source, "name": value.name,
                               "args": encode(value.args)}}
    return {"__unsupported__": type(value).__qualname__}


_T = torch.Tensor
_detach, _contiguous, _reshape, _view, _numpy, _numel = (
    _T.detach, _T.contiguous, _T.reshape, _T.view, _T.numpy, _T.numel)
"""Taken when this module loads, before learner code runs: an attribute the learner set on a
returned tensor (`t.detach = ...`) or on the class is never what reads it."""


def _encode_tensor(t: torch.Tensor, origin_of) -> Any:
    if t.layout != torch.strided or t.device.type != "cpu" or _numel(t) > MAX_ELEMENTS \
            or str(t.dtype).removeprefix("torch.") not in _DTYPES:
        return {"__unsupported__": f"tensor ({t.dtype}, {t.layout}, {t.device}, {_numel(t)} elements)"}
    data = _reshape(_contiguous(_detach(t)), -1)
    raw = _numpy(_view(data, torch.uint8)).tobytes() if _numel(data) else b""
    grad = t.grad if t.is_leaf else None
    origin, shares = origin_of(t) if origin_of else (None, None)
    return {"__tensor__": {
        "dtype": str(t.dtype).removeprefix("torch."),
        "shape": list(t.shape),
        "data": base64.b64encode(raw).decode("ascii"),
        "requires_grad": bool(t.requires_grad),
        "is_leaf": bool(t.is_leaf),
        "grad_fn": type(t.grad_fn).__name__ if t.grad_fn is not None else None,
        "grad": (_encode_tensor(grad, None) if type(grad) in (torch.Tensor, torch.nn.Parameter)
                 else {"__unsupported__": "a tensor subclass"} if grad is not None else None),
        "origin": origin,
        "shares": shares,
    }}


def decode(data: Any, *, live: bool = False, build: Callable[[dict], Any] | None = None) -> Any:
    """Inverse of `encode`.

    With `live=True` (inside the sandbox) tensors get back requires_grad and
    .grad, and recipes are built with `build`. Otherwise (in the grader) a
    tensor comes back as a plain tensor with a `TensorInfo` in `.info`.
    """
    if isinstance(data, list):
        return [decode(v, live=live, build=build) for v in data]
    if isinstance(data, str) and not live:
        return cut(data)
    if not isinstance(data, dict):
        return data
    (tag, body), = data.items()
    if tag == "__float__":
        return float(body)
    if tag == "__tuple__":
        return tuple(decode(v, live=live, build=build) for v in body)
    if tag == "__dict__":
        return {k if live else cut(k, 200): decode(v, live=live, build=build)
                for k, v in body.items()}
    if tag == "__dtype__":
        return _DTYPES[body]
    if tag == "__unsupported__":
        return Unsupported(body if live else cut(str(body), 200))
    if tag == "__recipe__":
        if build is None:
            raise ValueError("a recipe can only be built inside the sandbox")
        return build(body)
    if tag == "__tensor__":
        return _decode_tensor(body, live)
    raise ValueError(f"unknown wire tag {tag!r}")


def _decode_tensor(body: dict, live: bool) -> torch.Tensor:
    dtype = _DTYPES[body["dtype"]]
    raw = bytearray(base64.b64decode(body["data"]))
    flat = torch.frombuffer(raw, dtype=dtype) if raw else torch.empty(0, dtype=dtype)
    t = flat.reshape(body["shape"]).clone()
    grad = _decode_tensor(body["grad"]["__tensor__"], live) if body.get("grad") else None
    if live:
        if body.get("requires_grad"):
            t.requires_grad_(True)
            t.grad = grad
        return t
    t.info = TensorInfo(bool(body["requires_grad"]), bool(body["is_leaf"]), _name(body["grad_fn"]),
                        grad, _name(body.get("origin")), _name(body.get("shares")))
    return t


def _name(value) -> str | None:
    return None if value is None else cut(str(value), 200)


def dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def loads(raw: bytes) -> Any:
    return json.loads(raw)

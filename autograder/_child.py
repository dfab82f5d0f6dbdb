"""The sandboxed side: runs in the child process, never in the grader.

Imported by the fork server before any learner code exists, so torch is
loaded once and every child starts from a clean, single-threaded process.
"""

from __future__ import annotations

import inspect
import os
import resource
import sys
import traceback

import matplotlib
import torch
from torch.overrides import TorchFunctionMode, resolve_name

matplotlib.use("Agg")  # setup cells import pyplot; load it once here, headless
import matplotlib.pyplot  # noqa: E402,F401

from autograder import wire

torch.set_num_threads(1)
_CELL = "<notebook cell {}>"


class _Recorder(TorchFunctionMode):
    """Records every torch function the learner's code calls directly."""

    def __init__(self):
        super().__init__()
        self.seen: set[str] = set()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        try:
            self.seen.add(resolve_name(func) or getattr(func, "__qualname__", repr(func)))
        except Exception:
            pass
        return func(*args, **(kwargs or {}))


def _limit_resources(memory_limit: int) -> None:
    with open("/proc/self/status") as status:
        vm = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmSize"))
    resource.setrlimit(resource.RLIMIT_AS, (vm + memory_limit, vm + memory_limit))
    resource.setrlimit(resource.RLIMIT_CPU, (600, 600))  # backstop if the grader vanished
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # learner prints must not reach the grader's terminal
        os.dup2(devnull, fd)


def _exception(error: BaseException) -> dict:
    frames = [f for f in traceback.extract_tb(error.__traceback__)
              if f.filename.startswith("<notebook cell")]
    where = "".join(traceback.format_list(frames[-3:]))
    return {"type": type(error).__name__,
            "bases": [c.__name__ for c in type(error).__mro__],
            "message": str(error)[:2000], "where": where}


def _tensors(value, path, out):
    """Yield (path, tensor) for tensors inside args (lists, tuples, dicts)."""
    if isinstance(value, torch.Tensor):
        out.append((path, value))
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _tensors(v, f"{path}[{i}]", out)
    elif isinstance(value, dict):
        for k, v in value.items():
            _tensors(v, f"{path}[{k!r}]", out)
    elif isinstance(value, torch.nn.Module):
        for k, v in value.named_parameters():
            out.append((f"{path}.{k}", v))
    return out


def _run_cells(cells: list[str]) -> tuple[dict, list[str]]:
    namespace = {"__name__": "__main__"}
    errors = []
    for i, source in enumerate(cells, 1):
        try:
            exec(compile(source, _CELL.format(i), "exec"), namespace)
        except BaseException as error:  # noqa: BLE001 - learner code may raise anything
            errors.append(f"{type(error).__name__}: {error}"[:500])
    return namespace, errors


def _call(namespace: dict, request: dict) -> dict:
    function = namespace.get(request["call"])
    if not callable(function):
        return {"status": "missing"}
    named: dict = {}

    def build(recipe: dict):
        scope = {"torch": torch, "NAMED": named}
        exec(compile(recipe["source"], "<grader recipe>", "exec"), scope)
        return scope[recipe["name"]](*wire.decode(recipe["args"], live=True))

    args = wire.decode(request["args"], live=True, build=build)
    kwargs = wire.decode(request["kwargs"], live=True, build=build)
    try:
        params = list(inspect.signature(function).parameters)
    except (TypeError, ValueError):
        params = []
    # Each input tensor gets two paths: the learner's parameter name for messages
    # ("W", "params[2]") and a positional origin ("arg0[2]") that does not depend on it.
    inputs = []  # (origin, label, tensor)
    for i, a in enumerate(args):
        label = params[i] if i < len(params) else f"argument {i + 1}"
        inputs += [(p, label + p[len(f"arg{i}"):], t) for p, t in _tensors(a, f"arg{i}", [])]
    inputs += [(p, p, t) for k, v in kwargs.items() for p, t in _tensors(v, k, [])]
    before = [(label, t, t.detach().clone()) for _, label, t in inputs]
    origins = {id(t): origin for origin, _, t in inputs}
    for key, obj in named.items():
        origins.update({id(t): p for p, t in _tensors(obj, key, [])})

    def origin_of(t):
        return origins.get(id(t))

    # The grader's own versions of the other graded functions stand in for the
    # learner's while this one runs, so one broken function costs only its own points.
    saved = {k: namespace.get(k) for k in request.get("references", {})}
    for name, source in request.get("references", {}).items():
        scope = {"torch": torch}
        exec(compile(source, "<grader reference>", "exec"), scope)
        namespace[name] = scope[name]
    recorder = _Recorder()
    try:
        with recorder:
            value = function(*args, **kwargs)
        status, exc = "ok", None
    except BaseException as error:  # noqa: BLE001
        status, value, exc = "exception", None, _exception(error)
    finally:
        namespace.update(saved)
    mutated = [p for p, t, old in before
               if t.shape != old.shape or t.dtype != old.dtype
               or not torch.equal(t.detach(), old)]
    reply = {"status": status, "exception": exc, "used": sorted(recorder.seen),
             "mutated": mutated}
    try:
        reply["value"] = wire.encode(value, origin_of)
        reply["args_after"] = wire.encode(tuple(args), origin_of)
        reply["named_after"] = wire.encode(
            {k: v for k, v in named.items() if not isinstance(v, torch.nn.Module)}
            | {f"{k}.{n}": p for k, v in named.items() if isinstance(v, torch.nn.Module)
               for n, p in v.named_parameters()}, origin_of)
    except BaseException as error:  # noqa: BLE001 - a hostile return value
        reply.update(status="exception", value=None, args_after=None, named_after=None,
                     exception={"type": "UnreadableResult", "bases": ["UnreadableResult"],
                                "message": f"the returned value could not be read: {error}",
                                "where": ""})
    return reply


def main(conn, cells: list[str], memory_limit: int) -> None:
    """Child entry point: run the cells, then answer calls until the pipe closes."""
    _limit_resources(memory_limit)
    send = conn.send_bytes
    namespace, errors = _run_cells(cells)
    defined = sorted(k for k, v in namespace.items() if callable(v) and not k.startswith("__"))
    send(wire.dumps({"status": "loaded", "defined": defined, "errors": errors}))
    while True:
        try:
            request = wire.loads(conn.recv_bytes())
        except (EOFError, OSError):
            os._exit(0)
        try:
            reply = _call(namespace, request)
        except BaseException as error:  # noqa: BLE001
            reply = {"status": "exception", "exception": _exception(error), "used": [],
                     "mutated": []}
        try:
            send(wire.dumps(reply))
        except BaseException:  # noqa: BLE001
            os._exit(3)
    sys.exit(0)

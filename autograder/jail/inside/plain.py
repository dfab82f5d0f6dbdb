"""The plain-value checks of a call: the grader reads only objects of exact plain types.

A tensor subclass, a list subclass or any object of the learner's own could run learner code
while the grader reads it: `_only_plain` says whether a stand-in's arguments are plain (then its
work goes unrecorded), `_plain` checks a returned value before it is encoded.
"""

from __future__ import annotations

import torch

from autograder.jail.inside import wire

_PLAIN_VALUES = (torch.Tensor, torch.nn.Parameter, int, float, bool, complex, str, type(None),
                 torch.dtype, torch.Size, torch.device, slice)


def _only_plain(args, kwargs, depth: int = 0) -> bool:
    """Whether a call's arguments hold only values of exact plain types (tensors, numbers, strings,
    dtypes; lists, tuples and dicts of them): nothing that runs code of the learner's when read."""
    stack = [(args, 0), (kwargs, 0)]
    while stack:
        value, depth = stack.pop()
        kind = type(value)
        if kind in _PLAIN_VALUES:
            continue
        if depth > 20 or kind not in (list, tuple, dict):
            return False
        stack.extend((v, depth + 1) for v in (dict.values(value) if kind is dict else value))
    return True


class _NotPlain(TypeError):
    """A returned value holds an object of a type the grader does not read (its message says which)."""


_PLAIN_TENSORS = (torch.Tensor, torch.nn.Parameter)


def _plain(value, depth: int = 0):
    """`value` checked to hold only exact plain types (a tensor subclass, or a list subclass, could
    run learner code while the grader reads it): tensors, numbers, strings, None, dtypes,
    torch.Size, and lists, tuples and str-keyed dicts of them; other objects are left for the
    encoder to report as unsupported, never called."""
    kind = type(value)
    if depth > 50:
        raise _NotPlain("the returned value is nested too deeply")
    if kind in _PLAIN_TENSORS:
        return value
    if isinstance(value, torch.Tensor):
        raise _NotPlain(f"the returned value holds a {kind.__name__[:80]}, a subclass of "
                        "torch.Tensor: return a plain tensor")
    if value is None or kind in (bool, int, float, str, torch.dtype, torch.Size):
        return value
    # Containers, subclasses too (torch.max's named tuple), read through the base type's own
    # methods, never the subclass's.
    if isinstance(value, (list, tuple)):
        base = list if isinstance(value, list) else tuple
        return base(_plain(base.__getitem__(value, i), depth + 1) for i in range(base.__len__(value)))
    if isinstance(value, dict):
        items = dict.items(value)
        if not all(type(k) is str for k, _ in items):
            return wire.Unsupported("dict")
        return {str.__str__(k): _plain(v, depth + 1) for k, v in items}
    # a subclass of a number or string (numpy's float64 is one): its plain value, read by the
    # base type's own method, never the subclass's
    for base in (int, float, str):
        if isinstance(value, base) and kind is not bool:
            return getattr(base, f"__{base.__name__}__")(value)
    return wire.Unsupported(kind.__qualname__[:80])

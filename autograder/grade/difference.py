"""What a wrong tensor has in common with the right one: the difference, described.

When no listed mistake explains a learner's value, `describe` looks at the difference itself
and says what shape it has, computed from the two values and the call's inputs (never guessed):
NaN or inf where the answer is finite; all zeros; an input returned as it came (or transposed,
or negated); the answer transposed or with its axes in another order; the answer times a
constant, naming which quantity of the inputs the constant equals (a size, a count of entries,
a scalar argument such as the learning rate); the answer plus a constant, or plus one vector in
every row (a bias's shape, named when it is a multiple of an input); right on a leading
stretch along the first axis (the first k steps, rows) and wrong after; wrong only at one index
of an axis (the first row, the last column); wrong exactly where a condition on a same-shaped
input holds (z == 0, z < 0, ...). It returns "" when the difference has none of these shapes.
"""

from __future__ import annotations

import itertools
import math
from typing import Sequence

import torch

Inputs = Sequence[tuple[str, object]]
"""The call's arguments as (name, value): names are the parameter names ("W", "lr")."""


def _isclose(a: torch.Tensor, b: torch.Tensor, rtol: float, atol: float) -> torch.Tensor:
    return torch.isclose(a, b, rtol=rtol, atol=atol, equal_nan=True)


def _all_close(a: torch.Tensor, b: torch.Tensor, rtol: float, atol: float) -> bool:
    return a.shape == b.shape and bool(_isclose(a, b, rtol, atol).all())


def _number(x: float) -> str:
    if float(x).is_integer():
        return str(int(x))
    return f"{x:.4g}"


def _index(flat: int, shape) -> tuple[int, ...]:
    return tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), tuple(shape)))


def quantities(inputs: Inputs) -> list[tuple[float, str]]:
    """Numbers a constant factor or offset could equal, each with the words that name it."""
    found: list[tuple[float, str]] = []
    for name, value in inputs:
        if isinstance(value, torch.Tensor):
            if value.dim() >= 1:
                for d, size in enumerate(value.shape):
                    words = f"{name}.shape[{d}]"
                    if d == 0 and value.dim() >= 2:
                        words += ", the number of rows (the batch size)"
                    elif d == 0:
                        words = f"len({name}), the number of entries of {name}"
                    found.append((float(size), words))
                if value.dim() >= 2:
                    found.append((float(value.numel()), f"{name}.numel(), the number of entries of {name}"))
        elif isinstance(value, bool):
            continue
        elif isinstance(value, (int, float)) and math.isfinite(value) and value != 0:
            found.append((float(value), name))
            if 0 < value < 1:
                found.append((1.0 - float(value), f"1 - {name}"))
    found += [(2.0, "2"), (0.5, "1/2")]
    return found


def _names(c: float, inputs: Inputs) -> list[str]:
    """What the inputs hold, or the plain constants 2 and 1/2, that equals the constant c."""
    return list(dict.fromkeys(words for value, words in quantities(inputs)
                              if math.isclose(c, value, rel_tol=1e-6)))


def _named(c: float, inputs: Inputs) -> str:
    """"; C is what it equals" for a constant c (what the inputs hold that equals it), or "" (also
    for a plain 2 or 1/2: "2 is 2" would name nothing)."""
    names = [words for words in _names(c, inputs) if words not in ("2", "1/2")]
    if not names:
        return ""
    return f"; {_number(c)} is " + " or ".join(names)


def describe(got: torch.Tensor, expected: torch.Tensor, inputs: Inputs = (),
             rtol: float = 1e-5, atol: float = 1e-8) -> str:
    """A sentence saying what shape the difference between `got` and `expected` has (same
    shapes), or "" when it has none this module knows."""
    try:
        g, e = got.detach().double(), expected.detach().double()
    except (RuntimeError, TypeError):
        return ""
    if g.shape != e.shape or g.numel() == 0:
        return ""
    for finder in (_non_finite, _zeros, _an_input, _transposed, _factor, _offset, _row_offset,
                   _inverted, _condition, _leading, _one_index):
        said = finder(g, e, inputs, rtol, atol)
        if said:
            return said
    return ""


def describe_shape(got: torch.Tensor, expected: torch.Tensor, inputs: Inputs = (),
                   rtol: float = 1e-5, atol: float = 1e-8) -> str:
    """For a result of the wrong shape: the expected one with its axes in another order, or an
    input returned unchanged; else ""."""
    try:
        g, e = got.detach().double(), expected.detach().double()
    except (RuntimeError, TypeError):
        return ""
    if g.dim() == e.dim() and g.dim() >= 2 and sorted(g.shape) == sorted(e.shape):
        for order in itertools.permutations(range(e.dim())):
            if list(order) != list(range(e.dim())) and e.permute(order).shape == g.shape \
                    and _all_close(g, e.permute(order), rtol, atol):
                what = "transposed" if e.dim() == 2 else f"with its axes in the order {order}"
                return f"your result is the expected one {what}."
    return (_size_one(g, e, rtol, atol) or _reduced(g, e, rtol, atol)
            or _an_input(g, e, inputs, rtol, atol, any_shape=True))


def _size_one(g, e, rtol, atol) -> str:
    """The right values with a dimension of size 1 too many or too few."""
    if g.numel() != e.numel() or g.numel() == 0 or g.dim() == e.dim() \
            or [s for s in g.shape if s != 1] != [s for s in e.shape if s != 1] \
            or not _all_close(g.reshape(e.shape), e, rtol, atol):
        return ""
    if g.dim() > e.dim():
        return ("the values are right; the shape has a dimension of size 1 too many (a sum or a "
                "mean with keepdim=True, or an unsqueeze, adds one).")
    return ("the values are right; the shape lacks a dimension of size 1 (a squeeze, or an "
            "index [0], removes one).")


def _reduced(g, e, rtol, atol) -> str:
    """The expected result summed or averaged, over every entry or over one dimension."""
    if g.numel() >= e.numel() or e.numel() <= 1:
        return ""
    rtol, atol = max(rtol, 1e-6) * 10, max(atol, 1e-9) * 10  # a sum adds rounding
    if g.numel() == 1:
        for name, value in (("sum", e.sum()), ("mean", e.mean())):
            if _all_close(g.reshape(()), value, rtol, atol):
                return (f"your result is one number, the {name} of all the {e.numel()} entries "
                        f"expected: return them all, with no reduction.")
    for d in range(e.dim()):
        for name, value in (("summed", e.sum(d)), ("averaged", e.mean(d))):
            for kept in (value, value.unsqueeze(d)):
                if kept.shape == g.shape and _all_close(g, kept, rtol, atol):
                    return (f"your result is the expected one {name} over dim {d} (shape "
                            f"{tuple(g.shape)} where {tuple(e.shape)} is expected): that "
                            f"dimension must stay.")
    return ""


def describe_number(got, expected: torch.Tensor, inputs: Inputs = ()) -> str:
    """For a Python number where a tensor is expected: where such a number comes from."""
    kind = "float" if isinstance(got, float) else "int"
    empty = [name for name, v in inputs if isinstance(v, torch.Tensor) and v.numel() == 0]
    if got == 0 and empty and expected.numel() > 0:
        return (f"an input is empty ({empty[0]} has a dimension of size 0): Python's sum() of no "
                f"terms is the int 0, and a loop over no rows adds nothing; build the result with "
                f"torch so that it keeps its shape {tuple(expected.shape)} (torch.zeros, or a "
                f"tensor's .sum(dim)).")
    if expected.dim() == 0:
        return (f"a Python {kind} is a number, not a tensor: .item() or {kind}() turns a 0-dim "
                f"tensor into one; return the 0-dim tensor itself.")
    return f"a Python {kind}, where a tensor of shape {tuple(expected.shape)} is expected."


def _non_finite(g, e, inputs, rtol, atol) -> str:
    bad = ~torch.isfinite(g) & torch.isfinite(e)
    if not bad.any():
        return ""
    first = _index(int(bad.flatten().nonzero()[0]), g.shape)
    kinds = " or ".join(k for k, m in (("NaN", torch.isnan(g)), ("inf", torch.isinf(g)))
                        if (m & bad).any())
    where = f" (first at index {first})" if g.dim() else ""
    return (f"{int(bad.sum())} of {g.numel()} entries are {kinds} where the expected values are "
            f"finite{where}: NaN and inf come from 0/0, a division by 0, log(0) or an overflow.")


def _zeros(g, e, inputs, rtol, atol) -> str:
    if bool((g == 0).all()) and not bool((e == 0).all()):
        return "every entry of your result is 0."
    return ""


def _an_input(g, e, inputs, rtol, atol, any_shape: bool = False) -> str:
    for name, value in inputs:
        if not isinstance(value, torch.Tensor) or not value.is_floating_point():
            continue
        v = value.detach().double()
        if v.shape == e.shape and not any_shape and _all_close(v, e, rtol, atol):
            continue  # the answer is the input here: being it is no mistake
        if _all_close(g, v, rtol, atol):
            return f"your result equals the input {name}, as it came in."
        if _all_close(g, -v, rtol, atol) and bool((v != 0).any()):
            return f"your result equals -{name}, the input with its sign flipped."
        if v.dim() == 2 and _all_close(g, v.T, rtol, atol):
            return f"your result equals the input {name} transposed."
    return ""


def _inverted(g, e, inputs, rtol, atol) -> str:
    """Entries kept where the expected result drops them and dropped where it keeps them: the
    two add up to an input (or to 1 for a 0/1 mask), and never both hold a nonzero entry."""
    if not bool((g != 0).any()) or not bool((e != 0).any()) or bool(((g != 0) & (e != 0)).any()):
        return ""
    total = g + e
    for name, value in inputs:
        if isinstance(value, torch.Tensor) and value.is_floating_point() \
                and value.shape == e.shape and _all_close(total, value.detach().double(), rtol, atol):
            return (f"your result keeps the entries of {name} that the expected one drops, and "
                    f"drops those it keeps: the condition (the mask) is inverted.")
    if bool(((e == 0) | (e == 1)).all()) and _all_close(total, torch.ones_like(e), rtol, atol):
        return "your result is 1 where the expected one is 0 and 0 where it is 1: the condition is inverted."
    return ""


def _transposed(g, e, inputs, rtol, atol) -> str:
    if g.dim() == 2 and g.shape[0] == g.shape[1] and _all_close(g, e.T, rtol, atol):
        return "your result is the expected one transposed: entry [i, j] holds the expected [j, i]."
    return ""


def _factor(g, e, inputs, rtol, atol) -> str:
    norm = float((e * e).sum())
    if norm == 0:
        return ""
    c = float((g * e).sum()) / norm
    if not math.isfinite(c) or math.isclose(c, 1.0, rel_tol=1e-6) or c == 0:
        return ""
    if not _all_close(g, c * e, rtol, atol):
        return ""
    if math.isclose(c, -1.0, rel_tol=1e-6):
        return "every entry has the wrong sign: your result is -1 times the expected one."
    if abs(c) < 1 and _names(1.0 / c, inputs):
        return (f"every entry is the expected value divided by {_number(1.0 / c)}"
                f"{_named(1.0 / c, inputs)}.")
    return f"every entry is {_number(c)} times the expected value{_named(c, inputs)}."


def _offset(g, e, inputs, rtol, atol) -> str:
    if g.numel() < 2:
        return ""
    d = g - e
    shift = float(d.flatten()[0])
    if shift == 0 or not _all_close(g, e + shift, rtol, atol):
        return ""
    return (f"every entry is off by the same amount, {shift:+.4g}{_named(abs(shift), inputs)}: "
            "a constant is added or left out.")


def _row_offset(g, e, inputs, rtol, atol) -> str:
    """Every row off by the same vector (one offset per column, as a bias adds), named when it
    is a small multiple of a 1-D input."""
    if g.dim() != 2 or g.shape[0] < 2:
        return ""
    d = g - e
    row = d[0]
    if not _all_close(g, e + row, rtol, atol) or _all_close(row, torch.zeros_like(row), rtol, atol):
        return ""
    named = ""
    for name, value in inputs:
        if isinstance(value, torch.Tensor) and value.dim() == 1 and value.shape == row.shape \
                and value.is_floating_point():
            for k in (1.0, -1.0, 2.0, -2.0):
                if _all_close(row, k * value.detach().double(), rtol, atol):
                    named = f": the offset is {'' if k == 1 else '-' if k == -1 else _number(k) + ' · '}{name}"
                    break
        if named:
            break
    return (f"every row is off by the same vector (one offset per column, as a bias adds to "
            f"every row){named}.")


def _wrong(g, e, rtol, atol) -> torch.Tensor:
    return ~_isclose(g, e, rtol, atol)


def _leading(g, e, inputs, rtol, atol) -> str:
    """Right for the first k entries along dim 0 (steps, rows), wrong at every one from k on."""
    if g.dim() == 0 or g.shape[0] < 3:
        return ""
    rows = _wrong(g, e, rtol, atol).reshape(g.shape[0], -1).any(dim=1)
    k = int(rows.nonzero()[0]) if rows.any() else g.shape[0]
    if not 0 < k < g.shape[0] or not bool(rows[k:].all()):
        return ""
    if g.dim() == 1:
        return (f"the first {k} entr{'y is' if k == 1 else 'ies are'} right (for a sequence of "
                f"steps: the first {'step' if k == 1 else f'{k} steps'}); from index {k} on they "
                "differ.")
    # rows of a matrix: a coincidence when few, or when the right rows are all zero
    if k < 2 or bool((e[:k] == 0).all()):
        return ""
    return f"the first {k} rows are right; from row {k} on they differ."


def _one_index(g, e, inputs, rtol, atol) -> str:
    """Wrong only at one index of one axis (the first row, the last column, entry 0)."""
    wrong = _wrong(g, e, rtol, atol)
    if g.dim() == 0 or wrong.all():
        return ""
    for dim in range(g.dim()):
        if g.shape[dim] < 2:
            continue
        hit = wrong.transpose(0, dim).reshape(g.shape[dim], -1).any(dim=1)
        if int(hit.sum()) == 1:
            i = int(hit.nonzero()[0])
            place = ("first" if i == 0 else "last" if i == g.shape[dim] - 1 else f"index-{i}")
            if g.dim() == 1:
                return f"only the {place} entry (index {i}) is wrong; every other entry is right."
            unit = "row" if dim == 0 else "column" if dim == 1 else f"slice along dim {dim}"
            return (f"only the {place} {unit} (index {i} along dim {dim}) is wrong; every other "
                    f"{unit} is right.")
    return ""


CONDITIONS = (("== 0", lambda t: t == 0), ("< 0", lambda t: t < 0), ("> 0", lambda t: t > 0),
              ("<= 0", lambda t: t <= 0), (">= 0", lambda t: t >= 0))


def _condition(g, e, inputs, rtol, atol) -> str:
    """Wrong exactly where a condition on a same-shaped input (or on the answer) holds."""
    wrong = _wrong(g, e, rtol, atol)
    if wrong.all() or not wrong.any():
        return ""
    candidates = [(name, v.detach().double()) for name, v in inputs
                  if isinstance(v, torch.Tensor) and v.shape == g.shape and v.dtype != torch.bool]
    candidates.append(("the expected value", e))
    for name, v in candidates:
        for words, condition in CONDITIONS:
            mask = condition(v)
            if bool(mask.any()) and torch.equal(mask, wrong):
                return (f"your result is wrong exactly where {name} {words} "
                        f"({int(mask.sum())} of {g.numel()} entries) and right everywhere else.")
    return ""


def _times(n: int) -> str:
    return {1: "once", 2: "twice"}.get(n, f"{n} times")


def describe_list(got: list, expected: list, noun: str = "items") -> str:
    """What a wrong list has in common with the right one: the same items in another order
    (reversed, sorted, or first out of place where), items repeated or missing or extra (named),
    a right beginning; "" when the lists are equal."""
    got, expected = [str(g) for g in got], [str(e) for e in expected]
    if got == expected:
        return ""
    from collections import Counter
    have, want = Counter(got), Counter(expected)

    def some(items) -> str:
        items = list(items)
        return ", ".join(items[:5]) + (f" and {len(items) - 5} more" if len(items) > 5 else "")

    if have == want:
        if got == expected[::-1]:
            return f"the same {noun}, in reverse order."
        if got == sorted(expected):
            return f"the same {noun}, sorted: not in the order they come in."
        i = next(i for i, (g, e) in enumerate(zip(got, expected)) if g != e)
        return (f"the same {noun} in another order: the first {i} are right, then position {i} "
                f"holds {got[i]} where {expected[i]} comes.")
    parts = []
    extra_copies = {k: have[k] - want[k] for k in have if want[k] and have[k] > want[k]}
    fewer = {k: want[k] - have[k] for k in want if have[k] and have[k] < want[k]}
    missing = [k for k in want if not have[k]]
    extra = [k for k in have if not want[k]]
    if extra_copies:
        parts.append("listed more often than they occur: " + some(
            f"{k} ({_times(have[k])}, {_times(want[k])} expected)" for k in extra_copies))
    if fewer:
        parts.append("listed less often than they occur: " + some(
            f"{k} ({_times(have[k])}, {_times(want[k])} expected)" for k in fewer))
    if missing:
        parts.append(f"missing {noun}: " + some(missing))
    if extra:
        parts.append(f"{noun} that do not belong: " + some(extra))
    head = next((i for i, (g, e) in enumerate(zip(got, expected)) if g != e), min(len(got), len(expected)))
    start = f"the first {head} {noun} are right; " if head else ""
    return start + "; ".join(parts) + "."

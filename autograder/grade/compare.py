"""Compare a learner's value with PyTorch's and say, in plain words, what differs.

The order of checks is the order a learner should fix things in:
type, then shape, then dtype, then values; when a wrong value equals a known
mistake (W instead of Wᵀ, a dropped factor 2, ...) the message names it.
"""

from __future__ import annotations

from typing import Callable, Mapping

import torch

from autograder.grade import causes, difference, errors
from autograder.jail.inside.wire import Unsupported

__all__ = ["GradingFailure", "alternatives", "described_list", "expect_tensor", "expect_equal", "fail",
           "order_hint",
           "misplaced", "raised_hint", "raised_mistakes", "stale"]

TOLERANCE = {torch.float64: (1e-7, 1e-9), torch.float32: (1e-4, 1e-5),
             torch.float16: (1e-2, 1e-3), torch.bfloat16: (2e-2, 1e-2)}
"""dtype -> (rtol, atol): loose enough for a different summation order."""


_inputs: list[tuple[str, object]] = []
"""The arguments of the learner's last call, by parameter name (`note_inputs`): what a
described difference may name ("4 = x.shape[0]", "where z == 0")."""


def note_inputs(inputs) -> None:
    """Remember the arguments of the call whose result is compared next (the harness does)."""
    _inputs[:] = list(inputs)


def _described(got, expected: torch.Tensor, shape: bool = False) -> str:
    """"\nWhat differs: ..." (difference.describe) or ""."""
    rtol, atol = TOLERANCE.get(expected.dtype, (1e-7, 1e-9))
    try:
        said = (difference.describe_shape if shape else difference.describe)(
            got, expected, _inputs, rtol=rtol, atol=atol)
    except Exception:  # noqa: BLE001 - a description is extra; the message stands without it
        said = ""
    return f"\nWhat differs: {said}" if said else ""


def _caused(got, expected: torch.Tensor, listed: str = "") -> str:
    """`listed` (the hint of a known mistake whose value this is) or, without one, "\nHint: ..."
    naming the causes the error model finds in the learner's code (causes.explain), or ""."""
    if listed:
        return listed
    rtol, atol = TOLERANCE.get(expected.dtype, (1e-7, 1e-9))
    try:
        said = causes.explain(got, expected, rtol, atol)
    except Exception:  # noqa: BLE001 - a cause is extra; the message stands without it
        said = []
    return alternatives(said)


def described_list(got, expected, noun: str = "items") -> str:
    """"\nWhat differs: ..." for a list that is not the expected one (difference.describe_list)."""
    said = difference.describe_list(list(got), list(expected), noun)
    return f"\nWhat differs: {said}" if said else ""


class GradingFailure(AssertionError):
    """A check failed; the message is written for the learner."""


def fail(message: str) -> None:
    __tracebackhide__ = True
    raise GradingFailure(message)


def _shape(t) -> str:
    return "(" + ", ".join(str(s) for s in t.shape) + (",)" if len(t.shape) == 1 else ")")


def _close(got: torch.Tensor, expected: torch.Tensor) -> bool:
    if got.shape != expected.shape:
        return False
    rtol, atol = TOLERANCE.get(expected.dtype, (0.0, 0.0))
    return bool(torch.allclose(got.double(), expected.double(), rtol=rtol, atol=atol,
                               equal_nan=True))


def expect_tensor(got, expected: torch.Tensor, what: str, *,
                  mistakes: Mapping[str, Callable[[], torch.Tensor]] | None = None,
                  check_dtype: bool = True) -> None:
    """Fail unless `got` is a tensor equal to `expected` (shape, dtype, values).

    `what` names the value for the learner ("linear_forward(x, W, b)").
    `mistakes` maps a hint to a function computing what that mistake would
    return; the first one that matches `got` is added to the message.
    """
    __tracebackhide__ = True
    if isinstance(got, Unsupported) or not isinstance(got, torch.Tensor):
        kind = got.type_name if isinstance(got, Unsupported) else type(got).__name__
        hint = _diagnose(got, expected, mistakes) if isinstance(got, (tuple, list)) else ""
        if not hint and isinstance(got, (int, float)) and not isinstance(got, bool):
            hint = f"\nWhat differs: {difference.describe_number(got, expected, _inputs)}"
        fail(f"{what} returned a {kind}; expected a torch.Tensor of shape {_shape(expected)}.{hint}")
    # The listed mistakes are computed only for a wrong answer (a right one pays nothing for them).
    if got.shape != expected.shape:
        fail(f"{what}: the shape is {_shape(got)}; expected {_shape(expected)}."
             f"{_caused(got, expected, _diagnose(got, expected, mistakes)) or _described(got, expected, shape=True)}")
    if got.dtype == torch.bool and expected.dtype != torch.bool:
        fail(f"{what}: the dtype is torch.bool; expected {expected.dtype}. Comparisons like "
             f"`z > 0` give booleans: convert with `.to(z.dtype)`.{_diagnose(got, expected, mistakes)}")
    if check_dtype and got.dtype != expected.dtype:
        fail(f"{what}: the dtype is {got.dtype}; expected {expected.dtype} (the dtype of the "
             f"inputs).{_diagnose(got, expected, mistakes)}")
    if _close(got, expected):
        return
    hint = _diagnose(got, expected, mistakes)
    diff = (got.double() - expected.double()).abs()
    diff = torch.where(torch.isnan(diff), torch.full_like(diff, float("inf")), diff)
    index = tuple(int(i) for i in torch.unravel_index(diff.argmax(), diff.shape)) \
        if diff.dim() else ()
    where = f" at index {index}" if index else ""
    rtol, atol = TOLERANCE.get(expected.dtype, (0.0, 0.0))
    fail(f"{what}: right shape but wrong values: largest difference "
         f"{diff.max().item():.3g}{where} (expected {expected[index].item():.6g}, "
         f"got {got[index].item():.6g}; tolerance rtol={rtol:g}, atol={atol:g})."
         f"{_caused(got, expected, hint) or _described(got, expected)}")


STALE = ("{} returned the same result for new values of the same shape: does it keep results from "
         "an earlier call? Compute the result from the inputs every time.")


def stale(mistakes: dict, name: str, earlier) -> dict:
    """`mistakes` with the hint for a result kept from an earlier call, when there was one
    (`earlier`: what `name` returned for other values of the same shapes)."""
    if earlier is not None:
        mistakes[STALE.format(name)] = lambda: earlier
    return mistakes


def _same(got, candidate) -> bool:
    """Whether the learner's value is the candidate's: a tensor (values compared in the
    candidate's dtype), or a tuple / list of them, item by item."""
    if isinstance(candidate, torch.Tensor):
        return isinstance(got, torch.Tensor) and _close(got.to(candidate.dtype), candidate)
    if isinstance(candidate, (tuple, list)) and isinstance(got, (tuple, list)):
        return len(got) == len(candidate) and all(_same(g, c) for g, c in zip(got, candidate))
    return False


class _Fallback(str):
    """A hint `_diagnose` gives only when no other mistake gives the learner's value (a listed
    mistake may say the same in the exercise's words: "that is grad_W")."""


def misplaced(expected: Mapping[str, object], name: str) -> dict[str, Callable[[], object]]:
    """For one value of a result that holds several (the entries of a dict, the items of a
    tuple), by the names the messages give them: the mistake of putting another one's value in
    its place, as `mistakes` for expect_tensor (it fires only when the learner's value is that
    other one's expected value, and that value differs from the right one)."""
    return {_Fallback(f"{name} holds the value that belongs in {other}: check which value you "
                      f"put where."): (lambda value=value: value)
            for other, value in expected.items() if other != name and isinstance(value, torch.Tensor)}


def _diagnose(got, expected: torch.Tensor, mistakes) -> str:
    """The hint of every mistake whose value on this input is the learner's value. When two
    mistakes give the same value here (a summed loss and a doubled gradient, when the output has
    2 entries), both are named as alternatives: naming one alone could blame the wrong one.
    A mistake's value may be a tuple of tensors (`torch.max(z, 0)` returns values and indices)."""
    matches = []
    for hint, wrong in (mistakes or {}).items():
        try:
            candidate = wrong()
        except Exception:  # a mistake that cannot even be computed is not this one
            continue
        if isinstance(candidate, tuple) and hasattr(candidate, "_fields"):
            candidate = tuple(candidate)      # torch.return_types: a plain tuple, as on the wire
        if not isinstance(candidate, (torch.Tensor, tuple, list)) or (
                isinstance(candidate, torch.Tensor)
                and candidate.dtype == expected.dtype and _close(candidate, expected)):
            continue  # on this input the mistake gives the right answer: it cannot be the cause
        if _same(got, candidate):
            matches.append(hint)
    named = [h for h in matches if not isinstance(h, _Fallback)]
    return alternatives(named or matches)


def order_hint(got, expected, names: tuple[str, ...]) -> str:
    """The hint for results returned in another order: `got` holds exactly the expected tensors
    (by shape and value), permuted. `names` spell the expected order, e.g. ("W", "b")."""
    if not isinstance(got, (tuple, list)) or len(got) != len(expected):
        return ""
    if not all(isinstance(g, torch.Tensor) for g in got):
        return ""
    import itertools
    for perm in itertools.permutations(range(len(expected))):
        if list(perm) == list(range(len(expected))):
            continue
        if all(_close(got[i].to(expected[j].dtype), expected[j]) if got[i].shape == expected[j].shape
               else False for i, j in enumerate(perm)):
            spelled = ", ".join(names[j] for j in perm)
            return (f"\nHint: the results are in the wrong order: you returned ({spelled}); "
                    f"return ({', '.join(names)}).")
    return ""


def alternatives(hints) -> str:
    """"\nHint: ..." for one matching mistake; for several, each of them as an alternative."""
    hints = list(dict.fromkeys(hints))
    if not hints:
        return ""
    if len(hints) == 1:
        return f"\nHint: {hints[0]}"
    return "\nHint: on this input more than one mistake gives this value: " + " Or: ".join(
        f"({i}) {text}" for i, text in enumerate(hints, 1))


def raised_hint(reply) -> str:
    """The hint for a call that raised: the meaning of a known error message when there is one
    (it names the mistake, whatever the input), else ""."""
    exc = getattr(reply, "exception", None)
    if getattr(reply, "status", "") == "exception" and exc is not None:
        return errors.naming(exc.message)
    return ""


def raised_mistakes(reply, mistakes: Mapping[str, Callable[[], object]]) -> str:
    """For a call that raised: the hint of every mistake that raises, on this input, the very
    exception the learner's call raised (the same type and message). Each mistake is a function
    doing what the mistaken code would do (with the same stand-ins the learner's code calls),
    so a hint fires only when that mistake explains the error, never as a default."""
    exc = getattr(reply, "exception", None)
    if getattr(reply, "status", "") != "exception" or exc is None:
        return ""
    matches = []
    for hint, wrong in mistakes.items():
        try:
            wrong()
        except Exception as error:  # noqa: BLE001 - the mistake's own error is the point
            if type(error).__name__ == exc.type and str(error)[:2000] == exc.message:
                matches.append(hint)
    return alternatives(matches).removeprefix("\nHint: ")


def expect_equal(got, expected, what: str, hint: str = "") -> None:
    """Fail unless `got == expected` for plain Python values."""
    __tracebackhide__ = True
    if got != expected:
        fail(f"{what}: expected {expected!r}, got {got!r}.{' Hint: ' + hint if hint else ''}")

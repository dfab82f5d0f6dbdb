"""Name the cause of a wrong value: the error model of each graded function.

The mistakes a learner can make in one place are generated from the reference solution (the
source notebook's answer cell, `mutation.mutate`), each with a sentence in the solution's
names. When a check finds a wrong value, the mutants the learner's code shows (their changed
expression word for word, `grad_z1.T @ h`, or their two statements in that order: `supported`)
run on the inputs of the learner's call; those whose result, at the place the check looks,
equals the learner's value (or that raise the learner's error) are named: one, or a few as
alternatives. The same value alone is not evidence enough (a flipped sign in the loss and an
ascent step give the same numbers), and a sentence about code the learner does not have would
not help them. A value equal to an intermediate the solution computes (a local returned instead
of the result) is named without such evidence: that equality is a fact.

Only trusted code runs the mutants: the instructor's solution and its mutants, on the grader's
own inputs, in the assignment's reference process (reference.py: forked from the grader, a time
limit per mutant, its output silenced). The learner's value is data.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass

import torch

from autograder.grade.mutation import Mutation, marks, mutate
from autograder.grade.reference import Raised, ask, solutions
from autograder.timing import timed

__all__ = ["Call", "explain", "explain_raised", "note_call"]

MOST = 3
"""Causes a hint lists when the evidence leaves several."""


@dataclass
class Call:
    """The learner's call whose results the next checks compare."""

    assignment: str
    function: str
    args: tuple
    kwargs: dict
    code: str
    """The learner's code for the function (its answer cell and what it reaches)."""


_last: list[tuple[int, Call]] = []
_cache: dict[int, object] = {}
_serial = [0]


def note_call(call: Call | None) -> None:
    """Remember the call whose results the next checks compare (the harness does)."""
    _serial[0] += 1
    _last[:] = [(_serial[0], call)] if call is not None else []


@functools.lru_cache(maxsize=None)
def model(assignment: str, function: str) -> tuple[Mutation, ...]:
    """The mutants of `function`'s reference solution (none when it has no answer cell)."""
    _, answers = solutions(assignment)
    cell = answers.get(function)
    return tuple(mutate(cell, every=True)) if cell else ()


@timed("grader: the error model")
def _evaluate(call: Call):
    """(reference output, [(mutant index, output)]) for `call`'s inputs, or None."""
    # only a mutation the learner's code shows can be named: only those run
    written = _expressions(call.code)
    wanted = [(i, m.text) for i, m in enumerate(model(call.assignment, call.function))
              if supported(m, call.code, written)]
    if not wanted:
        return None
    return ask(call.assignment, call.function, call.args, call.kwargs, wanted)


# ---------------------------------------------------------------------------
# Matching

def _leaves(value, path=()):
    if isinstance(value, torch.Tensor):
        yield path, value
    elif isinstance(value, (list, tuple)):
        if value and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
            yield path, torch.tensor(value, dtype=torch.float64)
        for i, v in enumerate(value):
            yield from _leaves(v, path + (i,))
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _leaves(v, path + (k,))
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        yield path, torch.tensor(float(value), dtype=torch.float64)


def _at(value, path):
    for step in path:
        if isinstance(value, torch.Tensor) and type(step) is not int:
            return None  # a dict's key is no index into a tensor (a list one would be a gather)
        try:
            value = value[step]
        except (KeyError, IndexError, TypeError):
            return None
    if isinstance(value, (list, tuple)):
        try:
            return torch.tensor(value, dtype=torch.float64)
        except (TypeError, ValueError, RuntimeError):
            return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return torch.tensor(float(value), dtype=torch.float64)
    return value if isinstance(value, torch.Tensor) else None


def _same(a, b, rtol, atol) -> bool:
    if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor) or a.shape != b.shape:
        return False
    try:
        return bool(torch.allclose(a.double(), b.double(), rtol=rtol, atol=atol, equal_nan=True))
    except RuntimeError:
        return False


def _first_line(code: str, wanted: frozenset[str]) -> int | None:
    """The line of the first simple statement of `code` that makes all of `wanted`'s calls and
    attribute reads."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    lines = [n.lineno for n in ast.walk(tree)
             if isinstance(n, ast.stmt) and not hasattr(n, "body") and wanted <= marks(n)]
    return min(lines) if lines else None


def _evaluated(call: Call):
    key = next(k for k, c in _last if c is call)
    if key not in _cache:
        _cache.clear()
        _cache[key] = _evaluate(call)
    return _cache[key]


def _expressions(code: str) -> frozenset[str]:
    """Every expression of the learner's code, as ast.unparse writes it."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return frozenset()
    return frozenset(ast.unparse(n) for n in ast.walk(tree) if isinstance(n, ast.expr)
                     and not isinstance(n, (ast.Name, ast.Constant)))


def supported(m: Mutation, code: str, written: frozenset[str]) -> bool:
    """Whether the learner's code holds what mutation `m` makes: its changed expression word
    for word (`grad_z1.T @ h`), or its two statements in its order (`g = h.grad` before
    `L.backward()`). A sentence about the solution's code is only worth saying when the
    learner's code shows it: the same value alone is often a coincidence of another cause
    (a flipped sign in the loss and an ascent step give the same numbers). An intermediate
    returned instead of the result needs no such evidence: that the learner's value equals one
    of the computation's intermediate values is a fact, whatever their code."""
    if m.kind == "intermediate":   # a value of the solution's own computation: a fact to say
        return True
    if m.fragment:
        return m.fragment in written and len(m.fragment.split()) >= 3
    if m.order and all(m.order):
        moved, nxt = (_first_line(code, part) for part in m.order)
        return moved is not None and nxt is not None and moved > nxt
    return False


def _said(call: Call, found: list[Mutation], what: str) -> list[str]:
    """The hints for the candidate mutations the learner's code shows (`supported`): one
    sentence, or a few alternatives; [] for none, or for more than MOST."""
    written = _expressions(call.code)
    found = [m for m in found if supported(m, call.code, written)]
    if any(m.kind != "constant" for m in found):   # 1 where 2 belongs is the factor 2 dropped
        found = [m for m in found if m.kind != "constant"]
    sentences = list(dict.fromkeys(m.sentence for m in found))
    if not sentences or len(sentences) > MOST:
        return []
    if len(sentences) == 1:
        return [f"this is the {what} you get when {sentences[0]}."]
    return [f"{s}." for s in sentences]


def _constant(value: torch.Tensor) -> bool:
    """Several entries, all equal (a `torch.zeros_like(z)`): a value that says nothing of where
    it was computed, so equal to an intermediate is no evidence the learner returned that one."""
    return value.numel() > 1 and bool((value == value.reshape(-1)[0]).all())


def explain(got, expected: torch.Tensor, rtol: float, atol: float) -> list[str]:
    """Hints naming the cause of `got` (a wrong value where `expected` belongs, from the last
    noted call), each a one-place mistake that gives it and that the learner's code shows."""
    if not _last or not isinstance(got, torch.Tensor):
        return []
    call = _last[0][1]
    evaluated = _evaluated(call)
    if not evaluated:
        return []
    reference, outputs = evaluated
    paths = [p for p, leaf in _leaves(reference) if _same(leaf.to(expected.dtype), expected, rtol, atol)]
    if not paths:
        return []
    mutants = model(call.assignment, call.function)
    found = []
    for i, out in outputs:
        if isinstance(out, Raised):
            continue
        for p in paths:
            value = _at(out, p)
            if value is None or (mutants[i].kind == "intermediate" and _constant(value)):
                continue
            if _same(value.to(got.dtype) if value.is_floating_point() else value, got, rtol, atol):
                found.append(mutants[i])
                break
    return _said(call, found, "value")


def explain_raised(exception: str, message: str) -> list[str]:
    """Hints naming the cause of an error the last noted call raised: the mutants that raise
    the same error with the same message on the same inputs, as `explain` narrows them."""
    if not _last:
        return []
    call = _last[0][1]
    evaluated = _evaluated(call)
    if not evaluated:
        return []
    mutants = model(call.assignment, call.function)
    found = [mutants[i] for i, out in evaluated[1]
             if isinstance(out, Raised) and out.type == exception and out.message == message[:500]]
    return _said(call, found, "error")

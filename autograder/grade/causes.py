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

Only trusted code runs here: the instructor's solution and its mutants, on the grader's own
inputs, in a forked child of the grader with a time limit (a mutated loop may never end), its
output silenced (nbgrader scores a cell 0 that writes to stderr). The learner's value is data.
"""

from __future__ import annotations

import ast
import copy
import ctypes
import functools
import gc
import os
import pickle
import select
import signal
import time
from dataclasses import dataclass

import torch

from autograder.grade.mutation import Mutation, marks, mutate
from autograder.timing import timed

__all__ = ["Call", "explain", "explain_raised", "note_call"]

PER_MUTANT = 0.5
"""Seconds one mutant may run."""
BUDGET = 15.0
"""Seconds all mutants of one call may run (then the rest are not tried)."""
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
def _solutions(assignment: str) -> tuple[str, dict[str, str]]:
    """(setup code, {function: its answer cell}) of the source notebook, solution markers removed."""
    from autograder.course import _source
    source = _source(assignment)
    setup = "\n\n".join(s for s in source.setup if "class _Checker" not in s)
    answers = {function: "\n".join(line for line in text.splitlines()
                                   if line.strip() not in ("### BEGIN SOLUTION", "### END SOLUTION"))
               for function, text in source.solutions.items()}
    return setup, answers


@functools.lru_cache(maxsize=None)
def model(assignment: str, function: str) -> tuple[Mutation, ...]:
    """The mutants of `function`'s reference solution (none when it has no answer cell)."""
    _, answers = _solutions(assignment)
    cell = answers.get(function)
    return tuple(mutate(cell, every=True)) if cell else ()


# ---------------------------------------------------------------------------
# Running the reference and its mutants (in a forked child)

class _Late(BaseException):
    """A mutant ran out of time."""


@dataclass(frozen=True)
class Raised:
    """What a mutant raised instead of returning."""

    type: str
    message: str


def _alarm(signum, frame):
    raise _Late()


def _fresh(value, memo=None):
    """A copy of a call's inputs for one run: tensors cloned (keeping requires_grad), containers
    rebuilt, anything else deep-copied (copy.deepcopy of tensors is several times slower)."""
    memo = {} if memo is None else memo
    if id(value) in memo:
        return memo[id(value)]
    if isinstance(value, torch.Tensor) and type(value) is torch.Tensor and value.is_leaf:
        out = value.detach().clone().requires_grad_(value.requires_grad)
    elif type(value) in (list, tuple):
        out = type(value)(_fresh(v, memo) for v in value)
    elif type(value) is dict:
        out = {k: _fresh(v, memo) for k, v in value.items()}
    elif isinstance(value, (int, float, str, bool, type(None))):
        return value
    else:
        out = copy.deepcopy(value)
    memo[id(value)] = out
    return out


def _run(fn, args, kwargs):
    args, kwargs = _fresh((args, kwargs))
    signal.setitimer(signal.ITIMER_REAL, PER_MUTANT)
    try:
        value = fn(*args, **kwargs)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    return _plain((value, args, kwargs))


def _plain(value, depth=0):
    """The value with tensors detached and modules reduced to their tensors (so it pickles)."""
    if depth > 6:
        return None
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, torch.nn.Module):
        return {k: v.detach().clone() for k, v in value.state_dict().items()} | {
            f"{k}.grad": p.grad.detach().clone() for k, p in value.named_parameters()
            if p.grad is not None}
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v, depth + 1) for v in value) if type(value) in (list, tuple) \
            else [_plain(v, depth + 1) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (int, float, bool, str)) or value is None:
        return value
    return None


def _write_all(fd: int, data: bytes) -> None:
    while data:
        data = data[os.write(fd, data):]


def _framed(value) -> bytes:
    """`value` pickled, after its length (what `_receive` reads)."""
    data = pickle.dumps(value)
    return len(data).to_bytes(8, "big") + data


def _send(fd: int, value) -> None:
    _write_all(fd, _framed(value))


def _receive(fd: int, deadline: float | None = None):
    """The next value sent on `fd` (one at a time: the protocol is request, then answer);
    EOFError at its end, TimeoutError past `deadline` (time.monotonic())."""
    data, size = b"", None
    while size is None or len(data) < size + 8:
        if deadline is not None:
            ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise TimeoutError
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            raise EOFError
        data += chunk
        if size is None and len(data) >= 8:
            size = int.from_bytes(data[:8], "big")
    return pickle.loads(data[8:])


def _outputs(base: dict, function: str, args, kwargs, wanted):
    """(reference output, [(mutant index, output or Raised)]) for the `wanted` mutants (index,
    text), or None when the budget ran out first."""
    out, start = [], time.monotonic()
    expected = _run(base[function], args, kwargs)
    for i, text in wanted:
        if time.monotonic() - start > BUDGET:
            return None
        try:
            ns = dict(base)
            exec(compile(text, "<mutant>", "exec"), ns)
            out.append((i, _run(ns[function], args, kwargs)))
        except _Late:
            return None
        except Exception as e:  # noqa: BLE001 - what it raised, to match a raised error
            out.append((i, Raised(type(e).__name__, str(e)[:500])))
        except BaseException:  # noqa: BLE001 - SystemExit and the like: not a cause
            continue
    return expected, out


def _die_with_parent(parent: int) -> None:
    """SIGKILL this process (a fork of `parent`) when its parent ends (kill -9 too): nothing of
    the error model outlives the grader process it serves."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the closed pipe still ends it
        pass
    if os.getppid() != parent:
        os._exit(0)


def _serve(assignment: str, requests: int, answers_fd: int, parent: int) -> None:
    """The reference process of one assignment: the source notebook's setup and solutions run
    once; each request (function, args, kwargs) is evaluated in a fork of this process, killed
    past the budget, and its outputs (or None) sent back."""
    _die_with_parent(parent)
    os.closerange(3, requests)
    os.closerange(requests + 1, answers_fd)
    os.closerange(answers_fd + 1, 1 << 16)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    torch.set_num_threads(1)
    signal.signal(signal.SIGALRM, _alarm)
    setup, answers = _solutions(assignment)
    base = {"__name__": "__reference__"}
    try:
        exec(compile(setup, "<setup>", "exec"), base)
        for text in answers.values():
            exec(compile(text, "<solution>", "exec"), base)
    except BaseException:  # noqa: BLE001 - no reference, no error model
        base = None
    gc.freeze()  # a forked call's collections skip what is here: no walk of torch's heap per call
    while True:
        try:
            function, args, kwargs, wanted = _receive(requests)
        except EOFError:      # the grader process is done
            return
        if base is None or not callable(base.get(function)):
            _send(answers_fd, None)
            continue
        read, write = os.pipe()
        server = os.getpid()
        pid = os.fork()
        if pid == 0:
            try:
                _die_with_parent(server)
                os.close(read)
                _send(write, _outputs(base, function, args, kwargs, wanted))
            finally:
                os._exit(0)
        os.close(write)
        try:
            result = _receive(read, time.monotonic() + BUDGET + 5)
        except Exception:  # noqa: BLE001 - a cut-off answer: no outputs
            result = None
        finally:
            os.close(read)
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.waitpid(pid, 0)
        _send(answers_fd, result)


_servers: dict[str, tuple[int, int, int]] = {}


def _server(assignment: str) -> tuple[int, int, int] | None:
    """(pid, request fd, answer fd) of the assignment's reference process, started on first use."""
    if assignment not in _servers:
        req_r, req_w = os.pipe()
        ans_r, ans_w = os.pipe()
        grader = os.getpid()
        pid = os.fork()
        if pid == 0:
            try:
                os.close(req_w)
                os.close(ans_r)
                _serve(assignment, req_r, ans_w, grader)
            finally:
                os._exit(0)
        os.close(req_r)
        os.close(ans_w)
        os.set_inheritable(req_w, False)
        os.set_inheritable(ans_r, False)
        _servers[assignment] = (pid, req_w, ans_r)
    return _servers[assignment]


@timed("grader: the error model")
def _evaluate(call: Call):
    """(reference output, [(mutant index, output)]) for `call`'s inputs, or None."""
    # only a mutation the learner's code shows can be named: only those run
    written = _expressions(call.code)
    wanted = [(i, m.text) for i, m in enumerate(model(call.assignment, call.function))
              if supported(m, call.code, written)]
    if not wanted:
        return None
    try:
        request = _framed((call.function, call.args, call.kwargs, wanted))
    except Exception:  # noqa: BLE001 - inputs that do not pickle: no error model for this call
        return None
    pid, requests, answers = _server(call.assignment)
    try:
        _write_all(requests, request)
        return _receive(answers, time.monotonic() + BUDGET + 10)
    except Exception:  # noqa: BLE001 - a server gone or late: no error model for this call, and
        # a new server for the next (a late answer must not be read as the next call's)
        _servers.pop(call.assignment, None)
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
        return None


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

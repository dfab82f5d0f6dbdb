"""The reference process of one assignment: the trusted code the error model (causes.py) runs.

The source notebook's setup and worked solutions run once in a process forked from the grader
(started on first use, silenced, dying with its parent, its heap frozen); each request, a
learner's call's inputs and the mutants to try, is evaluated in a fork of that process with a
time limit per mutant and for all, and the outputs (tensors detached, modules reduced to their
tensors) come back pickled. Only the instructor's solution and its mutants run here, on the
grader's own inputs; the learner's value never reaches this process.
"""

from __future__ import annotations

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

__all__ = ["BUDGET", "Raised", "ask", "solutions"]

PER_MUTANT = 0.5
"""Seconds one mutant may run."""
BUDGET = 15.0
"""Seconds all mutants of one call may run (then the rest are not tried)."""


@functools.lru_cache(maxsize=None)
def solutions(assignment: str) -> tuple[str, dict[str, str]]:
    """(setup code, {function: its answer cell}) of the source notebook, solution markers removed."""
    from autograder.course import _source
    source = _source(assignment)
    setup = "\n\n".join(s for s in source.setup if "class _Checker" not in s)
    answers = {function: "\n".join(line for line in text.splitlines()
                                   if line.strip() not in ("### BEGIN SOLUTION", "### END SOLUTION"))
               for function, text in source.solutions.items()}
    return setup, answers




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
    setup, answers = solutions(assignment)
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


def ask(assignment: str, function: str, args, kwargs, wanted):
    """(reference output, [(mutant index, output or Raised)]) of `function` and the `wanted`
    mutants (index, text) on these inputs, or None (inputs that do not pickle, no reference, the
    budget spent, the process gone or late: then a new one serves the next request, so that a
    late answer is never read as the next call's)."""
    try:
        request = _framed((function, args, kwargs, wanted))
    except Exception:  # noqa: BLE001 - inputs that do not pickle
        return None
    pid, requests, answers = _server(assignment)
    try:
        _write_all(requests, request)
        return _receive(answers, time.monotonic() + BUDGET + 10)
    except Exception:  # noqa: BLE001 - a server gone or late
        _servers.pop(assignment, None)
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
        return None

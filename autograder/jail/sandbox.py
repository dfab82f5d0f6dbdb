"""Call a learner's functions in the jail, from the grader's side.

A `Sandbox` holds one submission. Each graded function gets a fresh child
forked by the jailed server (`jailer`), which runs the learner's cells and
then answers calls: a function that poisons its process (patches torch,
turns off autograd, starts threads) cannot touch the next function's grade.
Only `wire` data crosses; the grader decides everything from what it sent
and what came back. Limits: per call (`CALL_TIMEOUT`), per notebook
(`NOTEBOOK_BUDGET`, so a notebook of slow functions cannot hold a worker for
minutes), memory, CPU time, processes and file size per child.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from autograder.jail.inside import wire
from autograder.jail.jailer import jail
from autograder.timing import timed

CALL_TIMEOUT = 10.0
"""Seconds one call of a learner function may take."""
LOAD_TIMEOUT = 20.0
"""Seconds the learner's cells may take to run (defining the functions)."""
NOTEBOOK_BUDGET = 90.0
"""Seconds of learner code (loading and calls) one notebook may use in all."""
MAX_REPLY_BYTES = 96 << 20
"""Largest reply to a call read from a child (a tensor of wire.MAX_ELEMENTS float64 is about
53 MB on the wire; what the hidden tests exchange is a few KB)."""
MAX_LOAD_BYTES = 4 << 20
"""Largest message read from a child while it runs the cells (progress, the names defined)."""
MAX_TEXT = 4000
"""Characters kept of one learner-controlled string in a reply (a message, a traceback)."""
MAX_NAME = 200
"""Characters kept of one learner-controlled name (an exception class, a function, an operator)."""
MAX_REPLY_CONTAINERS = 200_000
"""Lists and dicts one reply may hold: JSON of 16 million empty lists is 48 MB on the wire but
2.5 GB in the grader once parsed; what the hidden tests exchange holds a few thousand at most."""
MAX_BAD_CELLS = 2
"""Cells that kill or hang the process while loading are left out, up to this many."""
LIMITS = {"memory_limit": 2 << 30, "cpu_seconds": 120, "processes": 64, "file_bytes": 32 << 20}
"""Per child: address space on top of torch's, CPU seconds, processes of the jail's uid, file size."""


class JailBroken(RuntimeError):
    """The jail could not start a process for learner code: the grader's fault, never the
    learner's, so no score is given (a batch marks the notebook for a retry)."""


@dataclass
class ExceptionInfo:
    """An exception raised by learner code, as plain data."""

    type: str
    """Class name, e.g. "ValueError"."""
    bases: list[str]
    """Names of the class and its bases, to match `except ValueError` semantics."""
    message: str
    where: str
    """The learner's own frames of the traceback, formatted."""

    def is_a(self, name: str) -> bool:
        return name in self.bases


def cut(text, limit: int = MAX_TEXT) -> str:
    """`str(text)` of at most about `limit` characters; what is left out is counted."""
    return wire.cut(text if isinstance(text, str) else str(text), limit)


def _names(values, count: int, limit: int = MAX_NAME) -> list[str]:
    """A learner-controlled list of strings, bounded: at most `count` entries of `limit` each."""
    values = values if isinstance(values, list) else []
    return [cut(v, limit) for v in values[:count]]


@dataclass
class Reply:
    """Outcome of one call of a learner function."""

    status: str
    """"ok", "exception", "timeout", "crashed" or "missing"."""
    value: Any = None
    exception: ExceptionInfo | None = None
    used: list[str] = field(default_factory=list)
    """Torch functions (qualified names) and ATen operators ("aten.mm") the call ran."""
    mutated: list[str] = field(default_factory=list)
    """Arguments whose tensors changed during the call, by parameter name ("W", "params[2]")."""
    args_after: Any = None
    """The arguments after the call (decoded), for functions that work in place."""
    named_after: dict = field(default_factory=dict)
    """Objects a Recipe put in NAMED, after the call."""
    detail: str = ""
    """For "crashed" and "timeout": what the grader saw."""
    params: list[str] = field(default_factory=list)
    """The learner's parameter names of the function called (for messages)."""


@dataclass
class LoadReport:
    """What running the learner's cells defined, and which cells raised."""

    defined: list[str]
    errors: list[str]
    """One line per cell that raised: "NameError: name 'np' is not defined"."""
    failed: bool = False
    """The process hung or died while running the cells: nothing is defined."""


class Sandbox:
    """One submission's code, run in the jail: a fresh child per graded function."""

    def __init__(self, cells: list[dict], *, call_timeout: float = CALL_TIMEOUT,
                 load_timeout: float = LOAD_TIMEOUT, budget: float = NOTEBOOK_BUDGET,
                 limits: dict | None = None, warm: tuple[str, ...] = (),
                 cutoffs: dict[str, int] | None = None,
                 programs: dict[str, list[dict]] | None = None):
        self.cells = cells
        self.cutoffs = cutoffs or {}
        """function -> how many of the cells its child runs (Submission.cells_for); default all."""
        self.programs = {k: list(v) for k, v in (programs or {}).items()}
        """function -> the cells its child runs instead (Submission.programs: a by-hand
        function's closed world); the same number of cells as `cells` up to its cutoff."""
        self.warm = warm
        self.call_timeout = call_timeout
        self.load_timeout = load_timeout
        self.budget = budget
        self.limits = {**LIMITS, **(limits or {})}
        self.load_report: LoadReport | None = None
        self._conn = None
        self._pid: int | None = None
        self._owner: str | None = None
        """The function the live child was started for."""
        self._hung: set[str] = set()
        self._left_out: list[str] = []
        """Why cells were left out (they killed or hung a child): said in every later report."""
        self._spent = 0.0
        self._reset_once = False
        self.earlier_calls = 0
        """Calls the live child answered before the last one (state they left can explain it)."""
        self._answered = 0

    # -- children -------------------------------------------------------------
    def _start(self, owner: str | None) -> LoadReport:
        """A fresh child with the cells run; a cell that kills or hangs it is named and left out."""
        for _ in range(MAX_BAD_CELLS + 1):
            report, bad = self._spawn_and_load(owner)
            if bad is None or report.failed and not self.cells[bad:]:
                break
            if report.failed:
                self._left_out.append(f"a cell of yours {report.errors[0]}, so it was left out")
                for cells in (self.cells, *self.programs.values()):
                    if bad < len(cells):
                        cells[bad] = {"source": "pass"}
        report.errors[:0] = self._left_out
        return report

    def _count(self, owner: str | None) -> int:
        return min(self.cutoffs.get(owner, len(self.cells)), len(self.cells))

    def _cells_of(self, owner: str | None) -> list[dict]:
        """The cells the child that serves `owner` runs."""
        if owner in self.programs:
            return self.programs[owner]
        return self.cells[:self._count(owner)]

    @timed("child: start and run the answer cells (reset and fork included)")
    def _spawn_and_load(self, owner: str | None) -> tuple[LoadReport, int | None]:
        self._discard()
        if not self._reset_once:
            # This notebook's first child starts from nothing of anyone else's: whatever ran in
            # the jail before (another learner's notebook, this learner's own feedback kernel
            # under nbgrader, a daemon either left) is killed and its IPC objects removed.
            jail().reset()
            self._reset_once = True
        started = time.monotonic()
        spawned = jail().spawn(self.limits, self.warm)
        if spawned is None:
            raise JailBroken("the jail's server could not start a process for learner code "
                             "(AUTOGRADER_DEBUG=1 shows its output)")
        self._conn, self._pid = spawned
        self._owner = owner
        self._answered = 0
        timeout = min(self.load_timeout, self._left())
        reply, running = None, None
        try:
            self._conn.send_bytes(wire.dumps(self._cells_of(owner)))
            while True:
                reply = self._receive(timeout - (time.monotonic() - started), MAX_LOAD_BYTES)
                if reply is None or reply.get("status") != "running":
                    break
                running = reply.get("cell") if isinstance(reply.get("cell"), int) else None
        except (OSError, ValueError):
            reply = {"status": "crashed"}
        self._spent += time.monotonic() - started
        if reply is None or reply.get("status") != "loaded":
            what = (f"did not finish within {timeout:g} s" if reply is None
                    else f"stopped the process ({self._exit_detail()})")
            self._discard()
            bad = running if running is not None and 0 <= running < len(self.cells) else None
            if self._left() <= 0:
                bad = None
            return LoadReport([], [what], failed=True), bad
        try:
            return LoadReport(_names(reply["defined"], 1000), _names(reply["errors"], 50, MAX_TEXT)), None
        except (KeyError, TypeError):
            return LoadReport([], ["running your cells gave an unreadable answer"], failed=True), None

    def load(self, name: str | None = None) -> LoadReport:
        """Run the learner's cells (those above `name`'s check cell; all without a name) in a
        child, which then serves `name`'s first call, and report it (once)."""
        if self.load_report is None:
            self.load_report = self._start(name)
        return self.load_report

    def _receive(self, timeout: float, limit: int = MAX_REPLY_BYTES) -> dict | None:
        """The child's next message; {"status": "crashed"} if it is gone or sent something that is
        not a reply (learner code can reach the socket: it may send anything, of any size)."""
        try:
            if not self._conn.poll(max(timeout, 0.0)):
                return None
            raw = self._conn.recv_bytes(maxlength=limit)
            if raw.count(b"[") + raw.count(b"{") > MAX_REPLY_CONTAINERS:
                return {"status": "crashed", "unreadable": "a reply of too many nested values"}
            reply = wire.loads(raw)
        except (EOFError, OSError):
            return {"status": "crashed"}
        except (ValueError, RecursionError, MemoryError):
            return {"status": "crashed", "unreadable": "a reply that is not valid data"}
        if not isinstance(reply, dict):
            return {"status": "crashed", "unreadable": "a reply that is not a message"}
        return reply

    def _exit_detail(self) -> str:
        status = jail().status(self._pid) if self._pid is not None else "unknown"
        if status.startswith("signal "):
            name = status.split()[1]
            extra = " (killed: out of time or memory)" if name in ("SIGKILL", "SIGXCPU") else ""
            return f"the process was stopped by {name}{extra}"
        if status.startswith("exit "):
            return f"the process exited with status {status.split()[1]} (os._exit or exit())"
        return "the process stopped answering"

    def _discard(self) -> None:
        """Drop the live child and everything it started."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None
            jail().reset()
        self._pid = None
        self._owner = None

    def _left(self) -> float:
        return self.budget - self._spent

    def close(self) -> None:
        self._discard()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def fresh(self) -> None:
        """Drop the live child: the next call starts a new one, with no state of earlier calls."""
        self._discard()

    # -- calls ---------------------------------------------------------------
    @timed("child: the learner's calls")
    def call(self, name: str, args: tuple = (), kwargs: dict | None = None,
             references: dict[str, str] | None = None, driver: wire.Recipe | None = None) -> Reply:
        """Call the learner's function `name`; never raises for anything the learner does.

        `references` maps other function names to trusted source code that replaces
        the learner's version of them during this call. `driver` (trusted code, a Recipe
        whose function takes the learner's object first) calls a class the learner completed.
        """
        if name in self._hung:
            return Reply("timeout", detail=f"an earlier call of {name} did not finish either")
        if self.load(name).failed:
            return Reply("missing")
        if self._left() <= 0:
            return Reply("timeout", detail=f"the notebook used up its {self.budget:g} s of "
                                           "grading time on earlier calls")
        # A child that ran every cell for load() also serves a function that runs them all.
        reusable = self._owner == name or (self._owner is None and name not in self.programs
                                           and self._count(name) == len(self.cells))
        if self._conn is None or not reusable:
            report = self.load_report = self._start(name)  # what "not defined" messages quote
            if report.failed:
                return Reply("crashed", detail=report.errors[0] if report.errors else "")
        self._owner = name
        self.earlier_calls, self._answered = self._answered, self._answered + 1
        request = call_request(name, args, kwargs, references, driver)
        request["nonce"] = nonce = secrets.token_hex(16)
        started = time.monotonic()
        try:
            self._conn.send_bytes(wire.dumps(request))
            timeout = min(self.call_timeout, self._left())
            raw = self._receive(timeout)
        except (OSError, ValueError):
            raw = {"status": "crashed"}
        self._spent += time.monotonic() - started
        if raw is None:
            self._hung.add(name)
            self._discard()
            return Reply("timeout", detail=f"no result after {timeout:g} s")
        if raw.get("status") != "crashed" and raw.get("nonce") != nonce:
            # Learner code that writes to the socket itself cannot know the call's nonce.
            raw = {"status": "crashed", "unreadable": "a message it wrote itself, not the reply"}
        if raw.get("status") == "crashed":
            detail = (f"your process sent the grader {raw['unreadable']}" if raw.get("unreadable")
                      else self._exit_detail())
            self._discard()
            return Reply("crashed", detail=detail)
        return _reply_from(raw, args)


def call_request(name: str, args: tuple, kwargs: dict | None, references: dict[str, str] | None,
                 driver: wire.Recipe | None) -> dict:
    """The message that asks the learner's child to call `name` (see jail/inside/child.py `_caller`)."""
    request = {"call": name, "args": wire.encode(tuple(args)),
               "kwargs": wire.encode(dict(kwargs or {})), "references": references or {}}
    if driver is not None:
        request["driver"] = {"source": driver.source, "name": driver.name}
    return request


def _label(params: list[str], i: int) -> str:
    return params[i] if i < len(params) else f"argument {i + 1}"


def _changed(before, after, path: str, out: list[str]) -> None:
    """Paths of tensors in `before` (what the grader sent) that differ in `after`."""
    if isinstance(before, torch.Tensor):
        if not isinstance(after, torch.Tensor) or after.shape != before.shape \
                or after.dtype != before.dtype or not torch.equal(after, before.detach()):
            out.append(path)
    elif isinstance(before, (list, tuple)):
        after = after if isinstance(after, (list, tuple)) and len(after) == len(before) else [None] * len(before)
        for i, (b, a) in enumerate(zip(before, after)):
            _changed(b, a, f"{path}[{i}]", out)
    elif isinstance(before, dict):
        after = after if isinstance(after, dict) else {}
        for k, b in before.items():
            _changed(b, after.get(k), f"{path}[{k!r}]", out)


_RECORDED = ("aten.", "autograd.", "func.", "optim.", "profiler.", "prims.")
"""Prefixes of what the recorder names from torch's own operators (a finite set, kept whole)."""


def _used(values) -> list[str]:
    """The reply's `used`, bounded: every operator name, and up to 2,000 function names (learner
    code could make the recorder see functions it defined, named at will)."""
    values = [cut(v, MAX_NAME) for v in values] if isinstance(values, list) else []
    operators = [v for v in values if v.startswith(_RECORDED)][:20_000]
    return operators + [v for v in values if not v.startswith(_RECORDED)][:2000]


def _reply_from(raw: dict, args: tuple) -> Reply:
    try:
        exc = raw.get("exception")
        args_after = wire.decode(raw.get("args_after"))
        params = _names(raw.get("params", []), 100, 50)
        mutated = _names(raw.get("mutated", []), 100, 80)
        if raw["status"] == "ok":
            # Decided here, from the tensors the grader sent and what the child holds after the call.
            after = args_after if isinstance(args_after, tuple) else (None,) * len(args)
            for i, (b, a) in enumerate(zip(args, after)):
                _changed(b, a, _label(params, i), mutated)
            mutated = list(dict.fromkeys(mutated))
        return Reply(
            status=raw["status"] if raw["status"] in ("ok", "exception", "missing") else "crashed",
            value=wire.decode(raw.get("value")),
            exception=ExceptionInfo(cut(exc["type"], MAX_NAME), _names(exc["bases"], 50),
                                    cut(exc["message"]), cut(exc["where"])) if exc else None,
            used=_used(raw.get("used", [])),
            mutated=mutated,
            args_after=args_after,
            named_after=wire.decode(raw.get("named_after")) or {},
            params=params,
        )
    except Exception as error:  # a reply we cannot read is the learner's process misbehaving
        return Reply("crashed", detail=f"unreadable reply from the learner's process "
                                       f"({cut(error, MAX_NAME)})")

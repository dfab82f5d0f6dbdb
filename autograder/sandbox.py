"""Run learner code in a separate process and call its functions.

The learner's answer cells run in a child process forked from a pre-loaded
server (torch is imported once, there). The grader talks to the child through
a pipe carrying JSON (`wire`), so nothing the learner made is ever unpickled
or executed in the grader. Each call has a time limit, the child has a memory
limit, and a child that dies or hangs is replaced for the next call: the damage
stays with the function being called.
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass, field
from typing import Any

from autograder import wire
from autograder.server import CONTEXT, child_main

CALL_TIMEOUT = 10.0
"""Seconds one call of a learner function may take."""
LOAD_TIMEOUT = 20.0
"""Seconds the learner's cells may take to run (defining the functions)."""
MEMORY_LIMIT = 2 << 30
"""Bytes of address space the learner may add on top of what torch needs."""


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


@dataclass
class Reply:
    """Outcome of one call of a learner function."""

    status: str
    """"ok", "exception", "timeout", "crashed" or "missing"."""
    value: Any = None
    exception: ExceptionInfo | None = None
    used: list[str] = field(default_factory=list)
    """Qualified names of the torch functions the learner's code called."""
    mutated: list[str] = field(default_factory=list)
    """Arguments whose tensors changed during the call, by parameter name ("W", "params[2]")."""
    args_after: Any = None
    """The arguments after the call (decoded), for functions that work in place."""
    named_after: dict = field(default_factory=dict)
    """Objects a Recipe put in NAMED, after the call."""
    detail: str = ""
    """For "crashed" and "timeout": what the grader saw."""


@dataclass
class LoadReport:
    """What running the learner's cells defined, and which cells raised."""

    defined: list[str]
    errors: list[str]
    """One line per cell that raised: "NameError: name 'np' is not defined"."""
    failed: bool = False
    """The process hung or died while running the cells: nothing is defined."""


class Sandbox:
    """A child process holding one submission's namespace."""

    def __init__(self, cells: list[str], *, call_timeout: float = CALL_TIMEOUT,
                 load_timeout: float = LOAD_TIMEOUT, memory_limit: int = MEMORY_LIMIT):
        self.cells = cells
        self.call_timeout = call_timeout
        self.load_timeout = load_timeout
        self.memory_limit = memory_limit
        self.load_report: LoadReport | None = None
        self._process = None
        self._conn = None
        self._hung: set[str] = set()

    # -- process management ------------------------------------------------
    def _start(self) -> LoadReport:
        parent, child = CONTEXT.Pipe()
        self._process = CONTEXT.Process(
            target=child_main, args=(child, self.cells, self.memory_limit), daemon=True)
        self._process.start()
        child.close()
        self._conn = parent
        reply = self._receive(self.load_timeout)
        if reply is None or reply.get("status") != "loaded":
            what = (f"did not finish within {self.load_timeout:g} s" if reply is None
                    else f"crashed ({self._exit_detail()})")
            self._kill()
            report = LoadReport([], [f"running your cells {what}"], failed=True)
        else:
            report = LoadReport(list(reply["defined"]), list(reply["errors"]))
        if self.load_report is None:
            self.load_report = report
        return report

    def load(self) -> LoadReport:
        """Run the learner's cells (once) and report what they defined."""
        if self.load_report is None:
            self._start()
        return self.load_report

    def _receive(self, timeout: float) -> dict | None:
        try:
            if not self._conn.poll(timeout):
                return None
            return wire.loads(self._conn.recv_bytes(maxlength=256 << 20))
        except (EOFError, OSError, ValueError):
            return {"status": "crashed"}

    def _kill(self) -> None:
        if self._process is not None and self._process.pid is not None:
            if self._process.is_alive():
                os.kill(self._process.pid, signal.SIGKILL)
            self._process.join(5)
        if self._conn is not None:
            self._conn.close()
        self._conn = None

    def _exit_detail(self) -> str:
        code = self._process.exitcode if self._process is not None else None
        if code is None:
            return "no answer"
        if code < 0:
            name = signal.Signals(-code).name
            extra = " (killed: out of time or memory)" if name == "SIGKILL" else ""
            return f"the process was stopped by {name}{extra}"
        return f"the process exited with status {code} (os._exit or exit())"

    def close(self) -> None:
        self._kill()
        self._process = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- calls ---------------------------------------------------------------
    def call(self, name: str, args: tuple = (), kwargs: dict | None = None,
             references: dict[str, str] | None = None) -> Reply:
        """Call the learner's function `name`; never raises for anything the learner does.

        `references` maps other function names to trusted source code that replaces
        the learner's version of them during this call.
        """
        if name in self._hung:
            return Reply("timeout", detail=f"an earlier call of {name} did not finish either")
        if self.load().failed:
            return Reply("missing")
        if self._conn is None or not self._process.is_alive():
            self._kill()
            self._start()
        if self._conn is None:
            return Reply("crashed", detail=self._exit_detail())
        request = {"call": name, "args": wire.encode(tuple(args)),
                   "kwargs": wire.encode(dict(kwargs or {})), "references": references or {}}
        try:
            self._conn.send_bytes(wire.dumps(request))
        except (OSError, ValueError):
            self._kill()
            return Reply("crashed", detail=self._exit_detail())
        raw = self._receive(self.call_timeout)
        if raw is None:
            self._hung.add(name)
            self._kill()
            return Reply("timeout", detail=f"no result after {self.call_timeout:g} s")
        if raw.get("status") == "crashed":
            self._kill()
            return Reply("crashed", detail=self._exit_detail())
        return _reply_from(raw)


def _reply_from(raw: dict) -> Reply:
    try:
        exc = raw.get("exception")
        return Reply(
            status=raw["status"] if raw["status"] in ("ok", "exception", "missing") else "crashed",
            value=wire.decode(raw.get("value")),
            exception=ExceptionInfo(str(exc["type"]), [str(b) for b in exc["bases"]],
                                    str(exc["message"]), str(exc["where"])) if exc else None,
            used=[str(u) for u in raw.get("used", [])],
            mutated=[str(m) for m in raw.get("mutated", [])],
            args_after=wire.decode(raw.get("args_after")),
            named_after=wire.decode(raw.get("named_after")) or {},
        )
    except Exception as error:  # a reply we cannot read is the learner's process misbehaving
        return Reply("crashed", detail=f"unreadable reply from the learner's process ({error})")

"""`nbgrader autograde` on every core: the submissions of one run are shared among forked workers.

nbgrader grades one submission after another in one process (it has had no parallel autograde
since its issue 174). `install()`, called from nbgrader_config.py, replaces the autograde
converter's loop over submissions by one that, once nbgrader has found them, forks `jobs`
workers (default: every core this process may use; `AUTOGRADER_NBGRADER_JOBS=1` keeps nbgrader's
own loop). Each worker takes the next submission not yet taken and runs nbgrader's own loop on it
(sanitize, the jailed kernel, the trusted grades, the gradebook), with its own warm jailed grader
server, so scores and feedback are those of a serial run.

* The gradebook is one SQLite file: each connection waits for the others' writes
  (`PRAGMA busy_timeout`) instead of failing with "database is locked"; every submission's rows
  are written by one worker, once.
* An assignment that is in source/ but not yet in the gradebook is put there before the fork
  (`autograder.nbgrader.gradebook.put_in_gradebook`), so no two workers create it; when that
  fails (`alembic` not on PATH, a gradebook nbgrader cannot open), the run is nbgrader's own
  loop, which reports the failure per submission as stock nbgrader does.
* Workers die with the nbgrader process however it ends (kill -9 too: PR_SET_PDEATHSIG and a
  pipe they watch), and the jailed kernels and servers under them die with them.
* A failed submission is logged by its worker as nbgrader logs it (which submission, why); the
  run ends with an error, as a serial one does, once the others are graded.
"""

from __future__ import annotations

import os
import re
import signal
import sys

BUSY_TIMEOUT_MS = 600_000
"""How long a gradebook connection waits for another worker's write (nbgrader's are short)."""


def jobs() -> int:
    wanted = os.environ.get("AUTOGRADER_NBGRADER_JOBS", "")
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, int(wanted)) if wanted.strip().isdigit() else cores


def _wait_for_writers() -> None:
    """Every SQLite connection this process opens waits for other writers (nbgrader's Gradebook
    creates its engine itself, so the setting goes on every connection)."""
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    if getattr(_wait_for_writers, "done", False):
        return

    @event.listens_for(Engine, "connect")
    def _busy_timeout(dbapi_connection, _record):
        if type(dbapi_connection).__module__.startswith("sqlite3"):
            cursor = dbapi_connection.cursor()
            cursor.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            cursor.close()

    _wait_for_writers.done = True


def _submission(converter, key: str) -> tuple[str, str]:
    regexp = converter._format_source("(?P<assignment_id>.*)", "(?P<student_id>.*)", escape=True)
    match = re.match(regexp, key)
    return (match["assignment_id"], match["student_id"]) if match else ("", "")


def _worker(converter, serial, taken, parent: int, watch: int) -> int:
    """A forked worker: die with nbgrader, then grade the next submission not taken (`taken`: a
    shared counter) until none is left. Returns how many failed (nbgrader logged each)."""
    from autograder.grade.batch import die_with_parent
    from nbgrader.converters.base import NbGraderException

    signal.signal(signal.SIGINT, signal.SIG_DFL)  # the parent handles Ctrl-C for the run
    die_with_parent(parent, watch)
    keys = sorted(converter.assignments)
    everything, failures = converter.assignments, 0
    while True:
        with taken.get_lock():
            index = taken.value
            taken.value += 1
        if index >= len(keys):
            return failures
        converter.assignments = {keys[index]: everything[keys[index]]}
        try:
            serial(converter)
        except NbGraderException:  # logged by nbgrader already, with the reason
            failures += 1
        except Exception:  # noqa: BLE001 - as nbgrader's loop: log it, grade the rest
            converter.log.exception("There was an error processing assignment: %s", keys[index])
            failures += 1


def _warm_before_fork(assignments: set[str]) -> None:
    """Import torch, the grader and what grading these assignments imports lazily (course.py
    `warm`) once, in nbgrader's process: every forked worker starts with them, where each paid
    for the imports itself at its first notebook (1.5-2 s of CPU a worker)."""
    import importlib

    from autograder.course import ASSIGNMENTS
    from autograder.grade import plugin

    for module in sorted({m for a in assignments if a in ASSIGNMENTS for m in ASSIGNMENTS[a].warm}):
        importlib.import_module(module)
    plugin.settle()


def install(config=None) -> None:
    """Make `nbgrader autograde` grade its submissions in parallel worker processes."""
    from multiprocessing import Value

    from nbgrader.converters.base import NbGraderException
    from nbgrader.converters import Autograde

    from autograder.nbgrader.gradebook import put_in_gradebook

    _wait_for_writers()
    serial = getattr(Autograde.convert_notebooks, "serial", Autograde.convert_notebooks)

    def convert_notebooks(self) -> None:
        keys = sorted(self.assignments)
        workers = min(jobs(), len(keys))
        if workers <= 1:
            return serial(self)
        for assignment in sorted({_submission(self, k)[0] for k in keys} - {""}):
            try:  # once, before the fork, so that no two workers create the same rows
                put_in_gradebook(os.getcwd(), assignment, config)
            except Exception as error:  # noqa: BLE001 - nbgrader's own loop meets it, and says so
                # (workers would race to create the course's rows and drop a submission)
                self.log.warning("Could not put %s in the gradebook before grading in parallel "
                                 "(%s): grading one submission at a time", assignment,
                                 (str(error).strip().splitlines() or [type(error).__name__])[-1])
                return serial(self)
        _warm_before_fork({_submission(self, k)[0] for k in keys})
        taken = Value("q", 0)
        watch_read, watch_write = os.pipe()   # readable in the workers once this process is gone
        sys.stdout.flush(), sys.stderr.flush()
        children = []
        for _ in range(workers):
            pid = os.fork()
            if pid == 0:
                code = 70
                try:
                    os.close(watch_write)
                    code = 1 if _worker(self, serial, taken, os.getppid(), watch_read) else 0
                finally:
                    from autograder.jail import jailer
                    jailer.close()  # os._exit runs no atexit handler
                    sys.stdout.flush(), sys.stderr.flush()
                    os._exit(code)
            children.append(pid)
        os.close(watch_read)
        self.log.info("autograding %d submissions in %d worker processes", len(keys), workers)
        codes = []
        try:
            for pid in children:
                codes.append(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
        except BaseException:
            for pid in children:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            raise
        finally:
            os.close(watch_write)
        if any(codes):
            broken = sum(code not in (0, 1) for code in codes)
            why = f" ({broken} worker process(es) ended abnormally)" if broken else ""
            raise NbGraderException(f"Some submissions could not be autograded{why}: see the errors "
                                    "logged above, one per submission.")

    convert_notebooks.serial = serial
    Autograde.convert_notebooks = convert_notebooks

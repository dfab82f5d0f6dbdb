"""Shared fixtures: the sample submissions, written and graded once per test run.

`make test` runs the suite in parallel (pytest-xdist, `--dist loadfile`: each module runs whole
in one worker, so its module fixtures are built once). Session fixtures that cost minutes are
built once per run, not once per worker (`once_per_run`); cheap ones (a course copy) are each
worker's own. Modules marked `pytest.mark.early` (a set-up of minutes) are handed out first.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from filelock import FileLock

# The tests live in one folder per room (tests/grade, tests/jail, ...); some share helpers across
# rooms (`from test_tutorial import built_site`): every room's folder is importable, whichever
# modules a run collects.
for _room in sorted(Path(__file__).parent.iterdir()):
    if _room.is_dir() and not _room.name.startswith((".", "_")) and str(_room) not in sys.path:
        sys.path.append(str(_room))

from autograder.instructor.build import tool_env
from autograder.course import ASSIGNMENTS, ROOT
from autograder.grade.batch import grade_folder
from autograder.instructor.samples import load_scenarios, write_submitted

BUILT = [a for a in ASSIGNMENTS if ASSIGNMENTS[a].source.is_file()]
"""Assignments whose source notebook exists."""

SCENARIOS = [s for a in BUILT for s in load_scenarios(a)]


def run(*args: str, cwd: Path, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), cwd=cwd, env=tool_env(), capture_output=True, text=True,
                          check=check)


def pytest_configure(config):
    config.addinivalue_line("markers", "early: a module whose set-up takes minutes: run it first "
                                       "(so that parallel workers end together)")


def pytest_collection_modifyitems(items):
    """Modules marked `early` first, otherwise the collection order (stable: every xdist worker
    must collect the same order)."""
    items.sort(key=lambda item: item.get_closest_marker("early") is None)


def shared_dir(tmp_path_factory) -> Path:
    """A folder all xdist workers of this run share (without xdist: the run's base temp)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def once_per_run(tmp_path_factory, name: str, make):
    """make()'s value, computed by one process of the run; the other xdist workers wait for it
    and read it back (it must pickle)."""
    root = shared_dir(tmp_path_factory)
    data = root / f"{name}.pickle"
    with FileLock(str(root / f"{name}.lock")):
        if data.is_file():
            return pickle.loads(data.read_bytes())
        value = make()
        partial = root / f"{name}.pickle.tmp"
        partial.write_bytes(pickle.dumps(value))
        partial.replace(data)
        return value


@pytest.fixture(scope="session")
def submitted(tmp_path_factory) -> Path:
    """nbgrader's submitted/ layout holding every sample submission (read-only: copy to change)."""
    def make() -> Path:
        root = shared_dir(tmp_path_factory) / "samples" / "submitted"
        shutil.rmtree(root.parent, ignore_errors=True)  # left by a worker that died writing it
        write_submitted(root, BUILT)
        return root
    return once_per_run(tmp_path_factory, "submitted", make)


@pytest.fixture(scope="session")
def graded(submitted, tmp_path_factory) -> dict[tuple[str, str], object]:
    """(student, assignment) -> Graded, from one batch run of the standalone grader."""
    return once_per_run(tmp_path_factory, "graded", lambda: {
        (g.student, g.assignment): g for g in grade_folder(submitted)})


@pytest.fixture(scope="session")
def course(tmp_path_factory) -> Path:
    """A fresh course directory: a copy of source/ and nbgrader_config.py (this worker's own)."""
    root = tmp_path_factory.mktemp("course")
    shutil.copytree(ROOT / "source", root / "source")
    shutil.copy(ROOT / "nbgrader_config.py", root)
    return root


# --- processes ----------------------------------------------------------------------------------

def proc_stat(pid: int) -> tuple[str, int, str] | None:
    """(state, ppid, start time) of a process from /proc, None if it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()
    return fields[0], int(fields[1]), fields[19]


def descendants(roots) -> dict[int, str]:
    """pid -> start time of every process below the `roots` (a pid and its start time name a
    process for good, even if the pid is reused later)."""
    children: dict[int, list[tuple[int, str]]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and (st := proc_stat(int(name))):
            children.setdefault(st[1], []).append((int(name), st[2]))
    out, todo = {}, list(roots)
    while todo:
        for pid, start in children.get(todo.pop(), []):
            if pid not in out:
                out[pid] = start
                todo.append(pid)
    return out


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def alive(processes: dict[int, str]) -> dict[int, str]:
    """pid -> command line of those still running (a zombie only waits to be reaped: dead)."""
    out = {}
    for pid, start in processes.items():
        st = proc_stat(pid)
        if st and st[2] == start and st[0] != "Z":
            out[pid] = cmdline(pid)[:120]
    return out


GONE_WITHIN = 3.0
"""Seconds after a `kill -9` of a grader by which no process of its run may be left."""


def marked(mark: str) -> dict[int, str]:
    """Processes whose environment carries a run's mark, AUTOGRADER_TEST_RUN=mark (what the
    grader started outside the jail, even a process started after the descendants were listed)."""
    out = {}
    needle = f"AUTOGRADER_TEST_RUN={mark}".encode()
    for pid in (int(p) for p in os.listdir("/proc") if p.isdigit()):
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        st = proc_stat(pid)
        if st and needle in environ.split(b"\0"):
            out[pid] = st[2]
    return out


def kill_all(processes: dict[int, str]) -> None:
    for pid in alive(processes):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def wait_until_gone(seen: dict[int, str], mark: str, since: float,
                    within: float = GONE_WITHIN) -> None:
    """Fail unless every process of a killed run is gone within `within` seconds of `since`: what
    was `seen` (updated in place), what carries the run's mark, and their descendants (a jail's
    processes started after the kill, say)."""
    while True:
        seen.update(marked(mark))
        seen.update(descendants(list(alive(seen))))
        still = alive(seen)
        if not still:
            return
        assert time.monotonic() - since < within, (
            f"{len(still)} processes of the killed run still alive {within} s later: "
            f"{json.dumps(still, indent=1)}")
        time.sleep(0.05)


class ProcessTree:
    """Every process that runs below `pid` while it runs (polled), to check what outlives it:
    unlike a look at all the machine's processes, blind to other tests running in parallel."""

    def __init__(self, pid: int, interval: float = 0.1):
        self.seen: dict[int, str] = {}
        self._stop = threading.Event()

        def poll() -> None:
            while not self._stop.is_set():
                self.seen.update(descendants([pid, *alive(self.seen)]))
                self._stop.wait(interval)
        self._thread = threading.Thread(target=poll, daemon=True)
        self._thread.start()

    def left(self, within: float) -> dict[int, str]:
        """Once `pid` has ended: what of its tree is still alive `within` seconds later (polled;
        {} as soon as all is gone)."""
        self._stop.set()
        self._thread.join()
        deadline = time.monotonic() + within
        while True:
            self.seen.update(descendants(list(alive(self.seen))))
            still = alive(self.seen)
            if not still or time.monotonic() > deadline:
                return still
            time.sleep(0.02)

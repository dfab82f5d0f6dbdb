"""The sandbox keeps learner code out of the grader: limits, crashes, isolation."""

from __future__ import annotations

import os
import time

import torch

from autograder.jail.sandbox import Sandbox

HOSTILE = """
import os, sys, torch, gc

def slow():
    while True:
        pass

def grow():
    chunks = []
    while True:
        chunks.append(bytearray(50_000_000))

def die():
    os._exit(9)

def parent_pid():
    return os.getppid()

def patch():
    torch.allclose = lambda *a, **k: True
    torch.Tensor.__eq__ = lambda *a, **k: True
    return 1

def fine(x):
    return x * 2

def snoop():
    # The grader's objects are not in this process: look for any tensor named secret.
    return sum(1 for o in gc.get_objects() if isinstance(o, torch.Tensor) and getattr(o, "secret", False))
"""


def cells(source: str) -> list[dict]:
    return [{"source": source}]


def test_timeout_costs_only_that_function():
    with Sandbox(cells(HOSTILE), call_timeout=1) as box:
        box.load()  # the jailed server's start (importing torch) is not the call's time
        start = time.monotonic()
        assert box.call("slow").status == "timeout"
        assert time.monotonic() - start < 5
        assert box.call("slow").status == "timeout"  # not run again
        reply = box.call("fine", (torch.ones(2),))
        assert reply.status == "ok" and torch.equal(reply.value, torch.full((2,), 2.0))


def test_memory_limit_stops_a_growing_allocation():
    with Sandbox(cells(HOSTILE), limits={"memory_limit": 256 << 20}, call_timeout=20) as box:
        reply = box.call("grow")
        assert reply.status in ("exception", "crashed")
        assert reply.status == "crashed" or reply.exception.type == "MemoryError"
        assert box.call("fine", (torch.ones(1),)).status == "ok"


def test_crash_is_reported_and_next_call_gets_a_fresh_process():
    with Sandbox(cells(HOSTILE)) as box:
        reply = box.call("die")
        assert reply.status == "crashed" and "9" in reply.detail
        assert box.call("fine", (torch.ones(1),)).status == "ok"


def test_learner_code_runs_in_another_process_without_the_graders_objects():
    secret = torch.ones(3)
    secret.secret = True
    with Sandbox(cells(HOSTILE)) as box:
        assert box.call("parent_pid").value not in (os.getpid(), os.getppid())
        assert box.call("snoop").value == 0


def test_patching_torch_in_the_sandbox_does_not_reach_the_grader():
    with Sandbox(cells(HOSTILE)) as box:
        assert box.call("patch").status == "ok"
        reply = box.call("fine", (torch.ones(2),))
    assert not torch.allclose(reply.value, torch.zeros(2))
    assert reply.value.tolist() == [2.0, 2.0]


def test_cells_that_never_finish_cost_one_load_timeout():
    with Sandbox(cells("pass")) as warm:
        warm.load()
    with Sandbox(cells("def fine(x):\n    return x\n\nwhile True:\n    pass\n"), load_timeout=1) as box:
        start = time.monotonic()
        replies = [box.call("fine", (1,)) for _ in range(5)]
        assert time.monotonic() - start < 4
    assert all(r.status == "missing" for r in replies)
    assert "did not finish" in box.load_report.errors[0]


def test_each_function_gets_a_fresh_process():
    """A function that poisons its process (patches torch, turns off autograd) harms only itself."""
    source = HOSTILE + """
def poison():
    torch.set_grad_enabled(False)
    torch.exp = lambda *a: 0
    return os.getpid()

def healthy(x):
    return torch.exp(x), torch.is_grad_enabled(), os.getpid()
"""
    with Sandbox(cells(source)) as box:
        first = box.call("poison").value
        value, grad_on, pid = box.call("healthy", (torch.zeros(2),)).value
    assert torch.equal(value, torch.ones(2)) and grad_on and pid != first


def test_the_notebook_budget_bounds_a_notebook_of_slow_functions():
    source = "import time\ndef a():\n    time.sleep(0.8)\ndef b():\n    time.sleep(0.8)\ndef c():\n    return 1\n"
    with Sandbox(cells("x = 1")) as warm:  # the jail's server is up (a cold start takes > 1.2 s),
        assert not warm.load().failed     # whichever tests ran before this one in the process
    with Sandbox(cells(source), call_timeout=1, budget=1.2) as box:
        box.load()
        start = time.monotonic()
        replies = [box.call(f) for f in ("a", "b", "c")]
        assert time.monotonic() - start < 3
    assert replies[0].status == "ok" and replies[2].status == "timeout"
    assert "budget" in replies[2].detail or "time" in replies[2].detail


def test_banned_operations_are_seen_whatever_their_spelling():
    source = """import torch
def names(A, B):
    return torch.mm(A, B), A.matmul(B), torch.einsum("ij,jk->ik", A, B), torch.tensordot(A, B, 1)
def autograd(x):
    x = x.clone().requires_grad_()
    (x * x).sum().backward()
    return torch.func.grad(lambda t: (t * t).sum())(x.detach())
"""
    with Sandbox(cells(source)) as box:
        used = box.call("names", (torch.ones(2, 2), torch.ones(2, 2))).used
        assert {"aten.mm", "aten.bmm"} <= set(used)
        assert "autograd.autograd_engine" in box.call("autograd", (torch.ones(2),)).used


def test_a_cell_that_kills_the_process_while_loading_costs_only_its_own_definitions():
    parts = [{"source": "def first():\n    return 1\n"},
             {"source": "import os\nos._exit(3)\ndef lost():\n    return 2\n"},
             {"source": "def last():\n    return 3\n"}]
    with Sandbox(parts) as box:
        assert box.call("first").value == 1 and box.call("last").value == 3
        assert box.call("lost").status == "missing"
    assert "left out" in box.load_report.errors[0]


FORGER = """
import gc, json
from multiprocessing.connection import Connection

def _send(payload: bytes):
    for o in gc.get_objects():
        if isinstance(o, Connection):
            o.send_bytes(payload)
    import time
    time.sleep(30)

def not_a_message():
    _send(b'[1, 2, 3]')

def deeply_nested():
    _send(b'{"status": "ok", "value": ' + b'[' * 100_000 + b']' * 100_000 + b'}')

def many_lists():
    _send(b'{"status": "ok", "used": [], "value": [' + b'[],' * 300_000 + b'[]]}')

def not_json():
    _send(b'\\xff{status')

def fine(x):
    return x * 2
"""


def test_a_forged_reply_costs_only_its_own_call():
    """Learner code can find its socket and send anything: the grader reads it as a crash of
    that call (with what it saw), never as its own error, and the next call is unharmed."""
    with Sandbox(cells(FORGER), call_timeout=20) as box:
        for name, words in (("not_a_message", "not a message"), ("deeply_nested", "not valid data"),
                            ("many_lists", "too many nested values"), ("not_json", "not valid data")):
            started = time.monotonic()
            reply = box.call(name)
            assert reply.status == "crashed" and words in reply.detail, (name, reply)
            assert time.monotonic() - started < 10, name
        reply = box.call("fine", (torch.ones(2),))
        assert reply.status == "ok" and torch.equal(reply.value, torch.full((2,), 2.0))


def test_a_jail_that_cannot_start_a_process_scores_nothing(monkeypatch):
    """When the jail's server cannot fork a child (it failed to start: a broken environment), the
    grader's fault is not turned into zeros for the learner: the notebook is not graded (a batch
    marks it for a retry, the command line exits 3)."""
    import pytest
    from autograder.jail import jailer
    from autograder.course import ASSIGNMENTS
    from autograder.grade.batch import _grade_chunk, grade_notebook
    from autograder.jail.sandbox import JailBroken
    monkeypatch.setattr(jailer.Jail, "spawn", lambda self, limits, warm=(): None)
    path = ASSIGNMENTS["01_linear_algebra"].source
    with pytest.raises(JailBroken):
        grade_notebook(path)
    [(_, graded)] = _grade_chunk([(0, "alice", "01_linear_algebra", str(path))])
    assert graded.operator and "could not start a process" in graded.operator
    assert not graded.results


LEAVES = """
import ctypes, os, time

def leave(size):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmat.restype = ctypes.c_void_p
    segment = libc.shmget(0, ctypes.c_size_t(size), 0o1600)              # IPC_PRIVATE, IPC_CREAT | 0600
    address = libc.shmat(segment, None, 0)
    ctypes.memset(ctypes.c_void_p(address), 1, size)      # the memory is really taken
    libc.shmdt(ctypes.c_void_p(address))                  # and kept once detached
    queue = libc.msgget(0, 0o1600)
    try:
        open("/dev/shm/left", "w").write("x")               # (the jail's /dev is read-only)
    except OSError:
        pass
    if os.fork() == 0:                                     # a daemon that outlives the call
        os.setsid()
        time.sleep(600)
        os._exit(0)
    return segment

def look():
    tables = {}
    for kind in ("shm", "msg", "sem"):
        with open(f"/proc/sysvipc/{kind}") as f:
            tables[kind] = len(f.readlines()) - 1
    others = [p for p in os.listdir("/proc") if p.isdigit() and p not in ("1", str(os.getpid()), str(os.getppid()))]
    shm = os.listdir("/dev/shm") if os.path.isdir("/dev/shm") else []
    return [tables["shm"], tables["msg"], tables["sem"], len(others), shm]
"""


def test_the_next_learner_starts_from_nothing_of_the_last_ones():
    """Shared memory, a message queue, a POSIX shm file and a daemon one notebook leaves are gone
    before the next notebook's first line runs (issue 29)."""
    with Sandbox(cells(LEAVES)) as first:
        reply = first.call("leave", (64 << 20,))
        assert reply.status == "ok" and reply.value >= 0, reply
    with Sandbox(cells(LEAVES)) as second:
        reply = second.call("look")
    assert reply.status == "ok" and reply.value == [0, 0, 0, 0, []], reply.value


PINS = LEAVES + """
def pin_until_stopped(step):
    total = 0
    while total < (64 << 30):
        segment = libc_pin(step)
        if segment < 0:
            return ["refused", total]
        total += step
    return ["never stopped", total]

def libc_pin(size):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmat.restype = ctypes.c_void_p
    segment = libc.shmget(0, ctypes.c_size_t(size), 0o1600)
    if segment < 0:
        return segment
    address = libc.shmat(segment, None, 0)
    ctypes.memset(ctypes.c_void_p(address), 1, size)
    libc.shmdt(ctypes.c_void_p(address))
    return segment
"""


def test_the_jail_holds_no_more_memory_than_its_limit(monkeypatch):
    """Shared memory outlives every mapping, so no per-process limit sees it: the jail's cgroup
    does. A learner pinning segments is stopped at the jail's limit (its own process is the one
    killed, not the server), and the next learner starts with the memory given back (issue 29).
    Where the host offers no cgroup this is skipped, unless AUTOGRADER_CGROUP_REQUIRED=1 (CI)."""
    import pytest
    from autograder.jail import cgroup, jailer
    monkeypatch.setenv("AUTOGRADER_JAIL_MEMORY", str(1 << 30))
    own = jailer.Jail()
    monkeypatch.setattr(jailer, "_jail", own)
    try:
        with Sandbox(cells(PINS)) as first:
            assert first.call("look").status == "ok"
            if own.memory is None:
                if os.environ.get("AUTOGRADER_CGROUP_REQUIRED") == "1":
                    pytest.fail(f"no memory cgroup for the jail: {cgroup.MemoryGroup.why_not}")
                pytest.skip(f"no memory cgroup here: {cgroup.MemoryGroup.why_not}")
            server, before = own._process.pid, own.memory.usage()
            reply = first.call("pin_until_stopped", (128 << 20,))
            assert reply.status == "crashed" and "SIGKILL" in reply.detail, reply
        with Sandbox(cells(PINS)) as second:
            reply = second.call("look")
            assert reply.status == "ok" and reply.value[:3] == [0, 0, 0], reply
            assert own._process.pid == server  # the server was not the one stopped
            assert own.memory.usage() < before + (64 << 20), (own.memory.usage(), before)
    finally:
        own.close()


def test_a_kernel_folder_left_by_a_grader_that_died_is_removed_by_the_next(tmp_path, monkeypatch):
    """The jailed kernels' socket folder (and the connection file in it) is removed when its
    grader closes; one killed (kill -9) cannot: the next grader removes the folders of graders
    no longer alive, and only those (each folder is named after its grader's pid)."""
    import subprocess
    import tempfile
    from pathlib import Path
    from autograder.jail.jailer import Jail
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = subprocess.Popen(["true"])
    dead.wait()
    left = tmp_path / f"autograder-kernels-{dead.pid}-abc"
    (left / "kernel-x").mkdir(parents=True)
    (left / "kernel-x" / "kernel.json").write_text("{}")
    alive = subprocess.Popen(["sleep", "60"])
    kept = tmp_path / f"autograder-kernels-{alive.pid}-def"
    kept.mkdir()
    try:
        own = Jail(jailed=False)
        folder = Path(own.kernel_folder())
        assert folder.name.startswith(f"autograder-kernels-{os.getpid()}-")
        assert not left.exists() and kept.exists()
        own.close()
        assert not folder.exists()
    finally:
        alive.kill()
        alive.wait()

"""Hostile submissions earn nothing and harm nothing (CONTRACT.md, "What the grade guarantees").

Each attack is an answer cell for 04's `graph_nodes` that tries something, then returns the right
walk only if the attempt failed: a full score for `graph_nodes` means the jail held. (04's
exercise is torch itself, so no subset of Python refuses the attempt before it runs: the jail is
what holds it. By-hand functions are refused such code from the code, test_subset.py.) Every attack
is graded in one batch with an honest student beside it, through the command line, and the
test checks what the jail must prevent: files changed outside the scratch directory, processes
left alive, a connection to a listener, another learner's or another function's points.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path

import nbformat
import pytest

from autograder.course import ASSIGNMENTS, ROOT
from autograder.instructor.samples import Scenario, load_scenarios, submission_notebook
from autograder.instructor.build import tool_env
from conftest import ProcessTree, run

FULL = {"graph_nodes": 5, "leaf_tensors": 4, "hidden_grad": 6}


def _attack(body: str) -> str:
    """A graph_nodes whose body tries `body` (which sets `ok = True` when the attempt failed)."""
    indented = "\n".join("    " + line for line in body.strip("\n").splitlines())
    return f"""
def graph_nodes(t):
    ok = False
{indented}
    names, seen = [], set()

    def visit(node):
        if node is None or node in seen:
            return
        seen.add(node)
        names.append(type(node).__name__)
        for child, _ in node.next_functions:
            visit(child)

    visit(t.grad_fn)
    return names if ok else names + ["wrong"]
"""


def _attacks(paths: dict[str, Path], port: int) -> dict[str, str]:
    write_all = "\n".join(f"""
try:
    with open({str(p)!r}, "a") as f:
        f.write("pwned")
    wrote = True
except OSError:
    pass""" for p in paths.values())
    return {
        "read_hidden_tests": f"""
try:
    open({str(ROOT / 'autograder' / 'tests' / 'test_04_computational_graph.py')!r}).read()
except OSError:
    ok = True
""",
        "write_everywhere": f"""
wrote = False
{write_all}
import os, glob
for folder in {[str(p.parent) for p in paths.values()]!r}:
    try:
        open(os.path.join(folder, "dropped.txt"), "w").write("x")
        wrote = True
    except OSError:
        pass
ok = not wrote
""",
        "site_packages_pth": """
import site, sysconfig, os
ok = True
for folder in set(site.getsitepackages() + [sysconfig.get_paths()["purelib"]]):
    for name in ("evil.pth", "sitecustomize.py"):
        try:
            open(os.path.join(folder, name), "w").write("import os\\n")
            ok = False
        except OSError:
            pass
""",
        "network": f"""
import socket
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=2).sendall(b"pwned")
except OSError:
    ok = True
""",
        "daemon": """
import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep(600)
    os._exit(0)
ok = True
""",
        "trace_the_server": """
# The server forks every later learner's processes: reading or writing its memory, or
# tracing it, would reach them.
import ctypes, os
reached = []
server = os.getppid()
for name in ("mem", "environ", "maps"):
    try:
        open(f"/proc/{server}/{name}", "rb").read(1)
        reached.append(name)
    except OSError:
        pass
libc = ctypes.CDLL(None, use_errno=True)
if libc.ptrace(16, server, 0, 0) == 0:  # PTRACE_ATTACH
    reached.append("ptrace")
    libc.ptrace(17, server, 0, 0)  # PTRACE_DETACH
ok = not reached
""",
        "kill_parent": """
# Once the server is dead, the jail's init takes everything down, this process included; the
# sleep keeps it from answering first (and getppid() may then be the jail's init, root's).
import os, signal, time
for kill in (lambda: os.killpg(os.getpgid(os.getppid()), signal.SIGKILL),
             lambda: os.kill(os.getppid(), signal.SIGKILL)):
    try:
        kill()
    except OSError:
        pass
time.sleep(5)
ok = True
""",
        "fork_bomb": """
import os, time
children = 0
for _ in range(10_000):
    try:
        if os.fork() == 0:
            time.sleep(600)
            os._exit(0)
        children += 1
    except OSError:
        break
ok = children < 10_000
""",
        "fill_scratch": """
import os
try:
    with open("/tmp/fill", "wb") as f:
        for _ in range(10_000):
            f.write(b"x" * (1 << 20))
except OSError:
    ok = True
""",
        "leak_memory_slowly": """
import time
hoard = []
try:
    for _ in range(100_000):
        hoard.append(bytearray(20 << 20))
        time.sleep(0.001)
except MemoryError:
    hoard.clear()
    ok = True
""",
        "thread_keeps_running": """
import threading, time
threading.Thread(target=lambda: time.sleep(600), daemon=False).start()
ok = True
""",
        "huge_stdout": """
import sys
for _ in range(200):
    print("x" * 1_000_000)
    sys.stderr.write("y" * 1_000_000)
ok = True
""",
        "stop_itself": """
import os, signal
os.kill(os.getpid(), signal.SIGSTOP)
ok = True
""",
        "poison_torch": """
import torch
torch.set_grad_enabled(False)
torch.Tensor.__add__ = lambda *a: 0
torch.exp = lambda *a: 0
ok = True
""",
        "leave_a_secret": """
open("/tmp/secret_of_alice", "w").write("alice's answer")
ok = True
""",
        "steal_a_secret": """
import os
ok = not os.path.exists("/tmp/secret_of_alice")
""",
    }


@pytest.fixture(scope="module")
def attacked(tmp_path_factory):
    course = tmp_path_factory.mktemp("course")
    submitted, out = course / "submitted", course / "out"
    canaries = {
        "source": course / "source" / "04_computational_graph" / "computational_graph.ipynb",
        "honest": submitted / "honest" / "04_computational_graph" / "computational_graph.ipynb",
        "grades": out / "grades.csv",
        "gradebook": course / "gradebook.db",
        "package": ROOT / "autograder" / "tests" / "data.py",
    }
    canaries["source"].parent.mkdir(parents=True)
    shutil.copy(ASSIGNMENTS["04_computational_graph"].source, canaries["source"])
    canaries["gradebook"].write_text("gradebook")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.2)
    port = listener.getsockname()[1]
    connections = []
    stop = threading.Event()

    def accept():
        while not stop.is_set():
            try:
                connections.append(listener.accept())
            except OSError:
                pass
    threading.Thread(target=accept, daemon=True).start()

    attacks = _attacks({k: v for k, v in canaries.items() if k != "package"}, port)
    # The alphabetical order of students is the grading order of one worker: alice leaves a
    # secret, then (same worker, later) zed tries to steal it.
    students = {f"a_{name}": code for name, code in attacks.items() if name != "steal_a_secret"}
    students["zed_steal_a_secret"] = attacks["steal_a_secret"]
    students["honest"] = None
    for student, code in students.items():
        scenario = Scenario(student, "04_computational_graph", "",
                            {"graph_nodes": _attack(code)} if code else {})
        path = submitted / student / "04_computational_graph" / "computational_graph.ipynb"
        path.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(submission_notebook(scenario), path)
    out.mkdir()
    canaries["grades"].write_text("student,assignment,score,max_score\n")
    before = {k: p.read_bytes() for k, p in canaries.items()}
    started = time.monotonic()
    # every process of the batch (its worker, the jail, what the learners started) is watched
    # while it runs; other tests' jails (parallel workers) are not the batch's
    args = ["python", "-m", "autograder", "grade", str(submitted), "--out", str(out), "--jobs", "1"]
    batch = subprocess.Popen(args, cwd=course, env=tool_env(), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    tree = ProcessTree(batch.pid)
    stdout, stderr = batch.communicate()
    done = subprocess.CompletedProcess(args, batch.returncode, stdout, stderr)
    seconds = time.monotonic() - started
    alive = [f"{pid} {command}" for pid, command in tree.left(within=3.0).items()]
    stop.set()
    listener.close()
    after = {k: p.read_bytes() if k != "grades" else before[k] for k, p in canaries.items()}
    results = {s: json.loads((out / s / "04_computational_graph.json").read_text()) for s in students
               if (out / s / "04_computational_graph.json").is_file()}
    return {"done": done, "results": results, "students": students, "before": before, "after": after,
            "alive": alive, "connections": connections, "course": course, "seconds": seconds}


def _scores(result: dict) -> dict[str, float]:
    out = {}
    for test in result["tests"]:
        function = test["name"].split(":")[0]
        out[function] = out.get(function, 0) + test["score"]
    return out


def test_the_batch_runs_to_the_end(attacked):
    assert attacked["done"].returncode == 0, attacked["done"].stderr[-2000:]
    assert set(attacked["results"]) == set(attacked["students"])


@pytest.mark.parametrize("attack", ["read_hidden_tests", "write_everywhere", "site_packages_pth",
                                    "network", "trace_the_server", "fill_scratch",
                                    "thread_keeps_running", "huge_stdout", "leave_a_secret"])
def test_an_attack_that_fails_harmlessly_changes_no_score(attacked, attack):
    """The attempt failed inside the jail, so the (otherwise right) function keeps its points."""
    assert _scores(attacked["results"][f"a_{attack}"]) == FULL


@pytest.mark.parametrize("attack", ["kill_parent", "stop_itself", "leak_memory_slowly",
                                    "poison_torch"])
def test_an_attack_on_the_process_costs_only_its_own_function(attacked, attack):
    scores = _scores(attacked["results"][f"a_{attack}"])
    assert {f: v for f, v in scores.items() if f != "graph_nodes"} == \
        {f: v for f, v in FULL.items() if f != "graph_nodes"}
    assert scores["graph_nodes"] <= FULL["graph_nodes"]


@pytest.mark.parametrize("attack", ["daemon", "fork_bomb"])
def test_processes_started_by_a_call_cost_nothing_else(attacked, attack):
    """Processes a call starts cost the other functions nothing, and die with the jail
    (test_nothing_the_learners_started_is_alive). A by-hand function's call that starts one
    fails, named: test_forgery.py's test_a_process_beside_a_by_hand_call_is_named."""
    scores = _scores(attacked["results"][f"a_{attack}"])
    assert {f: v for f, v in scores.items() if f != "graph_nodes"} == \
        {f: v for f, v in FULL.items() if f != "graph_nodes"}


def test_another_learner_cannot_read_what_one_left_in_scratch(attacked):
    assert _scores(attacked["results"]["zed_steal_a_secret"]) == FULL


def test_honest_learner_unharmed(attacked):
    assert _scores(attacked["results"]["honest"]) == FULL


def test_no_file_outside_the_scratch_directory_changed(attacked):
    for name in attacked["before"]:
        assert attacked["after"][name] == attacked["before"][name], name
    course = attacked["course"]
    assert not list(course.rglob("dropped.txt"))
    assert not (ROOT / "autograder" / "tests" / "dropped.txt").exists()


def test_no_connection_reached_the_listener(attacked):
    assert attacked["connections"] == []


def test_nothing_the_learners_started_is_alive(attacked):
    assert attacked["alive"] == []


def test_a_stopped_or_killed_process_is_reported_plainly(attacked):
    for attack in ("kill_parent", "stop_itself"):
        outputs = [t["output"] for t in attacked["results"][f"a_{attack}"]["tests"]
                   if t["name"].startswith("graph_nodes") and t["score"] == 0]
        assert outputs, attack
        assert all(("crashed" in o or "did not finish" in o) and "Traceback" not in o
                   for o in outputs), outputs


def test_the_jail_runs_the_grader_that_is_running(tmp_path):
    """A second checkout graded with the first checkout's venv (two courses sharing one venv, a
    Gradescope zip unpacked beside an install that points elsewhere): the jailed server imports
    the running package's own files, not the venv's install, and a solution gets full marks."""
    import subprocess
    import sys

    from autograder.instructor.build import tool_env
    clone = tmp_path / "second checkout"
    shutil.copytree(ROOT / "autograder", clone / "autograder",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copytree(ROOT / "source" / "01_linear_algebra", clone / "source" / "01_linear_algebra")
    for name in ("pyproject.toml", "nbgrader_config.py"):
        shutil.copy(ROOT / name, clone)
    solution = next(s for s in load_scenarios("01_linear_algebra") if s.student == "solution")
    notebook = tmp_path / "solution.ipynb"
    nbformat.write(submission_notebook(solution), notebook)
    env = {k: v for k, v in tool_env().items() if k != "PYTHONPATH"}

    def python(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, *args], cwd=clone, env=env, capture_output=True,
                              text=True, timeout=600)

    where = python("-c", "import autograder; print(autograder.__file__)").stdout.strip()
    assert Path(where).parent == clone / "autograder", "the grader must be the second checkout's"
    done = python("-m", "autograder", "grade", str(notebook), "--json", str(tmp_path / "r.json"))
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads((tmp_path / "r.json").read_text())
    assert result["score"] == result["max_score"] == 11, done.stdout  # 01: matmul 5, linear_forward 6

"""One learner's POSIX message queues and kernel keys are not there for the next learner the same
jailed server serves (issue 37 item 1; System V objects, /dev/shm and daemons: test_sandbox.py's
and test_nbgrader_hostile.py's test_the_next_*_starts_from_nothing_of_the_last_ones).

A queue (`mq_open`) and a key outlive the process that made them: a queue until it is unlinked or
its IPC namespace goes, a key for as long as a keyring holds it. The user keyrings (@u, @us) are
the uid's, and every learner the server serves runs as the jail's one uid; the session keyring
(@s) is inherited from the grader, which has one of its own when it runs as a systemd service or
from a login (here: `_in_a_session_keyring`). Alice leaves one of each, all readable by anyone
(so the only thing between her and the next learner is the jail); then the next learner, graded
by the same worker, looks for them: by name, in every keyring it can reach (@u, @us, @s, the
uid's persistent keyring), in /dev/mqueue and in /proc/keys. Both score full marks only if
Alice's objects were made and the next learner found none.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import threading

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from autograder.instructor.build import tool_env
from autograder.course import ASSIGNMENTS
from autograder.instructor.samples import Scenario, submission_notebook
from test_jail import FULL, _attack, _scores

KINDS = ("queue", "user_key", "session_key")
ADD_KEY, KEYCTL = {"aarch64": (217, 219), "riscv64": (217, 219),
                   "s390x": (278, 280)}.get(os.uname().machine, (248, 250))  # x86_64

# Learner code: plain ctypes, as a learner would write it (no keyutils in the jail).
LEAVE_AND_FIND = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
try:
    mq_open = libc.mq_open
except AttributeError:  # glibc before 2.34
    mq_open = ctypes.CDLL("librt.so.1", use_errno=True).mq_open
ADD_KEY, KEYCTL = {"aarch64": (217, 219), "riscv64": (217, 219),
                   "s390x": (278, 280)}.get(os.uname().machine, (248, 250))  # x86_64
KEYCTL_SETPERM, KEYCTL_SEARCH, KEYCTL_GET_PERSISTENT = 5, 10, 22
QUEUE = b"/left_by_alice"

def rings(kind):
    if kind == "session_key":
        return [-3]  # @s
    # the uid's persistent keyring (linked into @s to reach it), @u and @us
    persistent = libc.syscall(KEYCTL, KEYCTL_GET_PERSISTENT, ctypes.c_long(-1), ctypes.c_long(-3))
    return [-4, -5] + ([persistent] if persistent > 0 else [])

def leave(kind):
    if kind == "queue":
        return mq_open(QUEUE, os.O_CREAT | os.O_RDWR, 0o666, None) >= 0
    made = True
    for ring in rings(kind):
        key = libc.syscall(ADD_KEY, b"user", ("left_by_alice_" + kind).encode(),
                           b"alice's answer", 14, ctypes.c_int(ring))
        made = made and key > 0
        # anyone may see, read, search and link it (where it may say so: a key of @s, which
        # Alice possesses): only the jail keeps it from the next learner
        libc.syscall(KEYCTL, KEYCTL_SETPERM, ctypes.c_int(key), ctypes.c_uint(0x3f3f3f3f))
    return made

def find(kind):
    if kind == "queue":
        if mq_open(QUEUE, os.O_RDONLY, 0, None) >= 0:
            return True
        return os.path.isdir("/dev/mqueue") and bool(os.listdir("/dev/mqueue"))
    for ring in rings(kind):
        if libc.syscall(KEYCTL, KEYCTL_SEARCH, ctypes.c_int(ring), b"user",
                        ("left_by_alice_" + kind).encode(), 0) > 0:
            return True
    try:
        with open("/proc/keys") as keys:
            return "left_by_alice" in keys.read()
    except OSError:
        return False
"""


def _in_a_session_keyring() -> None:
    """Join a new session keyring (KEYCTL_JOIN_SESSION_KEYRING, anonymous), as pam_keyinit does
    for a login and systemd for a service: the grader's keyring, which its jail inherits."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    if libc.syscall(KEYCTL, 1, None) < 0:
        raise OSError(ctypes.get_errno(), "KEYCTL_JOIN_SESSION_KEYRING")


# -- the batch: `python -m autograder grade DIR --out OUT`, one worker --------------------------

@pytest.fixture(scope="module", params=["own", "shared"])
def batch(request, tmp_path_factory):
    """The batch, its children in namespaces of their own, or (AUTOGRADER_CHILD_NAMESPACES=0, as
    where the host refuses them) in the jail's: then the reset removes the queues, and the uid's
    keyrings are shut before any learner code runs (Alice may not leave a key there at all)."""
    course = tmp_path_factory.mktemp("course")
    submitted, out = course / "submitted", course / "out"
    source = course / "source" / "04_computational_graph" / "computational_graph.ipynb"
    source.parent.mkdir(parents=True)
    shutil.copy(ASSIGNMENTS["04_computational_graph"].source, source)
    # Alphabetical order is the grading order of the one worker: each a_leaves_KIND is graded
    # before z_finds_KIND, by the same jailed server.
    students = {}
    for kind in KINDS:
        students[f"a_leaves_{kind}"] = f"{LEAVE_AND_FIND}\nok = leave({kind!r})"
        students[f"z_finds_{kind}"] = f"{LEAVE_AND_FIND}\nok = not find({kind!r})"
    for student, code in students.items():
        scenario = Scenario(student, "04_computational_graph", "", {"graph_nodes": _attack(code)})
        path = submitted / student / "04_computational_graph" / "computational_graph.ipynb"
        path.parent.mkdir(parents=True)
        nbformat.write(submission_notebook(scenario), path)
    args = ["python", "-m", "autograder", "grade", str(submitted), "--out", str(out), "--jobs", "1"]
    env = {**tool_env(), "AUTOGRADER_CHILD_NAMESPACES": "1" if request.param == "own" else "0"}
    done = subprocess.run(args, cwd=course, env=env, capture_output=True, text=True,
                          preexec_fn=_in_a_session_keyring, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    results = {s: json.loads((out / s / "04_computational_graph.json").read_text())
               for s in students}
    return request.param, {s: _scores(r) for s, r in results.items()}


@pytest.mark.parametrize("kind", KINDS)
def test_the_next_learner_in_a_batch_finds_nothing_of_the_last_ones(batch, kind):
    namespaces, scores = batch
    if namespaces == "own" or kind != "user_key":
        assert scores[f"a_leaves_{kind}"] == FULL, "Alice could not make it: this proves nothing"
    assert scores[f"z_finds_{kind}"] == FULL, f"the next learner found Alice's {kind}"


# -- nbgrader: the learner's own kernel, forked by the jailed server -----------------------------

@pytest.fixture(scope="module")
def kernels():
    """Alice's notebook, then the next learner's, run by nbgrader's Execute step in kernels the
    grader's jailed server forks (its own server here, started in a session keyring)."""
    from autograder.jail import jailer
    from autograder.nbgrader.kernels import JailedExecute
    saved = jailer._jail
    own = jailer._jail = jailer.Jail()
    try:
        own.kernel_folder()  # (re)starts the server with the kernels' folder bound

        def start():
            _in_a_session_keyring()  # this thread's credentials only: Popen forks from here
            own.start()
        starter = threading.Thread(target=start)
        starter.start()
        starter.join()

        def run(*sources):
            nb = new_notebook(cells=[new_code_cell(s) for s in sources])
            nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                         "language": "python"}
            nb, _ = JailedExecute(timeout=60).preprocess(nb, {})
            return "".join(o.get("text", "") for c in nb.cells for o in c.outputs)

        each = f"{{k: %s(k) for k in {KINDS!r}}}"
        left = run(LEAVE_AND_FIND, f"import json\nprint('LEFT', json.dumps({each % 'leave'}))")
        seen = run(LEAVE_AND_FIND, f"import json\nprint('SEEN', json.dumps({each % 'find'}))")
    finally:
        own.close()
        jailer._jail = saved

    def parse(text, word):
        line = next((x for x in text.splitlines() if x.startswith(word + " ")), None)
        assert line, text[-2000:]
        return json.loads(line.removeprefix(word + " "))
    return parse(left, "LEFT"), parse(seen, "SEEN")


@pytest.mark.parametrize("kind", KINDS)
def test_the_next_learners_kernel_finds_nothing_of_the_last_ones(kernels, kind):
    left, seen = kernels
    assert left[kind] is True, "Alice could not make it: the test proves nothing"
    assert seen[kind] is False, f"the next learner's kernel found Alice's {kind}"

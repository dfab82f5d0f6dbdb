"""What learner code makes its process send is bounded where the grader receives it, and a
message it writes to the grader's socket itself is never taken for a reply (issue 20)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import torch

from autograder.grade import results as report
from autograder.course import ROOT
from autograder.instructor.build import tool_env
from autograder.course import ROOT
from autograder.jail.sandbox import MAX_TEXT, Sandbox, _reply_from

FORGE = '''
import json, os, struct


def _forge(obj):
    """Write a message to every socket of this process, framed as the grader reads them."""
    data = json.dumps(obj).encode()
    data = struct.pack("!i", len(data)) + data
    for fd in range(3, 256):
        try:
            if not os.readlink(f"/proc/self/fd/{fd}").startswith("socket:"):
                continue
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        except OSError:
            pass
'''

HUGE = 40_000_000

AT_LOAD = FORGE + f'''
_forge({{"status": "loaded", "defined": ["f" * 1_000_000], "errors": ["E" * 2_000_000]}})


def graph_nodes(t):
    raise NotImplementedError
'''

AT_CALL = FORGE + f'''
class _Huge(Exception):
    def __str__(self):
        return "M" * {HUGE}


_CALLS = []


def graph_nodes(t):
    _CALLS.append(1)
    if len(_CALLS) == 1:
        raise _Huge()
    if len(_CALLS) == 2:
        _forge({{"status": "ok", "exception": None, "used": ["u" * {HUGE}], "params": [],
                "mutated": [], "value": "v" * {HUGE}}})
    return "x" * {HUGE}
'''


def _notebook(tmp_path: Path, source: str) -> Path:
    """04's release with `source` as graph_nodes (an exercise about torch itself, with no subset of
    Python to refuse such code before it runs: the bounds are what hold it)."""
    nb = nbformat.read(ROOT / "release" / "04_computational_graph" / "computational_graph.ipynb", 4)
    for cell in nb.cells:
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "graph_nodes":
            cell.source = source
    path = tmp_path / "computational_graph.ipynb"
    nbformat.write(nb, path)
    return path


MEASURE = """
import resource, sys
from autograder.cli import main
code = main(["grade", sys.argv[1], "--json", sys.argv[2]])
print("peak", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def _peak_kb(path, out, cwd) -> tuple[int, object]:
    done = subprocess.run([sys.executable, "-c", MEASURE, str(path), str(out)], cwd=cwd,
                          env=tool_env(), capture_output=True, text=True, timeout=600)
    return int(done.stdout.split("peak")[-1]) if "peak" in done.stdout else 0, done


@pytest.fixture(scope="module")
def ordinary_peak_kb(tmp_path_factory):
    """The grader's peak memory on the unanswered notebook, in this environment (a CUDA build
    of torch, or another Python, loads more before any notebook is read)."""
    tmp = tmp_path_factory.mktemp("ordinary")
    source = ROOT / "release" / "04_computational_graph" / "computational_graph.ipynb"
    peak, done = _peak_kb(source, tmp / "results.json", tmp)
    assert peak, done.stdout[-2000:] + done.stderr[-2000:]
    return peak


@pytest.mark.parametrize("source", [AT_LOAD, AT_CALL], ids=["at_load", "at_call"])
def test_40_mb_messages_give_a_small_results_json(tmp_path, source, ordinary_peak_kb):
    """A 40 MB exception text, a 40 MB returned string and a forged 40 MB reply: results.json
    stays under 1 MB and the grader's peak memory stays within 300 MiB of an ordinary grade."""
    path = _notebook(tmp_path, source)
    out = tmp_path / "results.json"
    done = subprocess.run([sys.executable, "-c", MEASURE, str(path), str(out)], cwd=tmp_path,
                          env=tool_env(), capture_output=True, text=True, timeout=600)
    assert out.is_file(), done.stdout[-2000:] + done.stderr[-2000:]
    size = out.stat().st_size
    assert size < report.MAX_RESULTS_BYTES, size
    data = json.loads(out.read_bytes())
    graded = [t for t in data["tests"] if t["name"].startswith("graph_nodes:")
              and t["name"] != "graph_nodes: needs review"]
    assert graded and all(t["score"] == 0 for t in graded)
    assert data["score"] == 0
    peak_kb = int(done.stdout.split("peak")[-1])
    assert peak_kb < ordinary_peak_kb + 300 * 1024, \
        f"grader peak {peak_kb // 1024} MiB, {ordinary_peak_kb // 1024} MiB on an unanswered notebook"
    review = next(t for t in data["tests"] if t["name"] == "graph_nodes: needs review")
    assert review["visibility"] == "hidden" and "os.write" in review["output"]


def test_reply_strings_are_cut_where_the_grader_reads_them():
    raw = {"status": "exception", "used": ["aten.mm"] + [f"f{i}" * 1000 for i in range(5000)],
           "params": ["p" * HUGE], "mutated": ["m" * 1000] * 1000,
           "exception": {"type": "T" * HUGE, "bases": ["B" * HUGE] * 100,
                         "message": "M" * HUGE, "where": "W" * HUGE},
           "value": "v" * HUGE, "args_after": None}
    reply = _reply_from(raw, ())
    exc = reply.exception
    assert exc.message.endswith(f"... (cut: {HUGE - MAX_TEXT} characters)")
    assert len(exc.message) < MAX_TEXT + 100 and len(exc.where) < MAX_TEXT + 100
    assert len(exc.type) < 300 and len(exc.bases) <= 50 and all(len(b) < 300 for b in exc.bases)
    assert "aten.mm" in reply.used and len(reply.used) <= 2001
    assert all(len(u) < 300 for u in reply.used)
    assert len(reply.value) < 20_000 and "(cut: " in reply.value
    assert len(reply.mutated) <= 100


def test_results_json_stays_under_1_mb():
    tests = [{"name": f"t{i}", "score": 0, "max_score": 1, "status": "failed",
              "output": "\u00e9\u0001" * 1_000_000, "visibility": "visible"} for i in range(60)]
    data = report.bounded({"score": 0, "max_score": 60, "tests": tests, "output": "x" * HUGE})
    assert len(report._dumps(data)) < report.MAX_RESULTS_BYTES
    assert "(cut: " in data["tests"][0]["output"]


RECORDER_SWAP = """
import autograder.jail.inside.child as child
import autograder.jail.inside.watch as watch
import autograder.jail.inside.wire as wire

watch._Recorder.__enter__ = lambda self: self
watch._Recorder.__exit__ = lambda self, *exc: None
wire.encode = lambda value, origin_of=None: "forged"

def product(A, B):
    return A @ B

def imported():
    import sys
    return sorted(n for n in sys.modules if n.startswith("autograder"))
"""


def test_the_grader_modules_learner_code_imports_are_new_copies():
    with Sandbox([{"source": RECORDER_SWAP}]) as box:
        reply = box.call("product", (torch.eye(2), torch.eye(2)))
        assert reply.status == "ok" and torch.equal(reply.value, torch.eye(2))
        assert "aten.mm" in reply.used
        # Only the copies the learner's own cell imported: none of the grader's objects.
        assert box.call("imported").value == ["autograder", "autograder.jail", "autograder.jail.inside",
                                              "autograder.jail.inside.child", "autograder.jail.inside.keep",
                                              "autograder.jail.inside.plain", "autograder.jail.inside.watch",
                                              "autograder.jail.inside.wire"]


POPS = """
import torch
from torch.utils._python_dispatch import _pop_mode, _push_mode, TorchDispatchMode

def pops(A, B):
    mode = _pop_mode()
    try:
        return torch.ops.aten.mm(A, B)
    finally:
        _push_mode(mode)

def leaves_a_mode(A, B):
    TorchDispatchMode().__enter__()
    return A + B

def honest_mode(A, B):
    class Log(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))
    with Log():
        return A * B
"""


def test_switching_the_recorder_off_fails_the_call():
    A = torch.eye(2)
    with Sandbox([{"source": POPS}]) as box:
        for name in ("pops", "leaves_a_mode"):
            reply = box.call(name, (A, A))
            assert reply.status == "exception", name
            assert reply.exception.type == "RecorderSwitchedOff"
            assert "switched off" in reply.exception.message
        reply = box.call("honest_mode", (A, A))  # a mode of one's own, entered and left: fine
        assert reply.status == "ok" and "aten.mul" in reply.used


PRINTS = """
import torch

def prints(A, B):
    print("A is", A, f"{B!r}")
    return A + B

def prints_after_patching(A, B):
    real = torch.masked_select         # torch's formatting of a tensor calls it, with modes off
    torch.masked_select = lambda *a, **k: real(*a, **k)
    try:
        print(A)
    finally:
        torch.masked_select = real
    return A + B
"""


def test_printing_a_tensor_is_not_switching_the_recorder_off():
    """torch pops every mode while it formats a tensor (print, repr, gradcheck's messages): for a
    plain tensor formatted by torch's own functions that is allowed; with a torch function the
    formatting runs replaced by the learner's, it is not (that code would run unrecorded)."""
    A = torch.eye(2)
    with Sandbox([{"source": PRINTS}]) as box:
        reply = box.call("prints", (A, A))
        assert reply.status == "ok" and "aten.add" in reply.used, reply.exception
        reply = box.call("prints_after_patching", (A, A))
        assert reply.status == "exception" and reply.exception.type == "RecorderSwitchedOff"


# --- After the call (issue 28): the report is made inside the recorded region, from plain
# objects, with torch's names and Python's hooks as they were before learner code ran.

AFTER_THE_CALL = """
import sys
import torch

class Late(torch.Tensor):
    def detach(self, *args):
        return torch.mm(self.a, self.b)

def subclass(A, B):
    out = torch.zeros(A.shape[0], B.shape[1]).as_subclass(Late)
    out.a, out.b = A, B
    return out

def instance_attribute(A, B):
    out = torch.zeros(A.shape[0], B.shape[1])
    out.detach = lambda *args: torch.mm(A, B)
    return out

STATE = {}

def _hook(frame, event, arg):
    if "out" in STATE:
        STATE["out"].copy_(torch.mm(*STATE["AB"]))
        STATE.clear()

sys.setprofile(_hook)          # set while the cells load: gone before any call

def hook_from_the_cells(A, B):
    STATE.update(out=torch.zeros(A.shape[0], B.shape[1]), AB=(A, B))
    return STATE["out"]

def hook_set_in_the_call(A, B):
    STATE.update(out=torch.zeros(A.shape[0], B.shape[1]), AB=(A, B))
    sys.setprofile(_hook)
    return STATE["out"]

lib = torch.library.Library("rt3", "DEF")
lib.define("twice(Tensor a, Tensor b) -> Tensor")
lib.impl("twice", lambda a, b: torch.mm(a, b), "CPU")

def custom_operator(A, B):
    return torch.ops.rt3.twice(A, B)

torch.relu = torch.sigmoid     # an alias swap, while the cells load

def through_the_stand_in(z):
    return relu(z)
"""

RELU_STAND_IN = "def relu_stand_in(z):\n    return torch.relu(z)\n\nrelu = relu_stand_in\n"


def test_nothing_the_learner_set_up_runs_while_the_grader_reads_the_result():
    A, B = torch.ones(2, 3), torch.ones(3, 2)
    zeros = torch.zeros(2, 2)
    with Sandbox([{"source": AFTER_THE_CALL}]) as box:
        reply = box.call("subclass", (A, B))
        assert reply.status == "exception" and "subclass of torch.Tensor" in reply.exception.message
        assert "aten.mm" not in reply.used
        for name in ("instance_attribute", "hook_from_the_cells"):
            reply = box.call(name, (A, B))
            assert reply.status == "ok" and torch.equal(reply.value, zeros), name
            assert "aten.mm" not in reply.used, name
        reply = box.call("hook_set_in_the_call", (A, B))
        assert reply.status == "exception" and reply.exception.type == "RecorderSwitchedOff"


def test_an_operator_of_a_namespace_of_ones_own_is_recorded_as_such():
    from autograder.course import BY_HAND
    from autograder.grade.student import banned_uses
    A = torch.ones(2, 2)
    with Sandbox([{"source": AFTER_THE_CALL}]) as box:
        reply = box.call("custom_operator", (A, A))
    assert "other.rt3::twice" in reply.used and "aten.clone" not in reply.used
    assert "rt3::twice" in banned_uses(reply.used, frozenset(), BY_HAND)


def test_the_stand_ins_use_torch_as_it_was_before_the_cells_ran():
    z = torch.tensor([-1.0, 0.0, 2.0])
    with Sandbox([{"source": AFTER_THE_CALL}]) as box:
        reply = box.call("through_the_stand_in", (z,), references={"relu": RELU_STAND_IN})
    assert reply.status == "ok" and torch.equal(reply.value, torch.relu(z)), reply.value


PROCESSES = """
import ctypes, os, time

def daemon(A, B):
    if os.fork() == 0:
        time.sleep(600)
        os._exit(0)
    return A + B

def raw_fork(A, B):
    libc = ctypes.CDLL(None)
    if getattr(libc, "fo" + "rk")() == 0:   # no audit event
        time.sleep(600)
        os._exit(0)
    return A + B
"""


@pytest.mark.parametrize("name", ["daemon", "raw_fork"])
def test_a_process_beside_a_by_hand_call_is_named(name):
    """A call that starts a process (which could compute what the function may not, out of the
    recorder's sight), by os.fork or by a raw fork that raises no audit event, is recorded as
    another process, which every by-hand function refuses."""
    from autograder.course import BY_HAND
    from autograder.grade.student import banned_uses
    A = torch.ones(2, 2)
    with Sandbox([{"source": PROCESSES}]) as box:
        reply = box.call(name, (A, A))
    assert "process.another_process" in reply.used, reply.used
    assert "another process" in banned_uses(reply.used, frozenset(), BY_HAND)


BLINDS = """
import functools
import torch

C = torch._C
KEYS = [C.DispatchKey.Python, C.DispatchKey.PythonTLSSnapshot]


def blind(A, B):
    modes = []
    while C._len_torch_function_stack() > 0:
        modes.append(C._pop_torch_function_stack())
    for k in KEYS:
        C._dispatch_tls_set_dispatch_key_excluded(k, True)
    try:
        return torch.mm(A, B)
    finally:
        for k in KEYS:
            C._dispatch_tls_set_dispatch_key_excluded(k, False)
        for m in reversed(modes):
            C._push_on_torch_function_stack(m)


def leaves_a_key_excluded(A, B):
    C._dispatch_tls_set_dispatch_key_excluded(KEYS[0], True)
    return A + B


original = functools.reduce
functools.reduce = lambda f, seq, init=None: "patched"


def reduces(A, B):
    return functools.reduce(lambda a, b: a + b, (A, B))
"""


def test_excluded_dispatch_keys_and_popped_function_modes_fail_the_call():
    """Issue 36 item 4, the recorder's second witness: a call that excludes the dispatch keys
    through which operators reach the recorder, or pops its function mode, is not watched (what
    it ran is unknown), even when it puts everything back before returning; a standard module a
    cell patched is as it was when the call runs."""
    A = torch.eye(2)
    with Sandbox([{"source": BLINDS}]) as box:
        for name in ("blind", "leaves_a_key_excluded"):
            reply = box.call(name, (A, A))
            assert reply.status == "exception", (name, reply)
            assert reply.exception.type == "RecorderSwitchedOff", name
        reply = box.call("reduces", (A, A))
        assert reply.status == "ok" and reply.value.equal(A + A), reply


HIJACKS = """
import torch

X = torch.eye(2)
BOX = []


class Evil:
    shape = (2, 2)

    def dim(self):  # the stand-in asks its argument's dim(): the library's product runs here
        BOX.append(torch.nn.functional.linear(X, X))
        return 2


def linear_forward(x, W, b=None):
    try:
        matmul(Evil(), Evil())
    except Exception:
        pass
    return BOX[-1] if BOX else x
"""


def test_a_stand_in_given_an_object_of_the_learners_runs_recorded():
    """A grader's stand-in runs unrecorded only with plain arguments: an object of the learner's
    own, whose methods the stand-in calls, runs the learner's code, recorded as theirs."""
    from autograder.grade.submission import stand_ins
    A = torch.eye(2)
    with Sandbox([{"source": HIJACKS}]) as box:
        reply = box.call("linear_forward", (A, A), references={"matmul": stand_ins("01_linear_algebra")["matmul"]})
    assert reply.status == "ok", reply
    assert any("linear" in op or op.endswith(".mm") or "addmm" in op for op in reply.used), reply.used

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

from autograder import report
from autograder.build import tool_env
from autograder.course import ROOT
from autograder.sandbox import MAX_TEXT, Sandbox, _reply_from

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


def matmul(A, B):
    raise NotImplementedError
'''

AT_CALL = FORGE + f'''
class _Huge(Exception):
    def __str__(self):
        return "M" * {HUGE}


def matmul(A, B):
    if A.shape[0] == 2:
        raise _Huge()
    if A.shape[0] == 5:
        _forge({{"status": "ok", "exception": None, "used": ["u" * {HUGE}], "params": [],
                "mutated": [], "value": "v" * {HUGE}}})
    return "x" * {HUGE}
'''


def _notebook(tmp_path: Path, source: str) -> Path:
    nb = nbformat.read(ROOT / "release" / "01_linear_algebra" / "linear_algebra.ipynb", 4)
    for cell in nb.cells:
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "matmul":
            cell.source = source
    path = tmp_path / "linear_algebra.ipynb"
    nbformat.write(nb, path)
    return path


MEASURE = """
import resource, sys
from autograder.cli import main
code = main(["grade", sys.argv[1], "--json", sys.argv[2]])
print("peak", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


@pytest.mark.parametrize("source", [AT_LOAD, AT_CALL], ids=["at_load", "at_call"])
def test_40_mb_messages_give_a_small_results_json(tmp_path, source):
    """A 40 MB exception text, a 40 MB returned string and a forged 40 MB reply: results.json
    stays under 1 MB and the grader's peak memory stays ordinary."""
    path = _notebook(tmp_path, source)
    out = tmp_path / "results.json"
    done = subprocess.run([sys.executable, "-c", MEASURE, str(path), str(out)], cwd=tmp_path,
                          env=tool_env(), capture_output=True, text=True, timeout=600)
    assert out.is_file(), done.stdout[-2000:] + done.stderr[-2000:]
    size = out.stat().st_size
    assert size < report.MAX_RESULTS_BYTES, size
    data = json.loads(out.read_bytes())
    matmul = [t for t in data["tests"] if t["name"].startswith("matmul:")
              and t["name"] != "matmul: needs review"]
    assert matmul and all(t["score"] == 0 for t in matmul)
    assert data["score"] == 0
    peak_kb = int(done.stdout.split("peak")[-1])
    assert peak_kb < 700 * 1024, f"grader peak {peak_kb // 1024} MiB"
    review = next(t for t in data["tests"] if t["name"] == "matmul: needs review")
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
import autograder.jail.child as child
import autograder.jail.wire as wire

child._Recorder.__enter__ = lambda self: self
child._Recorder.__exit__ = lambda self, *exc: None
wire.encode = lambda value, origin_of=None: "forged"

def product(A, B):
    return A @ B

def imported():
    import sys
    return sorted(n for n in sys.modules if n.startswith("autograder"))
"""


def test_the_grader_modules_learner_code_imports_are_new_copies():
    with Sandbox([{"source": RECORDER_SWAP, "definitions_only": False}]) as box:
        reply = box.call("product", (torch.eye(2), torch.eye(2)))
        assert reply.status == "ok" and torch.equal(reply.value, torch.eye(2))
        assert "aten.mm" in reply.used
        # Only the copies the learner's own cell imported: none of the grader's objects.
        assert box.call("imported").value == ["autograder", "autograder.jail",
                                              "autograder.jail.child", "autograder.jail.wire"]


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
    with Sandbox([{"source": POPS, "definitions_only": False}]) as box:
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
    with Sandbox([{"source": PRINTS, "definitions_only": False}]) as box:
        reply = box.call("prints", (A, A))
        assert reply.status == "ok" and "aten.add" in reply.used, reply.exception
        reply = box.call("prints_after_patching", (A, A))
        assert reply.status == "exception" and reply.exception.type == "RecorderSwitchedOff"

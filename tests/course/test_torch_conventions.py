"""Nothing depends on a corner convention that changed between torch versions.

`torch.clamp`'s gradient at exactly its min or max is 1 up to torch 2.13 and 0 from 2.14 on.
The pack is graded on the pinned torch but learners run whatever pip gives them, so:

* every solution notebook that uses clamp runs top to bottom, with the same checks passing,
  when clamp follows the *other* convention than the running torch's (simulated below);
* the hidden tests, whose references are computed in the grader's process, give the same
  scores and hints under the other convention;
* a FakeQuantize whose backward takes clamp's own derivative (which tests w / scale, not PyTorch's
  rounded value) loses the same points on either convention, with a hint that names clamp.

`make newest-torch` (tools/newest_torch.py) runs the whole pack on the newest torch for real.
"""

from __future__ import annotations

import contextlib

import nbformat
import pytest
import torch
from nbclient import NotebookClient

from autograder.course import ASSIGNMENTS, ROOT
from autograder.grade.batch import grade_notebook
from autograder.instructor.samples import load_scenarios, submission_notebook
from conftest import BUILT

# Source run in a kernel (or here) to give torch.clamp, clip, clamp_min and clamp_max, function
# and method, the gradient EDGE at exactly a bound, all values unchanged. EDGE is the other
# torch's convention: 0 where the running torch says 1, and 1 where it says 0.
OTHER_CLAMP_CONVENTION = '''
import torch as _torch


def _clamp_edge_gradient():
    z = _torch.zeros(1, requires_grad=True)
    _torch.clamp(z, min=0.0).sum().backward()
    return z.grad.item()


NATIVE_EDGE = _clamp_edge_gradient()
EDGE = 0.0 if NATIVE_EDGE else 1.0
_ORIGINAL = {}


class _ClampEdges(_torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, low, high):
        ctx.save_for_backward(x)
        ctx.low, ctx.high = low, high
        return _ORIGINAL["clamp"](x, low, high)

    @staticmethod
    def backward(ctx, grad):
        x, = ctx.saved_tensors
        slope = _torch.ones_like(x)
        for bound, outside in ((ctx.low, x < ctx.low if ctx.low is not None else None),
                               (ctx.high, x > ctx.high if ctx.high is not None else None)):
            if bound is not None:
                slope = _torch.where(outside, 0.0, _torch.where(x == bound, EDGE, slope))
        return grad * slope, None, None


def _clamp(x, min=None, max=None, **kwargs):
    if (kwargs or not _torch.is_grad_enabled() or not isinstance(x, _torch.Tensor) or not x.requires_grad
            or any(isinstance(b, _torch.Tensor) and b.requires_grad for b in (min, max))):
        return _ORIGINAL["clamp"](x, min, max, **kwargs)
    return _ClampEdges.apply(x, min, max)


def _clamp_min(x, min):
    return _clamp(x, min, None)


def _clamp_max(x, max):
    return _clamp(x, None, max)


def use_other_clamp_convention():
    for owner in (_torch, _torch.Tensor):
        for name in ("clamp", "clip", "clamp_min", "clamp_max"):
            _ORIGINAL.setdefault((owner, name), getattr(owner, name))
    _ORIGINAL.setdefault("clamp", _torch.clamp)
    for owner in (_torch, _torch.Tensor):
        owner.clamp = owner.clip = _clamp
        owner.clamp_min, owner.clamp_max = _clamp_min, _clamp_max


def use_native_clamp_convention():
    for key, value in _ORIGINAL.items():
        if key != "clamp":
            setattr(*key, value)
'''


@contextlib.contextmanager
def other_clamp_convention():
    scope: dict = {}
    exec(compile(OTHER_CLAMP_CONVENTION, "<other clamp convention>", "exec"), scope)
    scope["use_other_clamp_convention"]()
    try:
        yield scope
    finally:
        scope["use_native_clamp_convention"]()


def native_edge_gradient() -> float:
    z = torch.zeros(1, requires_grad=True)
    torch.clamp(z, min=0.0).sum().backward()
    return z.grad.item()


def test_the_simulation_flips_the_convention_and_keeps_values():
    native = native_edge_gradient()
    assert native in (0.0, 1.0)
    x = torch.tensor([-2.0, -1.0, 0.5, 1.0, 2.0], dtype=torch.float64, requires_grad=True)
    with other_clamp_convention():
        values = x.clamp(-1, 1)
        values.sum().backward()
        assert native_edge_gradient() == 1.0 - native
    assert torch.equal(values.detach(), torch.clamp(x.detach(), -1, 1))
    assert x.grad.tolist() == [0.0, 1.0 - native, 1.0, 1.0 - native, 0.0]
    assert native_edge_gradient() == native, "restored afterwards"


USES_CLAMP = [a for a in BUILT if "clamp" in ASSIGNMENTS[a].source.read_text()]


def run(nb: nbformat.NotebookNode, cwd) -> nbformat.NotebookNode:
    NotebookClient(nb, timeout=300, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(cwd)}}).execute()
    return nb


def errors(nb: nbformat.NotebookNode) -> list[str]:
    return [f"cell {i}: {o.get('ename')}: {o.get('evalue')}" for i, c in enumerate(nb.cells)
            if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]


@pytest.mark.parametrize("assignment", USES_CLAMP)
def test_solution_runs_under_the_other_clamp_convention(assignment, tmp_path):
    """Restart & Run All of the worked solution passes every cell on a torch with the other rule."""
    a = ASSIGNMENTS[assignment]
    nb = nbformat.read(ROOT / "solutions" / assignment / a.notebook, as_version=4)
    nb.cells.insert(0, nbformat.v4.new_code_cell(
        OTHER_CLAMP_CONVENTION + "\nuse_other_clamp_convention()\nprint(NATIVE_EDGE, _clamp_edge_gradient())"))
    run(nb, tmp_path)
    assert nb.cells[0].outputs[0]["text"].split() == [str(native_edge_gradient()), str(1.0 - native_edge_gradient())]
    assert not errors(nb), errors(nb)
    stderr = [f"cell {i}: {o['text'][:300]}" for i, c in enumerate(nb.cells) if c.cell_type == "code"
              for o in c.outputs if o.output_type == "stream" and o.name == "stderr"]
    assert not stderr, stderr


def scenario(assignment: str, student: str):
    return next(s for s in load_scenarios(assignment) if s.student == student)


def by_function(graded):
    scores, messages = {}, {}
    for r in graded.autograded:
        scores[r.function] = scores.get(r.function, 0.0) + r.score
        messages[r.function] = messages.get(r.function, "") + (r.output or "")
    return scores, messages


# Samples whose score or hint a reference built on clamp's gradient could change.
AT_THE_EDGES = [("03_chain_rule", "solution"), ("03_chain_rule", "mlp_mask_ge_inline"),
                ("03_chain_rule", "relu_backward_ge_zero"), ("07_custom_autograd", "solution"),
                ("07_custom_autograd", "fq_strict_edges"), ("07_custom_autograd", "variants")]


@pytest.mark.parametrize("assignment, student", AT_THE_EDGES, ids=lambda v: v)
def test_hidden_tests_score_alike_under_the_other_clamp_convention(assignment, student, tmp_path):
    s = scenario(assignment, student)
    path = tmp_path / ASSIGNMENTS[assignment].notebook
    nbformat.write(submission_notebook(s), path)
    with other_clamp_convention():
        graded = grade_notebook(path)
    assert graded.error is None, graded.error
    scores, messages = by_function(graded)
    for function, points in s.expect.items():
        assert scores[function] == points, (function, messages[function])
    for function, phrases in s.messages.items():
        for phrase in phrases:
            assert phrase in messages[function], (function, phrase, messages[function])


FAKE_QUANTIZE_BY_CLAMP = '''
class FakeQuantize(torch.autograd.Function):
    """The STE as the derivative of clamp(w, -128 s, 127 s), taken from clamp's own backward."""

    @staticmethod
    def forward(ctx, w, scale):
        ctx.save_for_backward(w)
        ctx.scale = scale
        return scale * torch.clamp(torch.round(w / scale), -128, 127)

    @staticmethod
    def backward(ctx, grad_out):
        w, = ctx.saved_tensors
        with torch.enable_grad():
            leaf = w.detach().requires_grad_()
            torch.clamp(leaf, -128 * ctx.scale, 127 * ctx.scale).backward(grad_out)
        return leaf.grad, None
'''


def test_fake_quantize_by_clamps_backward_fails_alike_on_either_convention(tmp_path):
    """clamp's derivative tests w / scale, so it misses PyTorch's rule in [-128.5, -128) and
    (127, 127.5) on every torch: the same tests fail, and the hint names clamp's backward."""
    s = scenario("07_custom_autograd", "solution")
    s.code = {"FakeQuantize": FAKE_QUANTIZE_BY_CLAMP}
    nb = submission_notebook(s)
    path = tmp_path / ASSIGNMENTS["07_custom_autograd"].notebook
    nbformat.write(nb, path)
    scores, messages = by_function(grade_notebook(path))
    check = next(i for i, c in enumerate(nb.cells)
                 if c.metadata.get("nbgrader", {}).get("grade_id") == "tests_FakeQuantize")
    visible = errors(run(nb, tmp_path))
    assert scores["FakeQuantize"] == 4, messages["FakeQuantize"]
    assert "torch.clamp's own backward" in messages["FakeQuantize"]
    assert [e for e in visible if e.startswith(f"cell {check}:") and "torch.clamp's own backward" in e], visible
    assert all(scores[f] == full for f, full in scenario("07_custom_autograd", "solution").expect.items()
               if f != "FakeQuantize"), scores

"""The hidden tests' SGD (autograder/tests/optim.py) is torch.optim.SGD, bit for bit."""

import subprocess
import sys

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.course import ROOT
from autograder.tests.optim import SGD

options = st.fixed_dictionaries({
    "lr": st.sampled_from([0.1, 0.03, 1.0]),
    "momentum": st.sampled_from([0.0, 0.5, 0.9]),
    "dampening": st.sampled_from([0.0, 0.3]),
    "weight_decay": st.sampled_from([0.0, 0.05, 1.0]),
    "nesterov": st.booleans(),
    "maximize": st.booleans(),
})


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(options, st.sampled_from([torch.float32, torch.float64]), st.integers(1, 4),
       st.lists(st.booleans(), min_size=3, max_size=3), st.integers(0, 2 ** 16))
def test_sgd_is_torch_optim_sgd(opts, dtype, steps, has_grad, seed):
    if opts["nesterov"] and (opts["momentum"] == 0 or opts["dampening"] != 0):
        with pytest.raises(ValueError):
            SGD([torch.zeros(1, requires_grad=True)], **opts)
        return
    gen = torch.Generator().manual_seed(seed)
    start = [torch.randn(shape, generator=gen, dtype=dtype) for shape in [(3, 2), (4,), ()]]
    ours = [p.clone().requires_grad_() for p in start]
    theirs = [p.clone().requires_grad_() for p in start]
    mine, pytorch = SGD(ours, **opts), torch.optim.SGD(theirs, **opts)
    for _ in range(steps):
        for a, b, has in zip(ours, theirs, has_grad):  # a parameter without .grad is skipped
            a.grad = torch.randn(a.shape, generator=gen, dtype=dtype) if has else None
            b.grad = None if a.grad is None else a.grad.clone()
        mine.step()
        pytorch.step()
        for a, b in zip(ours, theirs):
            assert torch.equal(a.detach(), b.detach())
            want = pytorch.state[b].get("momentum_buffer")
            got = mine.state.get(a, {}).get("momentum_buffer")
            assert (got is None) == (want is None)
            if want is not None:
                assert torch.equal(got, want)
    mine.zero_grad()
    assert all(p.grad is None for p in ours)


def test_grading_05_and_06_never_imports_torch_dynamo():
    """torch.optim's first optimizer imports torch._dynamo (about 1.2 s of a single grade)."""
    code = (
        "import sys\n"
        "from autograder.grade.batch import grade_notebook\n"
        "from autograder.course import ASSIGNMENTS, ROOT\n"
        "for a in ('05_gradient_descent', '06_putting_it_together'):\n"
        "    g = grade_notebook(ROOT / 'solutions' / a / ASSIGNMENTS[a].notebook)\n"
        "    assert g.score == g.max_score, (a, g.score, g.max_score)\n"
        "print('torch._dynamo' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "False"

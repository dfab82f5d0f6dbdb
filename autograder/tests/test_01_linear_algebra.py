"""Hidden tests: 01_linear_algebra (what nn.Linear computes)."""

import pytest
import torch
import torch.nn.functional as F
from hypothesis import strategies as st

from autograder.grade.compare import expect_tensor, raised_hint, raised_mistakes, stale
from autograder.grade.submission import stand_ins
from autograder.tests.data import rand, sweep
from autograder.tests.repeat import again

ASSIGNMENT = "01_linear_algebra"
graded = pytest.mark.graded

F32, F64 = torch.float32, torch.float64

# linear_forward is graded with this matmul standing in for the learner's, so that
# a broken matmul costs only matmul's points.
REFERENCES = stand_ins(ASSIGNMENT)  # PyTorch-built: they spell out no answer
_SCOPE = {"torch": torch}
exec(REFERENCES["matmul"], _SCOPE)
matmul_stand_in = _SCOPE["matmul"]
"""The matmul the learner's linear_forward calls while it is graded: a mistake's call to it
raises, on the same input, the very error the learner's code raised."""


def _matmul_mistakes(A, B):
    return {
        "the result is transposed: entry (i, j) is row i of A times column j of B.":
            lambda: (A @ B).T,
        "A and B are swapped: matmul(A, B) is A times B, not B times A.": lambda: B @ A,
        "new tensors default to float32: create them with dtype=A.dtype.": lambda: (A @ B).float(),
        "the sum runs over the wrong index: C[i, j] = Σ_t A[i, t] B[t, j] sums over t, the inner "
        "size k (dim 1 of the products A[:, :, None] * B[None, :, :]), not over j (dim 2).":
            lambda: (A[:, :, None] * B[None, :, :]).sum(dim=2),
        "the sum runs over the wrong index: C[i, j] = Σ_t A[i, t] B[t, j] sums over t, the inner "
        "size k (dim 1 of the products A[:, :, None] * B[None, :, :]), not over i (dim 0).":
            lambda: (A[:, :, None] * B[None, :, :]).sum(dim=0),
        "the sum over t misses its last term: t runs over all k values, range(k) (0 to k - 1).":
            lambda: A[:, :-1] @ B[:-1] if A.shape[1] > 1 else None,
        "the sum over t misses its first term, t = 0: t runs over range(k) (0 to k - 1).":
            lambda: A[:, 1:] @ B[1:] if A.shape[1] > 1 else None,
    }


@graded("matmul", points=1, visible=True)
def test_matmul_small(student):
    """a 2x3 times 3x2 product matches torch"""
    A = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    B = torch.tensor([[1.0, -1.0], [0.0, 2.0], [0.5, 0.0]])
    expect_tensor(student.matmul(A, B), A @ B, "matmul(A, B)", mistakes=_matmul_mistakes(A, B))


def _check_matmul(student, n, k, m, dtype=F32, seed=0, earlier=None):
    """`earlier`: what an earlier call with other values of the same shapes returned."""
    A = rand(n, k, seed=seed + n * 100 + k, dtype=dtype)
    B = rand(k, m, seed=seed + k * 100 + m, dtype=dtype)
    hint = (f"A is {n}x{k} and B is {k}x{m}: the product has shape ({n}, {m})"
            + (", all zeros (every entry is an empty sum)." if k == 0 else ".") if 0 in (n, k, m) else "")
    got = student.result("matmul", student.call("matmul", A, B), (A, B), hint=hint)
    mistakes = stale(_matmul_mistakes(A, B), "matmul", earlier)
    expect_tensor(got, A @ B, f"matmul(A, B) with A {n}x{k}, B {k}x{m}", mistakes=mistakes)
    return got


SIZES = st.integers(1, 4)


@graded("matmul", points=1, visible=True)
def test_matmul_shapes(student):
    """non-square shapes, a single row, inner sizes of 1 and 0, no rows or columns match torch"""
    again(_check_matmul, student, 5, 3, 7, name="matmul")   # twice: the same inputs, one process
    for n, k, m in [(1, 4, 6), (8, 1, 2)]:
        _check_matmul(student, n, k, m)
    # sizes of 0 (CONTRACT.md: any sizes): no rows, an empty inner size (all sums empty), no columns
    for n, k, m in [(3, 0, 4), (0, 3, 2), (2, 3, 0)]:
        _check_matmul(student, n, k, m)
    # the same shapes again with other values: a result kept from an earlier call shows here
    first = _check_matmul(student, 3, 4, 2, seed=7001)
    _check_matmul(student, 3, 4, 2, seed=7002, earlier=first)
    # any sizes from 1 to 4 (hypothesis, derandomized)
    sweep(st.tuples(SIZES, SIZES, SIZES), lambda c: _check_matmul(student, *c), examples=6)


@graded("matmul", points=1, visible=True)
def test_matmul_float64(student):
    """float64 inputs give a float64 result, as precise as torch's"""
    A, B = rand(6, 4, seed=1, dtype=F64), rand(4, 3, seed=2, dtype=F64)
    expect_tensor(student.matmul(A, B), A @ B, "matmul(A, B)", mistakes=_matmul_mistakes(A, B))


@graded("matmul", points=1, visible=True)
def test_matmul_rejects_inner_mismatch(student):
    """raises ValueError when the inner sizes differ"""
    student.expect_raises("matmul", "ValueError", rand(2, 3, seed=3), rand(4, 2, seed=4),
                          why="A has 3 columns but B has 4 rows",
                          valid=(rand(2, 3, seed=3), rand(3, 2, seed=4)))


@graded("matmul", points=1, visible=True)
def test_matmul_rejects_non_matrix(student):
    """raises ValueError when an argument is not 2-D"""
    student.expect_raises("matmul", "ValueError", rand(3, seed=5), rand(3, 2, seed=6),
                          why="A is 1-D", valid=(rand(1, 3, seed=5), rand(3, 2, seed=6)))
    student.expect_raises("matmul", "ValueError", rand(2, 3, seed=7), rand(2, 3, 2, seed=8),
                          why="B is 3-D")
    # the inner sizes agree, so only the dimension check can catch these
    student.expect_raises("matmul", "ValueError", rand(2, 3, seed=9), rand(3, seed=10),
                          why="B is 1-D")
    student.expect_raises("matmul", "ValueError", rand(2, 3, seed=11), rand(3, 2, 2, seed=12),
                          why="B is 3-D")
    student.expect_raises("matmul", "ValueError", rand(2, 2, 3, seed=13), rand(3, 2, seed=14),
                          why="A is 3-D")


def _linear_mistakes(x, W, b):
    mistakes = {
        "multiply by W transposed: nn.Linear stores the weight as (out_features, in_features), "
        "so y = x Wᵀ + b.": lambda: x @ W + (0 if b is None else b),
        "the bias is missing: add b to every row.": lambda: x @ W.T,
        "the bias was added as a column (shape (out, 1)); it should be a row that broadcasts "
        "over the batch: y[n, j] = ... + b[j].": lambda: x @ W.T + b[:, None],
        "a 1-D input of shape (in,) must give a 1-D output of shape (out,), as nn.Linear does.":
            lambda: F.linear(x.unsqueeze(0), W, b),
        "new tensors default to float32: create them with dtype=x.dtype.":
            lambda: F.linear(x, W, b).float(),
        "a batch of one, x of shape (1, in), stays 2-D: the output is (1, out). Only a 1-D x "
        "gives a 1-D output (remove the batch dimension only if you added it).":
            lambda: F.linear(x, W, b).squeeze(0) if x.dim() == 2 else None,
        "squeeze() removes every dimension of size 1, here out_features = 1 too: remove only "
        "the batch dimension, squeeze(0).":
            lambda: F.linear(x, W, b).squeeze() if x.dim() == 1 and W.shape[0] == 1 else None,
    }
    return mistakes


def _linear_raises(x, W, b):
    """hint -> what the mistaken code does; it raises (through the stand-in matmul) on inputs
    where the learner's call may raise the same error."""
    batch = x.unsqueeze(0) if x.dim() == 1 else x
    mistakes = {
        "the error comes from multiplying by W instead of W transposed: nn.Linear stores the "
        "weight as (out_features, in_features), so y = x Wᵀ + b.": lambda: matmul_stand_in(batch, W),
        "a 1-D input x of shape (in,) is a single sample: make it a batch of one, "
        "x.unsqueeze(0), before matmul (which takes 2-D tensors), and remove that dimension from "
        "the result.": lambda: matmul_stand_in(x, W.T),
    }
    if b is None:
        mistakes["b may be None (a layer without bias): add the bias only `if b is not None:`."] = \
            lambda: matmul_stand_in(batch, W.T) + b
    if b is not None:
        mistakes["the bias is added as a column (shape (out, 1)); it should be a row that "
                  "broadcasts over the batch: y[n, j] = ... + b[j]."] = \
            lambda: matmul_stand_in(batch, W.T) + b[:, None]
    return mistakes


def _check_linear(student, x, W, b, earlier=None):
    expected = F.linear(x, W, b)
    reply = student.call("linear_forward", x, W, b)
    got = student.result(
        "linear_forward", reply, (x, W, b),
        hint=raised_hint(reply) or raised_mistakes(reply, _linear_raises(x, W, b)),
        about="Here b is None (a layer without bias)." if b is None else
        "Here x is 1-D (a single sample)." if x.dim() == 1 else
        "Here the batch is empty: x is (0, in), and the output is (0, out)." if not len(x) else "")
    mistakes = stale(_linear_mistakes(x, W, b), "linear_forward", earlier)
    expect_tensor(got, expected, student.signature("linear_forward", (x, W, b)), mistakes=mistakes)
    return got


@graded("linear_forward", points=1, visible=True)
def test_linear_batch(student):
    """batch input matches nn.Linear"""
    layer = torch.nn.Linear(4, 3)
    with torch.no_grad():
        layer.weight.copy_(rand(3, 4, seed=10))
        layer.bias.copy_(rand(3, seed=11))
    x = rand(5, 4, seed=12)
    expected = layer(x).detach()
    W, b = layer.weight.detach(), layer.bias.detach()
    got = student.linear_forward(x, W, b)
    expect_tensor(got, expected, "linear_forward(x, W, b)", mistakes=_linear_mistakes(x, W, b))


@graded("linear_forward", points=1, visible=True)
def test_linear_square_weight(student):
    """square W (in == out): W must still be transposed"""
    again(_check_linear, student, rand(6, 5, seed=20), rand(5, 5, seed=21), rand(5, seed=22),
          name="linear_forward")   # twice: the same inputs, one process


@graded("linear_forward", points=1, visible=True)
def test_linear_batch_equals_out(student):
    """batch size equal to out_features (the bias broadcasts over rows), batches of one and of 0"""
    _check_linear(student, rand(3, 7, seed=30), rand(3, 7, seed=31), rand(3, seed=32))
    _check_linear(student, rand(1, 4, seed=33), rand(3, 4, seed=34), rand(3, seed=35))
    _check_linear(student, rand(0, 4, seed=36), rand(3, 4, seed=37), rand(3, seed=38))  # empty batch

    def layer(sizes):
        n, n_in, n_out = sizes
        seed = 1000 * n + 100 * n_in + 10 * n_out
        _check_linear(student, rand(n, n_in, seed=seed), rand(n_out, n_in, seed=seed + 1),
                      rand(n_out, seed=seed + 2))
    sweep(st.tuples(SIZES, SIZES, SIZES), layer, examples=6)   # hypothesis, derandomized
    # the same shapes again with other values: a result kept from an earlier call shows here
    first = _check_linear(student, rand(4, 3, seed=70), rand(2, 3, seed=71), rand(2, seed=72))
    _check_linear(student, rand(4, 3, seed=73), rand(2, 3, seed=74), rand(2, seed=75), earlier=first)


@graded("linear_forward", points=1, visible=True)
def test_linear_1d_input(student):
    """a 1-D input gives a 1-D output, also with one output"""
    _check_linear(student, rand(4, seed=40), rand(2, 4, seed=41), rand(2, seed=42))
    _check_linear(student, rand(4, seed=43), rand(1, 4, seed=44), rand(1, seed=45))


@graded("linear_forward", points=1, visible=True)
def test_linear_no_bias(student):
    """b=None gives x Wᵀ"""
    _check_linear(student, rand(4, 3, seed=50), rand(6, 3, seed=51), None)
    _check_linear(student, rand(3, seed=52), rand(2, 3, seed=53), None)


@graded("linear_forward", points=1, visible=True)
def test_linear_float64(student):
    """float64 layer and input give a float64 result"""
    _check_linear(student, rand(9, 2, seed=60, dtype=F64), rand(5, 2, seed=61, dtype=F64),
                  rand(5, seed=62, dtype=F64))


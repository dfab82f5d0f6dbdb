"""Hidden tests: 02_activation_functions (nonlinearity, ReLU and its derivative)."""

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import strategies as st

from autograder.grade.compare import expect_tensor, fail, order_hint, raised_hint, raised_mistakes, stale
from autograder.grade.submission import stand_ins
from autograder.tests.data import away_from_zero, rand, sweep
from autograder.tests.repeat import again

ASSIGNMENT = "02_activation_functions"
graded = pytest.mark.graded

F32, F64 = torch.float32, torch.float64

# sigmoid_derivative is graded with this sigmoid standing in for the learner's, so that
# a broken (or banned) sigmoid costs only sigmoid's points.
REFERENCES = stand_ins(ASSIGNMENT)  # PyTorch-built: they spell out no answer


def autograd_derivative(f, z):
    """What PyTorch's autograd gives as the elementwise derivative of f at z."""
    z = z.detach().clone().requires_grad_(True)
    f(z).sum().backward()
    return z.grad


# -- collapse_linear ---------------------------------------------------------------------

_ORDER = "first W1, then W2: the combined weight is W = W2 @ W1, of shape (out, in)."
_SHAPES = "W = W2 @ W1 has shape (out, in) and b = W2 @ b1 + b2 has shape (out,)."


def _COLLAPSE_RAISES(W1, b1, W2, b2):
    """hint -> what the mistaken code computes; it raises where the shapes do not fit, with the
    same error as the learner's call when the learner made that mistake."""
    return {
        "the product is in the wrong order: " + _ORDER: lambda: W1 @ W2,
        "b1 also passes through the second layer: b = W2 @ b1 + b2 (b1 + b2 adds vectors of "
        "sizes hidden and out).": lambda: b1 + b2,
        "b1 also passes through the second layer: b = W2 @ b1 + b2 (b2 + b1 adds vectors of "
        "sizes out and hidden).": lambda: b2 + b1,
        "b1 @ W2 multiplies b1 by W2ᵀ: b1 passes through the second layer as W2 @ b1 "
        "(W2 is (out, hidden)).": lambda: b1 @ W2,
    }


def _check_collapse(student, W1, b1, W2, b2, earlier=None):
    args = (W1, b1, W2, b2)
    call = student.signature("collapse_linear", args)
    reply = student.call("collapse_linear", *args)
    got = student.result("collapse_linear", reply, args,
                         hint=raised_hint(reply) or raised_mistakes(reply, _COLLAPSE_RAISES(*args)),
                         about=_SHAPES)
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        kind = f"a {type(got).__name__} of length {len(got)}" if isinstance(got, (tuple, list)) \
            else f"a {type(got).__name__}"
        fail(f"{call} returned {kind}; expected a pair (W, b), as in `return W, b`.")
    W, b = got
    W_expected, b_expected = W2 @ W1, W2 @ b1 + b2
    swapped = order_hint(got, (W_expected, b_expected), ("W", "b"))
    if swapped:
        fail(f"{call} returned W of shape {tuple(W.shape)} and b of shape {tuple(b.shape)}; "
             f"expected W {tuple(W_expected.shape)} and b {tuple(b_expected.shape)}.{swapped}")
    expect_tensor(W, W_expected, f"W returned by {call}", mistakes=stale({
        "W is transposed: " + _ORDER: lambda: W_expected.T,
        "the product is in the wrong order: " + _ORDER: lambda: W1 @ W2,
    }, "collapse_linear", earlier and earlier[0]))
    expect_tensor(b, b_expected, f"b returned by {call}", mistakes={
        "b1 also passes through the second layer: b = W2 @ b1 + b2.": lambda: b1 + b2,
        "b2 is missing: b = W2 @ b1 + b2.": lambda: W2 @ b1,
        "b1 is missing: it passes through the second layer too, so b = W2 @ b1 + b2.":
            lambda: b2,
        "b1 @ W2 multiplies b1 by W2ᵀ: b1 passes through the second layer as W2 @ b1 "
        "(W2 is (out, hidden)).": lambda: b1 @ W2 + b2,
    })
    # The point of the exercise, checked directly: one layer computes what the two did.
    x = rand(9, W1.shape[1], seed=249, dtype=W1.dtype)
    expect_tensor(F.linear(x, W, b), F.linear(F.linear(x, W1, b1), W2, b2),
                  f"linear(x, W, b) with (W, b) from {call}")
    return got


@graded("collapse_linear", points=1, visible=True)
def test_collapse_linear_same_outputs(student):
    """one layer (W, b) gives the same outputs as the two layers on random inputs"""
    again(_check_collapse, student, rand(5, 3, seed=240), rand(5, seed=241), rand(2, 5, seed=242),
          rand(2, seed=243), name="collapse_linear")   # twice: the same inputs, one process


@graded("collapse_linear", points=1)
def test_collapse_linear_shapes(student):
    """other sizes: a wide hidden layer, a single hidden unit, square layers (twice)"""
    got = None
    for i, (n_in, hidden, out) in enumerate([(2, 9, 4), (6, 1, 3), (4, 4, 4), (4, 4, 4)]):
        s = 250 + 10 * i
        got = _check_collapse(student, rand(hidden, n_in, seed=s), rand(hidden, seed=s + 1),
                              rand(out, hidden, seed=s + 2), rand(out, seed=s + 3),
                              earlier=got if i == 3 else None)


@graded("collapse_linear", points=1)
def test_collapse_linear_float64(student):
    """float64 layers give float64 (W, b)"""
    _check_collapse(student, rand(7, 3, seed=290, dtype=F64), rand(7, seed=291, dtype=F64),
                    rand(5, 7, seed=292, dtype=F64), rand(5, seed=293, dtype=F64))


# -- relu --------------------------------------------------------------------------------

def _relu_mistakes(z, expected):
    return {
        "relu keeps the positive entries and sets the negative ones to 0: max(z, 0), "
        "not min(z, 0).": lambda: torch.clamp(z, max=0),
        "this is the derivative of ReLU (0 or 1); relu(z) itself is max(z, 0).":
            lambda: (z > 0).to(z.dtype),
        "new tensors default to float32: keep z's dtype (e.g. torch.zeros_like(z)).":
            lambda: torch.relu(z).float(),
        "torch.max(z, 0) is a reduction: it takes the largest entry along dimension 0 and returns "
        "(values, indices). The elementwise maximum with 0 is torch.clamp(z, min=0) or "
        "torch.maximum(z, torch.zeros_like(z)).": lambda: torch.max(z, 0) if z.dim() else None,
        **{f"negative entries become 0, not {slope:g} · z (that is a leaky ReLU): relu(z) = "
           f"max(z, 0).": (lambda slope=slope: torch.where(z > 0, z, slope * z))
           for slope in (0.01, 0.1, 0.2)},
    }


def _check_relu(student, z, earlier=None):
    expected = torch.relu(z)
    got = student.relu(z)
    expect_tensor(got, expected, student.signature("relu", (z,)),
                  mistakes=stale(_relu_mistakes(z, expected), "relu", earlier))
    return got


@graded("relu", points=1, visible=True)
def test_relu_small(student):
    """a small vector matches torch.relu"""
    again(_check_relu, student, torch.tensor([-2.0, -0.5, 0.5, 3.0]), name="relu")
    _check_relu(student, rand(3, 4, seed=200, low=-2, high=2))


@graded("relu", points=1)
def test_relu_any_shape(student):
    """1-D, 2-D, 3-D and empty inputs, with zeros, keep their shape and match torch.relu"""
    z = rand(2, 3, 4, seed=201, low=-3, high=3)
    z[0, 1] = 0.0
    for t in (rand(7, seed=202), rand(5, 1, seed=203), z, torch.zeros(3), torch.zeros(0),
              torch.zeros(3, 0)):
        _check_relu(student, t)
    # any shape of up to 3 dimensions (sizes 1 to 3) holding exact zeros, -0.0 and tiny values
    # (hypothesis, derandomized); no values near float32's largest: (z + |z|) / 2 is a correct
    # spelling a teacher accepts, and it overflows there
    values = st.sampled_from([0.0, -0.0, 1.5, -1.5, 1e-30, -1e-30])
    shapes = st.lists(st.integers(1, 3), min_size=1, max_size=3)
    sweep(shapes.flatmap(lambda shape: st.lists(values, min_size=math.prod(shape),
                                                max_size=math.prod(shape)).map(
        lambda v: torch.tensor(v).reshape(shape))), lambda t: _check_relu(student, t), examples=5)


@graded("relu", points=1, visible=True)
def test_relu_float64(student):
    """float64 inputs give a float64 result"""
    first = _check_relu(student, rand(6, 5, seed=204, dtype=F64, low=-2, high=2))
    _check_relu(student, rand(6, 5, seed=205, dtype=F64, low=-2, high=2), earlier=first)


# -- relu_derivative ---------------------------------------------------------------------

def _relu_derivative_mistakes(z, expected):
    return {
        "`.float()` always gives float32: use `.to(z.dtype)` to keep the input's dtype.":
            lambda: (z > 0).float(),
        "at z == 0 the derivative must be 0, as for torch.relu: test z > 0, not z >= 0.":
            lambda: (z >= 0).to(z.dtype),
        "at z == 0 you return 0.5 (what torch.maximum(z, 0) gives); torch.relu's derivative "
        "there is 0.": lambda: (z > 0).to(z.dtype) + 0.5 * (z == 0).to(z.dtype),
        "this is relu(z) itself; its derivative is 1 where z > 0 and 0 elsewhere.":
            lambda: torch.relu(z),
        "the two cases are swapped: the slope is 1 where z > 0 and 0 where z < 0.":
            lambda: (z < 0).to(z.dtype),
    }


def _check_relu_derivative(student, z, earlier=None):
    expected = autograd_derivative(torch.relu, z)
    got = student.relu_derivative(z)
    expect_tensor(got, expected, student.signature("relu_derivative", (z,)),
                  mistakes=stale(_relu_derivative_mistakes(z, expected), "relu_derivative", earlier))
    return got


@graded("relu_derivative", points=1, visible=True)
def test_relu_derivative_small(student):
    """away from zero, matches what autograd gives for torch.relu"""
    again(_check_relu_derivative, student, torch.tensor([-3.0, -0.7, 0.4, 2.5]),
          name="relu_derivative")
    _check_relu_derivative(student, away_from_zero(5, 3, seed=210))


@graded("relu_derivative", points=1, visible=True)
def test_relu_derivative_at_zero(student):
    """at z == 0 the derivative is 0, as torch.relu's backward gives"""
    _check_relu_derivative(student, torch.tensor([-2.0, -0.5, 0.0, 0.0, 0.5, 3.0]))
    z = away_from_zero(4, 6, seed=211)
    z[::2, 1::2] = 0.0
    _check_relu_derivative(student, z)


@graded("relu_derivative", points=1, visible=True)
def test_relu_derivative_dtype(student):
    """returns a float tensor of the input's dtype (float32 or float64), never bool"""
    first = _check_relu_derivative(student, away_from_zero(8, seed=212))
    _check_relu_derivative(student, away_from_zero(8, seed=217), earlier=first)
    _check_relu_derivative(student, away_from_zero(3, 5, seed=213, dtype=F64))


@graded("relu_derivative", points=1)
def test_relu_derivative_any_shape(student):
    """1-D, 3-D, single-column and empty inputs keep their shape"""
    for z in (away_from_zero(1, seed=214), away_from_zero(2, 3, 4, seed=215),
              away_from_zero(6, 1, seed=216, dtype=F64), torch.zeros(0), torch.zeros(2, 0, 3)):
        _check_relu_derivative(student, z)


# -- sigmoid -----------------------------------------------------------------------------

def _sigmoid_mistakes(z, expected):
    return {
        "mind the sign: σ(z) = 1 / (1 + exp(-z)), not 1 / (1 + exp(z)).":
            lambda: 1 / (1 + torch.exp(z)),
        "exp(z) / (1 + exp(z)) overflows: for large z, exp(z) is inf and inf / inf is nan. "
        "Use 1 / (1 + exp(-z)).": lambda: torch.exp(z) / (1 + torch.exp(z)),
        "new tensors default to float32: keep z's dtype.": lambda: torch.sigmoid(z).float(),
        "mind the parentheses: 1 / 1 + exp(-z) is (1 / 1) + exp(-z), since division binds "
        "tighter than addition; write 1 / (1 + exp(-z)).": lambda: 1 + torch.exp(-z),
    }


def _check_sigmoid(student, z, earlier=None):
    expected = torch.sigmoid(z)
    got = student.sigmoid(z)
    expect_tensor(got, expected, student.signature("sigmoid", (z,)),
                  mistakes=stale(_sigmoid_mistakes(z, expected), "sigmoid", earlier))
    return got


@graded("sigmoid", points=1, visible=True)
def test_sigmoid_small(student):
    """-5, -4, ..., 5 match torch.sigmoid"""
    again(_check_sigmoid, student, torch.linspace(-5, 5, 11), name="sigmoid")


@graded("sigmoid", points=1, visible=True)
def test_sigmoid_shapes_float64(student):
    """2-D float32, 3-D float64 and empty inputs match torch.sigmoid"""
    first = _check_sigmoid(student, rand(4, 7, seed=220, low=-6, high=6))
    _check_sigmoid(student, rand(2, 3, 2, seed=221, dtype=F64, low=-6, high=6))
    _check_sigmoid(student, rand(4, 7, seed=222, low=-6, high=6), earlier=first)
    _check_sigmoid(student, torch.zeros(0))
    _check_sigmoid(student, torch.zeros(3, 0, dtype=F64))


@graded("sigmoid", points=1, visible=True)
def test_sigmoid_large_inputs(student):
    """very large positive and negative inputs give 1 and 0, never nan"""
    _check_sigmoid(student, torch.tensor([-200.0, -100.0, -30.0, 0.0, 30.0, 100.0, 200.0]))
    _check_sigmoid(student, torch.tensor([-1000.0, -40.0, 40.0, 1000.0], dtype=F64))


# -- sigmoid_derivative ------------------------------------------------------------------

def _sigmoid_derivative_mistakes(z, expected):
    s = torch.sigmoid(z)
    return {
        "apply the formula to σ(z), not to z: σ'(z) = σ(z) * (1 - σ(z)).": lambda: z * (1 - z),
        "this is σ(z) itself; its derivative is σ(z) * (1 - σ(z)).": lambda: s,
        "mind the sign: σ'(z) = σ(z) * (1 - σ(z)) is never negative.": lambda: s * (s - 1),
        "σ(z) * (1 + σ(z)) has a plus where the formula has a minus: σ'(z) = σ(z) * (1 - σ(z)).":
            lambda: s * (1 + s),
        "exp(z) overflows for large z (inf / inf is nan): compute σ(z) as 1 / (1 + exp(-z)) "
        "and use σ(z) * (1 - σ(z)).":
            lambda: torch.exp(z) / (1 + torch.exp(z)) * (1 - torch.exp(z) / (1 + torch.exp(z))),
        "new tensors default to float32: keep z's dtype.": lambda: expected.float(),
    }


def _check_sigmoid_derivative(student, z, earlier=None):
    expected = autograd_derivative(torch.sigmoid, z)
    got = student.sigmoid_derivative(z)
    expect_tensor(got, expected, student.signature("sigmoid_derivative", (z,)),
                  mistakes=stale(_sigmoid_derivative_mistakes(z, expected), "sigmoid_derivative",
                                  earlier))
    return got


@graded("sigmoid_derivative", points=1, visible=True)
def test_sigmoid_derivative_small(student):
    """-5, -4, ..., 5 match what autograd gives for torch.sigmoid"""
    again(_check_sigmoid_derivative, student, torch.linspace(-5, 5, 11), name="sigmoid_derivative")


@graded("sigmoid_derivative", points=1, visible=True)
def test_sigmoid_derivative_shapes_float64(student):
    """2-D float32, 3-D float64 and empty inputs match autograd"""
    first = _check_sigmoid_derivative(student, rand(5, 3, seed=230, low=-6, high=6))
    _check_sigmoid_derivative(student, rand(3, 2, 4, seed=231, dtype=F64, low=-6, high=6))
    _check_sigmoid_derivative(student, rand(5, 3, seed=232, low=-6, high=6), earlier=first)
    _check_sigmoid_derivative(student, torch.zeros(0))
    _check_sigmoid_derivative(student, torch.zeros(0, 2, dtype=F64))


@graded("sigmoid_derivative", points=1)
def test_sigmoid_derivative_extremes(student):
    """the slope is 1/4 at 0 and goes to 0 (not nan) for very large |z|"""
    _check_sigmoid_derivative(student, torch.tensor([-200.0, -100.0, -20.0, 0.0, 20.0, 100.0, 200.0]))
    _check_sigmoid_derivative(student, torch.tensor([-1000.0, 0.0, 1000.0], dtype=F64))

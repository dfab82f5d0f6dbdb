"""Hidden tests: 03_chain_rule (what backward() computes)."""

import pytest
import torch
import torch.nn.functional as F

from autograder.grade.compare import expect_tensor, fail, misplaced, order_hint, stale
from autograder.grade.submission import stand_ins
from autograder.tests.data import away_from_zero, rand
from autograder.tests.repeat import again

ASSIGNMENT = "03_chain_rule"
graded = pytest.mark.graded

F32, F64 = torch.float32, torch.float64

# mlp_backward is graded with these standing in for the learner's helpers, so that a
# broken helper costs only its own points.
REFERENCES = stand_ins(ASSIGNMENT)  # PyTorch-built: they spell out no answer

UPSTREAM = ("the upstream gradient grad_out (= dL/dy, the gradient of the loss with respect to "
            "this layer's output y) was ignored: you computed the gradient of y.sum(). "
            "Multiply by grad_out.")
SIGN = "the sign is flipped: gradients point uphill; the minus belongs to the update step."


def _leaves(*tensors):
    return [t.detach().clone().requires_grad_(True) for t in tensors]


def _expect_sequence(got, length, call, spelling):
    __tracebackhide__ = True
    if not isinstance(got, (tuple, list)) or len(got) != length:
        kind = f"a {type(got).__name__} of length {len(got)}" if isinstance(got, (tuple, list)) \
            else f"a {type(got).__name__}"
        fail(f"{call} returned {kind}; expected {length} tensors, as in `return {spelling}`.")


# -- mse_loss ----------------------------------------------------------------------------

def _check_mse_loss(student, y_hat, y, earlier=None):
    expected = F.mse_loss(y_hat, y)
    d = y_hat - y
    got = student.mse_loss(y_hat, y)
    expect_tensor(got, expected, student.signature("mse_loss", (y_hat, y)),
                  mistakes=stale({
                      "take the mean over all entries (divide by y_hat.numel()), not the sum.":
                          lambda: (d ** 2).sum(),
                      "divide by y_hat.numel() = N * out, the number of entries, not by the "
                      "batch size N.": lambda: (d ** 2).sum() / d.shape[0],
                      "square each difference before taking the mean.": lambda: d.mean() ** 2,
                      "square the differences; the absolute value gives a different loss.":
                          lambda: d.abs().mean(),
                      "no square root: the MSE is the mean of the squares, not its root.":
                          lambda: (d ** 2).mean().sqrt(),
                      "return a 0-dim tensor, as F.mse_loss does: no .reshape(1) or "
                      "keepdim.": lambda: expected.reshape(1),
                      "new tensors default to float32: keep the inputs' dtype.":
                          lambda: expected.float(),
                      **{f"the mean must run over every entry (.mean() with no dim), giving a "
                         f"0-dim tensor; mean(dim={dim}) averages along one dimension only.":
                         (lambda dim=dim: (d ** 2).mean(dim=dim)) for dim in range(d.dim())},
                  }, "mse_loss", earlier))
    return got


@graded("mse_loss", points=1, visible=True)
def test_mse_loss_vector(student):
    """a vector of 6 predictions matches F.mse_loss"""
    again(_check_mse_loss, student, torch.tensor([0.5, -1.0, 2.0, 0.0, 1.5, -0.5]),
          torch.tensor([1.0, -1.0, 0.0, 0.5, 1.0, 0.0]), name="mse_loss")


@graded("mse_loss", points=1, visible=True)
def test_mse_loss_batch(student):
    """a (N, out) batch averages over all N * out entries, as a 0-dim tensor"""
    first = _check_mse_loss(student, rand(4, 3, seed=300), rand(4, 3, seed=301))
    _check_mse_loss(student, rand(4, 3, seed=308), rand(4, 3, seed=309), earlier=first)
    _check_mse_loss(student, rand(2, 5, seed=302, low=-3, high=3), rand(2, 5, seed=303))


@graded("mse_loss", points=1, visible=True)
def test_mse_loss_float64(student):
    """float64 inputs of 1, 2 and 3 dimensions give a float64 loss"""
    _check_mse_loss(student, rand(7, seed=304, dtype=F64), rand(7, seed=305, dtype=F64))
    _check_mse_loss(student, rand(3, 2, 4, seed=306, dtype=F64), rand(3, 2, 4, seed=307, dtype=F64))


# -- mse_loss_grad -----------------------------------------------------------------------

def _check_mse_loss_grad(student, y_hat, y, earlier=None):
    (leaf,) = _leaves(y_hat)
    F.mse_loss(leaf, y).backward()
    expected = leaf.grad
    d = y_hat - y
    got = student.mse_loss_grad(y_hat, y)
    expect_tensor(got, expected,
                  student.signature("mse_loss_grad", (y_hat, y)), mistakes=stale({
                      "divide by y_hat.numel() = N * out (the loss averages over every entry), "
                      "not by the batch size N.": lambda: 2 * d / d.shape[0],
                      "the factor 2 is missing: d/dŷ (ŷ - y)² = 2 (ŷ - y).":
                          lambda: d / d.numel(),
                      "sign error: dL/dŷ = 2 (ŷ - y) / M, not 2 (y - ŷ) / M. With this sign "
                      "gradient descent would make the loss go up.": lambda: -expected,
                      "divide by y_hat.numel(): the loss is a mean, not a sum.": lambda: 2 * d,
                      "new tensors default to float32: keep the inputs' dtype.":
                          lambda: expected.float(),
                      "the gradient has one entry for each entry of y_hat (the same shape): do "
                      "not reduce it with .mean() or .sum().": lambda: 2 * d.mean(),
                      "the gradient has one entry for each entry of y_hat (the same shape): do "
                      "not sum it.": lambda: 2 * d.sum(),
                  }, "mse_loss_grad", earlier))
    return got


@graded("mse_loss_grad", points=1, visible=True)
def test_mse_loss_grad_vector(student):
    """a vector of 5 predictions matches autograd"""
    again(_check_mse_loss_grad, student, torch.tensor([0.5, -1.0, 2.0, 0.0, 1.5]),
          torch.tensor([1.0, -1.0, 0.0, 0.5, 1.0]), name="mse_loss_grad")


@graded("mse_loss_grad", points=1, visible=True)
def test_mse_loss_grad_batch(student):
    """a (N, out) batch divides by N * out (numel), not by the batch size"""
    first = _check_mse_loss_grad(student, rand(4, 3, seed=310), rand(4, 3, seed=311))
    _check_mse_loss_grad(student, rand(4, 3, seed=318), rand(4, 3, seed=319), earlier=first)
    _check_mse_loss_grad(student, rand(6, 1, seed=312), rand(6, 1, seed=313))


@graded("mse_loss_grad", points=1, visible=True)
def test_mse_loss_grad_float64(student):
    """float64 2-D and 3-D inputs match autograd and stay float64"""
    _check_mse_loss_grad(student, rand(5, 2, seed=314, dtype=F64), rand(5, 2, seed=315, dtype=F64))
    _check_mse_loss_grad(student, rand(2, 3, 2, seed=316, dtype=F64),
                         rand(2, 3, 2, seed=317, dtype=F64))


# -- linear_backward ---------------------------------------------------------------------

def _check_linear_backward(student, grad_out, x, W, b, earlier=None):
    lx, lW, lb = _leaves(x, W, b)
    F.linear(lx, lW, lb).backward(grad_out)
    gx, gW, gb = lx.grad, lW.grad, lb.grad
    args = (grad_out, x, W)
    call = student.signature("linear_backward", args)
    got = student.result("linear_backward", student.call("linear_backward", *args), args,
                         about="" if len(x) else "Here the batch is empty (N = 0): grad_x is "
                         "(0, in), grad_W and grad_b are zeros (empty sums).")
    _expect_sequence(got, 3, call, "grad_x, grad_W, grad_b")
    swapped = order_hint(got, (gx, gW, gb), ("grad_x", "grad_W", "grad_b"))
    if swapped:
        fail(f"{call} returned the right gradients in the wrong order.{swapped}")
    ones = torch.ones_like(grad_out)
    expect_tensor(got[0], gx, f"grad_x from {call}", mistakes=stale({
        "W is not transposed here: grad_x = grad_out @ W (W is (out, in)), not grad_out @ W.T.":
            lambda: grad_out @ W.T,
        UPSTREAM: lambda: ones @ W,
        SIGN: lambda: -gx,
    }, "linear_backward", earlier and earlier[0]))
    expect_tensor(got[1], gW, f"grad_W from {call}", mistakes={
        "grad_W is transposed: it has W's shape (out, in), so grad_W = grad_out.T @ x, "
        "not x.T @ grad_out.": lambda: x.T @ grad_out,
        UPSTREAM: lambda: ones.T @ x,
        SIGN: lambda: -gW,
        "W is shared by all samples, so its gradient is the sum over the batch, not the mean.":
            lambda: gW / x.shape[0],
    })
    expect_tensor(got[2], gb, f"grad_b from {call}", mistakes={
        "b is shared by all samples, so grad_b = grad_out.sum(dim=0), not the mean.":
            lambda: grad_out.mean(dim=0),
        "sum over the batch (dim=0), one number per output: grad_b has b's shape (out,).":
            lambda: grad_out,
        "sum over the batch, dim=0, not over the outputs (dim=1).": lambda: grad_out.sum(dim=1),
        UPSTREAM: lambda: ones.sum(dim=0),
        SIGN: lambda: -gb,
    })
    return got


@graded("linear_backward", points=1, visible=True)
def test_linear_backward_batch(student):
    """a batch of 5 through a 4 -> 3 layer matches y.backward(grad_out)"""
    again(_check_linear_backward, student, rand(5, 3, seed=320), rand(5, 4, seed=321),
          rand(3, 4, seed=322), rand(3, seed=323), name="linear_backward")


@graded("linear_backward", points=1)
def test_linear_backward_non_square(student):
    """other sizes (in != out, a single output) match y.backward(grad_out)"""
    _check_linear_backward(student, rand(7, 5, seed=330), rand(7, 2, seed=331),
                           rand(5, 2, seed=332), rand(5, seed=333))
    _check_linear_backward(student, rand(3, 1, seed=334), rand(3, 6, seed=335),
                           rand(1, 6, seed=336), rand(1, seed=337))


@graded("linear_backward", points=1)
def test_linear_backward_square(student):
    """square W (in == out): grad_W and grad_x must still not be transposed"""
    _check_linear_backward(student, rand(6, 4, seed=340), rand(6, 4, seed=341),
                           rand(4, 4, seed=342), rand(4, seed=343))


@graded("linear_backward", points=1)
def test_linear_backward_float64(student):
    """float64 inputs give float64 gradients"""
    first = _check_linear_backward(student, rand(8, 2, seed=350, dtype=F64),
                                   rand(8, 3, seed=351, dtype=F64), rand(2, 3, seed=352, dtype=F64),
                                   rand(2, seed=353, dtype=F64))
    _check_linear_backward(student, rand(8, 2, seed=354, dtype=F64), rand(8, 3, seed=355, dtype=F64),
                           rand(2, 3, seed=356, dtype=F64), rand(2, seed=357, dtype=F64),
                           earlier=first)


@graded("linear_backward", points=1)
def test_linear_backward_one_sample(student):
    """a batch of one sample with one input feature, and an empty batch (N = 0)"""
    _check_linear_backward(student, rand(1, 3, seed=360), rand(1, 1, seed=361),
                           rand(3, 1, seed=362), rand(3, seed=363))
    _check_linear_backward(student, rand(0, 3, seed=364), rand(0, 2, seed=365),
                           rand(3, 2, seed=366), rand(3, seed=367))


# -- relu_backward -----------------------------------------------------------------------

def _check_relu_backward(student, grad_out, z, earlier=None, earlier_z=None):
    (leaf,) = _leaves(z)
    torch.relu(leaf).backward(grad_out)
    expected = leaf.grad
    mask = (z > 0).to(z.dtype)
    got = student.relu_backward(grad_out, z)
    expect_tensor(got, expected,
                  student.signature("relu_backward", (grad_out, z)), mistakes=stale({
                      "`.float()` always gives float32: use `.to(grad_out.dtype)` to keep the "
                      "dtype.": lambda: expected.float(),
                      "at z == 0 the gradient must be 0, as torch.relu's backward gives: mask "
                      "with z > 0, not z >= 0.": lambda: grad_out * (z >= 0).to(z.dtype),
                      "at z == 0 you pass half the gradient (torch.maximum's rule); "
                      "torch.relu's backward gives 0 there.":
                          lambda: grad_out * (mask + 0.5 * (z == 0).to(z.dtype)),
                      "you returned relu'(z) alone; the upstream gradient grad_out (= dL/da, "
                      "for the ReLU's output a) was ignored: multiply by it.": lambda: mask,
                      "the mask comes from z, the ReLU's input: keep grad_out where z > 0, "
                      "not where grad_out > 0.": lambda: grad_out.clamp(min=0),
                      "multiply grad_out by ReLU's slope relu'(z) (0 or 1), not by relu(z).":
                          lambda: grad_out * z.clamp(min=0),
                      SIGN: lambda: -expected,
                      "the arguments are used the other way round: relu_backward(grad_out, z) "
                      "gets the upstream gradient first, then z; the result is grad_out where "
                      "z > 0.": lambda: z * (grad_out > 0).to(z.dtype),
                      "sign(z) is -1 where z < 0, but ReLU's slope there is 0: multiply by "
                      "(z > 0), not by sign(z).": lambda: grad_out * torch.sign(z),
                      **({"the mask comes from an earlier call's z (same shape, other values): "
                          "does relu_backward keep the mask between calls? Compute it from this "
                          "call's z every time.": lambda: grad_out * (earlier_z > 0).to(z.dtype)}
                         if earlier_z is not None else {}),
                  }, "relu_backward", earlier))
    return got


@graded("relu_backward", points=1, visible=True)
def test_relu_backward_small(student):
    """a 4x5 input away from zero matches autograd for torch.relu"""
    again(_check_relu_backward, student, rand(4, 5, seed=370), away_from_zero(4, 5, seed=371),
          name="relu_backward")


@graded("relu_backward", points=1, visible=True)
def test_relu_backward_at_zero(student):
    """where z == 0 the gradient is 0, as torch.relu's backward gives"""
    _check_relu_backward(student, torch.tensor([0.5, -1.0, 2.0, 1.5, -0.3, 0.7]),
                         torch.tensor([-2.0, -0.5, 0.0, 0.0, 0.5, 3.0]))
    z = away_from_zero(3, 6, seed=372)
    z[:, ::2] = 0.0
    _check_relu_backward(student, rand(3, 6, seed=373, low=0.5, high=2.0), z)


@graded("relu_backward", points=1)
def test_relu_backward_float64(student):
    """float64 inputs give a float64 gradient"""
    _check_relu_backward(student, rand(3, 7, seed=374, dtype=F64),
                         away_from_zero(3, 7, seed=375, dtype=F64))


@graded("relu_backward", points=1)
def test_relu_backward_any_shape(student):
    """1-D, 3-D and empty inputs keep their shape; a second z of the same shape right after the
    first (a mask kept from the last call of that shape shows)"""
    first = _check_relu_backward(student, rand(9, seed=376), away_from_zero(9, seed=377))
    _check_relu_backward(student, rand(9, seed=368), away_from_zero(9, seed=369), earlier=first,
                         earlier_z=away_from_zero(9, seed=377))
    _check_relu_backward(student, rand(2, 3, 4, seed=378), away_from_zero(2, 3, 4, seed=379))
    _check_relu_backward(student, torch.zeros(0, 3), torch.zeros(0, 3))


# -- mlp_backward ------------------------------------------------------------------------

KEYS = ("W1", "b1", "W2", "b2")


def _mlp_grads(x, y, params, act=torch.relu):
    """dL/dθ from autograd for L = mse(act(x W1ᵀ + b1) W2ᵀ + b2, y)."""
    W1, b1, W2, b2 = _leaves(*(params[k] for k in KEYS))
    F.mse_loss(F.linear(act(F.linear(x, W1, b1)), W2, b2), y).backward()
    return dict(zip(KEYS, (W1.grad, b1.grad, W2.grad, b2.grad)))


def _mlp_by_hand(x, y, params, mask=True, second_input="h"):
    """The chain rule with one step changed (for recognising mistakes)."""
    z1 = F.linear(x, params["W1"], params["b1"])
    h = torch.relu(z1)
    g = 2 * (F.linear(h, params["W2"], params["b2"]) - y) / y.numel()
    gz1 = g @ params["W2"] * ((z1 > 0).to(z1.dtype) if mask else 1)
    used = h if second_input == "h" else z1
    return {"W1": gz1.T @ x, "b1": gz1.sum(0), "W2": g.T @ used, "b2": g.sum(0)}


def _mlp_mistakes(x, y, params, expected, key):
    out = y.shape[1] if y.dim() > 1 else 1
    mistakes = {
        "the first upstream gradient is dL/dŷ = 2 (ŷ - y) / ŷ.numel(): divide by all N * out "
        "entries, not by the batch size N.": lambda: expected[key] * out,
        "the factor 2 of the MSE gradient is missing.": lambda: expected[key] / 2,
        "the first upstream gradient is dL/dŷ = 2 (ŷ - y) / ŷ.numel(): the division by the "
        "number of entries is missing (that is the gradient of the summed loss).":
            lambda: expected[key] * y.numel(),
        SIGN + " Start from dL/dŷ = 2 (ŷ - y) / M, not 2 (y - ŷ) / M.": lambda: -expected[key],
        "a hidden unit with z1 == 0 must get no gradient, as with torch.relu: mask with z1 > 0, "
        "not z1 >= 0.": lambda: _mlp_grads(x, y, params, act=lambda z: z * (z >= 0))[key],
        "the gradient must go back through the ReLU: apply relu_backward to dL/dh (with z1) "
        "before the first layer.": lambda: _mlp_by_hand(x, y, params, mask=False)[key],
        "the second layer's input is h = relu(z1), not z1: dL/dW2 = (dL/dŷ)ᵀ h.":
            lambda: _mlp_by_hand(x, y, params, second_input="z1")[key],
        "new tensors default to float32: keep the inputs' dtype.": lambda: expected[key].float(),
    }
    if key.startswith("W"):
        mistakes["the weight gradient is transposed: dL/dW has W's shape (out, in)."] = \
            lambda: expected[key].T
    else:
        mistakes["a bias is shared by all samples: its gradient is the sum over the batch, "
                 "not the mean."] = lambda: expected[key] / x.shape[0]
    return mistakes


def _check_mlp(student, x, y, params, earlier=None):
    expected = _mlp_grads(x, y, params)
    args = (x, y, *(params[k] for k in KEYS))
    call = student.signature("mlp_backward", args)
    got = student.result("mlp_backward", student.call("mlp_backward", *args), args)
    if not isinstance(got, dict) or set(got) != set(KEYS):
        have = f"a dict with keys {sorted(got)}" if isinstance(got, dict) else f"a {type(got).__name__}"
        fail(f"{call} returned {have}; expected a dict with keys 'W1', 'b1', 'W2', 'b2', as in "
             "`return {\"W1\": ..., \"b1\": ..., \"W2\": ..., \"b2\": ...}`.")
    for key in KEYS:
        expect_tensor(got[key], expected[key], f'{call}["{key}"]',
                      mistakes=stale(_mlp_mistakes(x, y, params, expected, key), "mlp_backward",
                                      earlier and earlier[key])
                      | misplaced({f'"{k}"': v for k, v in expected.items()}, f'"{key}"'))
    return got


def _params(n_in, hidden, out, seed, dtype=F32):
    return {"W1": rand(hidden, n_in, seed=seed, dtype=dtype), "b1": rand(hidden, seed=seed + 1, dtype=dtype),
            "W2": rand(out, hidden, seed=seed + 2, dtype=dtype), "b2": rand(out, seed=seed + 3, dtype=dtype)}


@graded("mlp_backward", points=1, visible=True)
def test_mlp_backward_small(student):
    """a 3 -> 6 -> 2 network on a batch of 8 matches loss.backward() (twice, new values)"""
    first = again(_check_mlp, student, rand(8, 3, seed=380), rand(8, 2, seed=381),
                  _params(3, 6, 2, seed=382), name="mlp_backward")
    _check_mlp(student, rand(8, 3, seed=386), rand(8, 2, seed=387), _params(3, 6, 2, seed=388),
               earlier=first)


@graded("mlp_backward", points=1)
def test_mlp_backward_float64(student):
    """a float64 4 -> 7 -> 3 network matches loss.backward() and stays float64"""
    _check_mlp(student, rand(5, 4, seed=390, dtype=F64), rand(5, 3, seed=391, dtype=F64),
               _params(4, 7, 3, seed=392, dtype=F64))


@graded("mlp_backward", points=1, visible=True)
def test_mlp_backward_at_kink(student):
    """hidden units with z1 == 0 exactly get no gradient, as with torch.relu"""
    x = rand(6, 3, seed=400, dtype=F64)
    x[0] = 0.0                        # sample 0 reaches the hidden layer as b1 alone
    params = _params(3, 5, 2, seed=401, dtype=F64)
    params["b1"][1] = params["b1"][3] = 0.0
    _check_mlp(student, x, rand(6, 2, seed=405, dtype=F64), params)


@graded("mlp_backward", points=1)
def test_mlp_backward_one_output(student):
    """a single sample, and a single output, match loss.backward()"""
    _check_mlp(student, rand(1, 2, seed=410), rand(1, 1, seed=411), _params(2, 4, 1, seed=412))
    _check_mlp(student, rand(16, 1, seed=420), rand(16, 1, seed=421), _params(1, 3, 1, seed=422))

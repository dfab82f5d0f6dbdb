"""Correct by-hand answers written blind from the release notebooks (2026-12-07, sixth set), with
the state a learner touches: `.grad` (`= None`, `.zero_()`), `.data` (`-=`, `=`, `.add_`),
`requires_grad` / `requires_grad_()`, `no_grad` (block and decorator), `set_grad_enabled`,
`enable_grad`, tensors kept in lists, dicts and tuples and updated through them, helpers in an
added cell that return tensors later changed, walrus, lambdas, closures, `functools.reduce`,
`itertools`, `math`, `copy.deepcopy`, `match`, dataclasses where allowed.

Measured once on the mechanism as it stood (5c240f3 + f0abc62), before anything was changed for
it: `python bench/variants.py bench/variants/fresh_state_2026_12_07.py`: 89 graded, 0 refused,
0 lost points.

VARIANTS: a list of dicts {"assignment", "function", "style", "code", "added"}: "code" is a complete
answer cell, "added" the code of a helper cell the learner added above it ("" if none).
"""


V = []

# ==============================================================================================
# 01_linear_algebra: matmul
# ==============================================================================================
V.append(dict(assignment="01_linear_algebra", function="matmul",
    style="type hints; new_zeros output filled entry by entry with (row * column).sum()",
    added="",
    code='''def matmul(A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
    """Return the (n, m) matrix product of A (n, k) and B (k, m): C[i, j] = sum_t A[i, t] * B[t, j].

    Raise ValueError if A or B is not 2-D or if A.shape[1] != B.shape[0].
    """
    if A.dim() != 2 or B.dim() != 2:
        raise ValueError("matmul expects two matrices (2-D tensors)")
    n, k = A.shape
    if B.shape[0] != k:
        raise ValueError(f"shapes {tuple(A.shape)} and {tuple(B.shape)} do not line up")
    m = B.shape[1]
    C = A.new_zeros((n, m))            # same dtype (and device) as A
    for i in range(n):
        for j in range(m):
            C[i, j] = (A[i, :] * B[:, j]).sum()
    return C
'''))

V.append(dict(assignment="01_linear_algebra", function="matmul",
    style="itertools.product over (i, j), .item() of each dot product, torch.tensor(...).reshape",
    added="",
    code='''import itertools


def matmul(A, B):
    """Return the (n, m) matrix product of A (n, k) and B (k, m): C[i, j] = sum_t A[i, t] * B[t, j].

    Raise ValueError if A or B is not 2-D or if A.shape[1] != B.shape[0].
    """
    if A.ndim != 2 or B.ndim != 2:
        raise ValueError("both inputs must be 2-D")
    (n, k), (k2, m) = A.shape, B.shape
    if k != k2:
        raise ValueError(f"inner dimensions differ: {k} != {k2}")
    entries = [(A[i] * B[:, j]).sum().item() for i, j in itertools.product(range(n), range(m))]
    return torch.tensor(entries, dtype=A.dtype).reshape(n, m)
'''))

V.append(dict(assignment="01_linear_algebra", function="matmul",
    style="functools.reduce(operator.add, ...) of column-times-row outer products, from a zeros start",
    added="",
    code='''from functools import reduce
import operator


def matmul(A, B):
    """Return the (n, m) matrix product of A (n, k) and B (k, m): C[i, j] = sum_t A[i, t] * B[t, j].

    Raise ValueError if A or B is not 2-D or if A.shape[1] != B.shape[0].
    """
    if len(A.shape) != 2 or len(B.shape) != 2:
        raise ValueError("matmul: A and B must both be matrices")
    if A.shape[1] != B.shape[0]:
        raise ValueError(f"matmul: cannot multiply {tuple(A.shape)} by {tuple(B.shape)}")
    start = torch.zeros(A.shape[0], B.shape[1], dtype=A.dtype)
    # column t of A times row t of B is an (n, m) matrix; the product is the sum of those
    outer_products = (A[:, t].unsqueeze(1) * B[t, :].unsqueeze(0) for t in range(A.shape[1]))
    return reduce(operator.add, outer_products, start)
'''))

V.append(dict(assignment="01_linear_algebra", function="matmul",
    style="early return for empty results, one broadcast row at a time, torch.stack, assert on the shape",
    added="",
    code='''def matmul(A, B):
    """Return the (n, m) matrix product of A (n, k) and B (k, m): C[i, j] = sum_t A[i, t] * B[t, j].

    Raise ValueError if A or B is not 2-D or if A.shape[1] != B.shape[0].
    """
    if A.dim() != 2:
        raise ValueError(f"A should be 2-D, got shape {tuple(A.shape)}")
    if B.dim() != 2:
        raise ValueError(f"B should be 2-D, got shape {tuple(B.shape)}")
    n, k = A.shape
    k_b, m = B.shape
    if k != k_b:
        raise ValueError(f"A has {k} columns but B has {k_b} rows")
    if n == 0 or m == 0 or k == 0:
        return torch.zeros(n, m, dtype=A.dtype)          # empty sums are 0
    rows = []
    for i in range(n):
        # A[i] as a column (k, 1) times B (k, m), summed over t: row i of the product
        rows.append((A[i].unsqueeze(1) * B).sum(dim=0))
    C = torch.stack(rows)
    assert C.shape == (n, m)
    return C
'''))

# ==============================================================================================
# 01_linear_algebra: linear_forward
# ==============================================================================================
V.append(dict(assignment="01_linear_algebra", function="linear_forward",
    style="flag for a single sample, unsqueeze(0) / squeeze(0) around matmul(x, W.T), bias added if given",
    added="",
    code='''def linear_forward(x, W, b=None):
    """Return x Wᵀ + b, as nn.Linear does, using matmul.

    x: (N, in) or (in,); W: (out, in); b: (out,) or None. Result: (N, out), or (out,) for 1-D x.
    """
    single = x.dim() == 1
    batch = x.unsqueeze(0) if single else x
    y = matmul(batch, W.T)
    if b is not None:
        y = y + b                     # (N, out) + (out,): b is added to every row
    return y.squeeze(0) if single else y
'''))

V.append(dict(assignment="01_linear_algebra", function="linear_forward",
    style="recursive early return for a 1-D input, indexing [0] to drop the batch dimension",
    added="",
    code='''def linear_forward(x, W, b=None):
    """Return x Wᵀ + b, as nn.Linear does, using matmul.

    x: (N, in) or (in,); W: (out, in); b: (out,) or None. Result: (N, out), or (out,) for 1-D x.
    """
    if x.ndim == 1:
        return linear_forward(x.unsqueeze(0), W, b)[0]     # a batch of one, then its only row
    out = matmul(x, W.t())
    return out if b is None else out + b
'''))

V.append(dict(assignment="01_linear_algebra", function="linear_forward",
    style="typing.Optional annotations, reshape(1, -1) / reshape(-1), transpose(0, 1), bias expanded explicitly",
    added="",
    code='''from typing import Optional


def linear_forward(x: torch.Tensor, W: torch.Tensor, b: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Return x Wᵀ + b, as nn.Linear does, using matmul.

    x: (N, in) or (in,); W: (out, in); b: (out,) or None. Result: (N, out), or (out,) for 1-D x.
    """
    one_sample = x.dim() == 1
    x2 = x.reshape(1, -1) if one_sample else x
    out = matmul(x2, W.transpose(0, 1))                   # (N, in) x (in, out)
    if b is not None:
        out = out + b.unsqueeze(0).expand_as(out)         # the same bias row for every sample
    return out.reshape(-1) if one_sample else out
'''))

V.append(dict(assignment="01_linear_algebra", function="linear_forward",
    style="match on x.dim() with a helper add_bias defined in an added cell; x[None, :] for a batch of one",
    added='''def add_bias(y, b):
    """y + b for every row of y, or y itself when there is no bias."""
    if b is None:
        return y
    return y + b
''',
    code='''def linear_forward(x, W, b=None):
    """Return x Wᵀ + b, as nn.Linear does, using matmul.

    x: (N, in) or (in,); W: (out, in); b: (out,) or None. Result: (N, out), or (out,) for 1-D x.
    """
    match x.dim():
        case 1:
            return add_bias(matmul(x[None, :], W.T), b)[0]
        case 2:
            return add_bias(matmul(x, W.T), b)
        case _:
            raise ValueError(f"x should be (in,) or (N, in), not {tuple(x.shape)}")
'''))

# ==============================================================================================
# 02_activation_functions: collapse_linear
# ==============================================================================================
V.append(dict(assignment="02_activation_functions", function="collapse_linear",
    style="torch.mm and torch.mv with named intermediates and a debug print of the shapes",
    added="",
    code='''def collapse_linear(W1, b1, W2, b2):
    """Return (W, b) with linear(linear(x, W1, b1), W2, b2) == linear(x, W, b) for every x.

    W1: (hidden, in), b1: (hidden,), W2: (out, hidden), b2: (out,). Result: W (out, in), b (out,).
    """
    W = torch.mm(W2, W1)              # (out, hidden) x (hidden, in)
    b = torch.mv(W2, b1) + b2         # W2 b1 + b2
    print(f"collapsed: W {tuple(W.shape)}, b {tuple(b.shape)}")
    return W, b
'''))

V.append(dict(assignment="02_activation_functions", function="collapse_linear",
    style="W2.matmul(W1); bias via b1 as a column vector, then squeezed back to (out,)",
    added="",
    code='''def collapse_linear(W1, b1, W2, b2):
    """Return (W, b) with linear(linear(x, W1, b1), W2, b2) == linear(x, W, b) for every x.

    W1: (hidden, in), b1: (hidden,), W2: (out, hidden), b2: (out,). Result: W (out, in), b (out,).
    """
    W = W2.matmul(W1)
    b_column = W2 @ b1.unsqueeze(1)          # (out, hidden) x (hidden, 1) = (out, 1)
    b = b_column.squeeze(1) + b2
    return (W, b)
'''))

V.append(dict(assignment="02_activation_functions", function="collapse_linear",
    style="bias = what the two-layer stack outputs for the input x = 0 (a zero row pushed through both layers)",
    added="",
    code='''def collapse_linear(W1, b1, W2, b2):
    """Return (W, b) with linear(linear(x, W1, b1), W2, b2) == linear(x, W, b) for every x.

    W1: (hidden, in), b1: (hidden,), W2: (out, hidden), b2: (out,). Result: W (out, in), b (out,).
    """
    W = W2 @ W1
    zero_input = W1.new_zeros(1, W1.shape[1])            # one sample of all zeros
    hidden = zero_input @ W1.T + b1                      # = b1
    b = (hidden @ W2.T + b2)[0]                          # the stack's output at x = 0 is the bias
    return W, b
'''))

# ==============================================================================================
# 02_activation_functions: relu
# ==============================================================================================
V.append(dict(assignment="02_activation_functions", function="relu",
    style="torch.where(z > 0, z, zeros_like(z))",
    added="",
    code='''def relu(z):
    """Return max(z, 0) for every entry of z (same shape and dtype as z)."""
    return torch.where(z > 0, z, torch.zeros_like(z))
'''))

V.append(dict(assignment="02_activation_functions", function="relu",
    style="clone first, then set the negative entries of the copy to 0 by boolean indexing",
    added="",
    code='''def relu(z):
    """Return max(z, 0) for every entry of z (same shape and dtype as z)."""
    out = z.clone()          # a copy: z itself must not change
    out[out < 0] = 0
    return out
'''))

V.append(dict(assignment="02_activation_functions", function="relu",
    style="torch.maximum against a zero tensor of z's dtype, with an assert on shape and dtype",
    added="",
    code='''def relu(z):
    """Return max(z, 0) for every entry of z (same shape and dtype as z)."""
    result = torch.maximum(z, torch.zeros_like(z))
    assert result.shape == z.shape and result.dtype == z.dtype
    return result
'''))

# ==============================================================================================
# 02_activation_functions: relu_derivative
# ==============================================================================================
V.append(dict(assignment="02_activation_functions", function="relu_derivative",
    style="bool mask converted with .to(z.dtype)",
    added="",
    code='''def relu_derivative(z):
    """Return 1.0 where z > 0 and 0.0 elsewhere (also at z == 0, like torch.relu); same shape and dtype as z."""
    return (z > 0).to(z.dtype)
'''))

V.append(dict(assignment="02_activation_functions", function="relu_derivative",
    style="torch.where choosing between ones_like and zeros_like",
    added="",
    code='''def relu_derivative(z):
    """Return 1.0 where z > 0 and 0.0 elsewhere (also at z == 0, like torch.relu); same shape and dtype as z."""
    ones, zeros = torch.ones_like(z), torch.zeros_like(z)
    return torch.where(z > 0, ones, zeros)
'''))

V.append(dict(assignment="02_activation_functions", function="relu_derivative",
    style="torch.heaviside with value 0 at z == 0",
    added="",
    code='''def relu_derivative(z):
    """Return 1.0 where z > 0 and 0.0 elsewhere (also at z == 0, like torch.relu); same shape and dtype as z."""
    at_zero = torch.zeros_like(z)           # heaviside's value where z == 0: torch.relu's convention
    return torch.heaviside(z, at_zero)
'''))

V.append(dict(assignment="02_activation_functions", function="relu_derivative",
    style="method chain z.gt(0).type_as(z)",
    added="",
    code='''def relu_derivative(z):
    """Return 1.0 where z > 0 and 0.0 elsewhere (also at z == 0, like torch.relu); same shape and dtype as z."""
    slope = z.gt(0).type_as(z)
    return slope
'''))

# ==============================================================================================
# 02_activation_functions: sigmoid
# ==============================================================================================
V.append(dict(assignment="02_activation_functions", function="sigmoid",
    style="the formula in one line, 1 / (1 + torch.exp(-z))",
    added="",
    code='''def sigmoid(z):
    """Return 1 / (1 + exp(-z)) for every entry of z (same shape and dtype as z)."""
    return 1 / (1 + torch.exp(-z))
'''))

V.append(dict(assignment="02_activation_functions", function="sigmoid",
    style="torch.reciprocal of exp(z.neg()) + 1, with an intermediate name",
    added="",
    code='''def sigmoid(z):
    """Return 1 / (1 + exp(-z)) for every entry of z (same shape and dtype as z)."""
    e = torch.exp(z.neg())          # inf for very negative z, and 1 / inf = 0: fine
    return torch.reciprocal(e + 1)
'''))

V.append(dict(assignment="02_activation_functions", function="sigmoid",
    style="out-of-place method chain torch.exp(-z).add(1).reciprocal()",
    added="",
    code='''def sigmoid(z):
    """Return 1 / (1 + exp(-z)) for every entry of z (same shape and dtype as z)."""
    return torch.exp(-z).add(1).reciprocal()      # exp(-z) = inf gives 1 / inf = 0, no nan
'''))

# ==============================================================================================
# 02_activation_functions: sigmoid_derivative
# ==============================================================================================
V.append(dict(assignment="02_activation_functions", function="sigmoid_derivative",
    style="s = sigmoid(z) once, then s * (1 - s)",
    added="",
    code='''def sigmoid_derivative(z):
    """Return σ(z) * (1 - σ(z)), the derivative of the sigmoid at every entry of z."""
    s = sigmoid(z)
    return s * (1 - s)
'''))

V.append(dict(assignment="02_activation_functions", function="sigmoid_derivative",
    style="an immediately-applied lambda on sigmoid(z)",
    added="",
    code='''def sigmoid_derivative(z):
    """Return σ(z) * (1 - σ(z)), the derivative of the sigmoid at every entry of z."""
    return (lambda s: s * (1.0 - s))(sigmoid(z))
'''))

V.append(dict(assignment="02_activation_functions", function="sigmoid_derivative",
    style="torch.mul(s, ones_like(s) - s) with explicit names",
    added="",
    code='''def sigmoid_derivative(z):
    """Return σ(z) * (1 - σ(z)), the derivative of the sigmoid at every entry of z."""
    s = sigmoid(z)
    one_minus_s = torch.ones_like(s) - s
    return torch.mul(s, one_minus_s)
'''))

# ==============================================================================================
# 03_chain_rule: mse_loss
# ==============================================================================================
V.append(dict(assignment="03_chain_rule", function="mse_loss",
    style="((y_hat - y) ** 2).mean()",
    added="",
    code='''def mse_loss(y_hat, y):
    """Return the mean over all entries of (y_hat - y) ** 2, as a 0-dim tensor (like F.mse_loss)."""
    return ((y_hat - y) ** 2).mean()
'''))

V.append(dict(assignment="03_chain_rule", function="mse_loss",
    style="diff * diff summed, divided by diff.numel()",
    added="",
    code='''def mse_loss(y_hat, y):
    """Return the mean over all entries of (y_hat - y) ** 2, as a 0-dim tensor (like F.mse_loss)."""
    diff = y_hat - y
    M = diff.numel()                  # every entry counts, not just the batch size
    return (diff * diff).sum() / M
'''))

V.append(dict(assignment="03_chain_rule", function="mse_loss",
    style="math.prod of the shape as M, torch.square, sum divided by M",
    added="",
    code='''import math


def mse_loss(y_hat, y):
    """Return the mean over all entries of (y_hat - y) ** 2, as a 0-dim tensor (like F.mse_loss)."""
    diff = y_hat - y
    M = math.prod(diff.shape)            # the number of entries
    return torch.square(diff).sum() / M
'''))

# ==============================================================================================
# 03_chain_rule: mse_loss_grad
# ==============================================================================================
V.append(dict(assignment="03_chain_rule", function="mse_loss_grad",
    style="the formula 2 * (y_hat - y) / y_hat.numel()",
    added="",
    code='''def mse_loss_grad(y_hat, y):
    """Return dL/dy_hat for L = mse_loss(y_hat, y): 2 * (y_hat - y) / y_hat.numel()."""
    return 2 * (y_hat - y) / y_hat.numel()
'''))

V.append(dict(assignment="03_chain_rule", function="mse_loss_grad",
    style="method chain (y_hat - y).mul(2).div(M) with M named",
    added="",
    code='''def mse_loss_grad(y_hat, y):
    """Return dL/dy_hat for L = mse_loss(y_hat, y): 2 * (y_hat - y) / y_hat.numel()."""
    M = y_hat.numel()
    return (y_hat - y).mul(2).div(M)
'''))

V.append(dict(assignment="03_chain_rule", function="mse_loss_grad",
    style="torch.sub then a scale factor from math.prod(y_hat.shape), type hints",
    added="",
    code='''import math


def mse_loss_grad(y_hat: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Return dL/dy_hat for L = mse_loss(y_hat, y): 2 * (y_hat - y) / y_hat.numel()."""
    M = math.prod(y_hat.shape)            # N * out entries
    residual = torch.sub(y_hat, y)        # ŷ − y, not y − ŷ
    return 2.0 * residual / M
'''))

# ==============================================================================================
# 03_chain_rule: linear_backward
# ==============================================================================================
V.append(dict(assignment="03_chain_rule", function="linear_backward",
    style="the three formulas with @ in one return",
    added="",
    code='''def linear_backward(grad_out, x, W):
    """For y = x Wᵀ + b and grad_out = dL/dy (N, out), return (dL/dx, dL/dW, dL/db).

    x: (N, in), W: (out, in). Shapes of the results: (N, in), (out, in), (out,).
    """
    return grad_out @ W, grad_out.T @ x, grad_out.sum(dim=0)
'''))

V.append(dict(assignment="03_chain_rule", function="linear_backward",
    style="torch.mm with .t(), named results and asserts that each gradient has its tensor's shape",
    added="",
    code='''def linear_backward(grad_out, x, W):
    """For y = x Wᵀ + b and grad_out = dL/dy (N, out), return (dL/dx, dL/dW, dL/db).

    x: (N, in), W: (out, in). Shapes of the results: (N, in), (out, in), (out,).
    """
    grad_x = torch.mm(grad_out, W)            # (N, out) x (out, in)
    grad_W = torch.mm(grad_out.t(), x)        # (out, N) x (N, in)
    grad_b = torch.sum(grad_out, dim=0)       # b is used by every sample
    assert grad_x.shape == x.shape and grad_W.shape == W.shape
    assert grad_b.shape == (W.shape[0],)
    return grad_x, grad_W, grad_b
'''))

V.append(dict(assignment="03_chain_rule", function="linear_backward",
    style="per-sample loop over zip(grad_out, x) accumulating outer products into zero tensors",
    added="",
    code='''def linear_backward(grad_out, x, W):
    """For y = x Wᵀ + b and grad_out = dL/dy (N, out), return (dL/dx, dL/dW, dL/db).

    x: (N, in), W: (out, in). Shapes of the results: (N, in), (out, in), (out,).
    """
    grad_W = torch.zeros_like(W)
    grad_b = W.new_zeros(W.shape[0])
    rows = []
    for g_n, x_n in zip(grad_out, x):          # one sample at a time
        grad_W += torch.outer(g_n, x_n)
        grad_b += g_n
        rows.append(g_n @ W)                    # this sample's dL/dx_n
    grad_x = torch.stack(rows) if rows else x.new_zeros(x.shape)
    return grad_x, grad_W, grad_b
'''))

V.append(dict(assignment="03_chain_rule", function="linear_backward",
    style="broadcasting products summed over an axis, no matrix product at all",
    added="",
    code='''def linear_backward(grad_out, x, W):
    """For y = x Wᵀ + b and grad_out = dL/dy (N, out), return (dL/dx, dL/dW, dL/db).

    x: (N, in), W: (out, in). Shapes of the results: (N, in), (out, in), (out,).
    """
    G = grad_out
    grad_x = (G.unsqueeze(2) * W.unsqueeze(0)).sum(dim=1)     # sum over j of G[n, j] W[j, i]
    grad_W = (G.unsqueeze(2) * x.unsqueeze(1)).sum(dim=0)     # sum over n of G[n, j] x[n, i]
    grad_b = G.sum(dim=0)
    return (grad_x, grad_W, grad_b)
'''))

# ==============================================================================================
# 03_chain_rule: relu_backward
# ==============================================================================================
V.append(dict(assignment="03_chain_rule", function="relu_backward",
    style="grad_out times the float mask (z > 0)",
    added="",
    code='''def relu_backward(grad_out, z):
    """For a = relu(z) and grad_out = dL/da, return dL/dz: grad_out where z > 0, and 0 where z <= 0."""
    return grad_out * (z > 0).to(grad_out.dtype)
'''))

V.append(dict(assignment="03_chain_rule", function="relu_backward",
    style="torch.where(z > 0, grad_out, zeros_like(grad_out))",
    added="",
    code='''def relu_backward(grad_out, z):
    """For a = relu(z) and grad_out = dL/da, return dL/dz: grad_out where z > 0, and 0 where z <= 0."""
    blocked = torch.zeros_like(grad_out)
    return torch.where(z > 0, grad_out, blocked)
'''))

V.append(dict(assignment="03_chain_rule", function="relu_backward",
    style="clone of grad_out, then zero it where z <= 0 by boolean indexing",
    added="",
    code='''def relu_backward(grad_out, z):
    """For a = relu(z) and grad_out = dL/da, return dL/dz: grad_out where z > 0, and 0 where z <= 0."""
    grad_z = grad_out.clone()       # do not touch the caller's grad_out
    grad_z[z <= 0] = 0.0
    return grad_z
'''))

# ==============================================================================================
# 03_chain_rule: mlp_backward
# ==============================================================================================
V.append(dict(assignment="03_chain_rule", function="mlp_backward",
    style="forward keeping z1 and h, then the table of helpers in order, tuple unpacking with _",
    added="",
    code='''def mlp_backward(x, y, W1, b1, W2, b2):
    """Gradients of L = mse(relu(x W1ᵀ + b1) W2ᵀ + b2, y) by the chain rule.

    Return {"W1": dL/dW1, "b1": dL/db1, "W2": dL/dW2, "b2": dL/db2}, as L.backward() would fill .grad.
    """
    z1 = x @ W1.T + b1
    h = torch.relu(z1)
    y_hat = h @ W2.T + b2

    grad_y_hat = mse_loss_grad(y_hat, y)
    grad_h, grad_W2, grad_b2 = linear_backward(grad_y_hat, h, W2)
    grad_z1 = relu_backward(grad_h, z1)
    _, grad_W1, grad_b1 = linear_backward(grad_z1, x, W1)
    return {"W1": grad_W1, "b1": grad_b1, "W2": grad_W2, "b2": grad_b2}
'''))

V.append(dict(assignment="03_chain_rule", function="mlp_backward",
    style="clamp(min=0) forward; result dict built with dict(zip(keys, values))",
    added="",
    code='''def mlp_backward(x, y, W1, b1, W2, b2):
    """Gradients of L = mse(relu(x W1ᵀ + b1) W2ᵀ + b2, y) by the chain rule.

    Return {"W1": dL/dW1, "b1": dL/db1, "W2": dL/dW2, "b2": dL/db2}, as L.backward() would fill .grad.
    """
    z1 = x @ W1.T + b1
    h = z1.clamp(min=0)
    y_hat = h @ W2.T + b2

    upstream = mse_loss_grad(y_hat, y)
    second = linear_backward(upstream, h, W2)          # (grad_h, grad_W2, grad_b2)
    grad_z1 = relu_backward(second[0], z1)
    first = linear_backward(grad_z1, x, W1)            # (grad_x, grad_W1, grad_b1)
    keys = ["W1", "b1", "W2", "b2"]
    return dict(zip(keys, [first[1], first[2], second[1], second[2]]))
'''))

V.append(dict(assignment="03_chain_rule", function="mlp_backward",
    style="layers kept in a list of (W, b) pairs; forward stores activations in lists, backward walks reversed(range)",
    added="",
    code='''def mlp_backward(x, y, W1, b1, W2, b2):
    """Gradients of L = mse(relu(x W1ᵀ + b1) W2ᵀ + b2, y) by the chain rule.

    Return {"W1": dL/dW1, "b1": dL/db1, "W2": dL/dW2, "b2": dL/db2}, as L.backward() would fill .grad.
    """
    layers = [(W1, b1), (W2, b2)]
    inputs, pre_activations = [], []
    a = x
    for i, (W, b) in enumerate(layers):
        inputs.append(a)
        z = a @ W.T + b
        pre_activations.append(z)
        a = torch.relu(z) if i < len(layers) - 1 else z      # no ReLU after the last layer

    grads = {}
    grad = mse_loss_grad(a, y)
    for i in reversed(range(len(layers))):
        if i < len(layers) - 1:
            grad = relu_backward(grad, pre_activations[i])
        grad, grads[f"W{i + 1}"], grads[f"b{i + 1}"] = linear_backward(grad, inputs[i], layers[i][0])
    return grads
'''))

V.append(dict(assignment="03_chain_rule", function="mlp_backward",
    style="parameters and a cache in dicts, gradients filled into a dict step by step",
    added="",
    code='''def mlp_backward(x, y, W1, b1, W2, b2):
    """Gradients of L = mse(relu(x W1ᵀ + b1) W2ᵀ + b2, y) by the chain rule.

    Return {"W1": dL/dW1, "b1": dL/db1, "W2": dL/dW2, "b2": dL/db2}, as L.backward() would fill .grad.
    """
    p = dict(W1=W1, b1=b1, W2=W2, b2=b2)
    cache = {}
    cache["z1"] = x @ p["W1"].T + p["b1"]
    cache["h"] = torch.relu(cache["z1"])
    cache["y_hat"] = cache["h"] @ p["W2"].T + p["b2"]

    grads = {}
    grad_h, grads["W2"], grads["b2"] = linear_backward(mse_loss_grad(cache["y_hat"], y), cache["h"], p["W2"])
    grad_z1 = relu_backward(grad_h, cache["z1"])
    grads["W1"], grads["b1"] = linear_backward(grad_z1, x, p["W1"])[1:]
    return {k: grads[k] for k in ("W1", "b1", "W2", "b2")}
'''))

V.append(dict(assignment="03_chain_rule", function="mlp_backward",
    style="a forward helper in an added cell returning (z1, h, y_hat); everything under torch.no_grad() on detached inputs",
    added='''def mlp_forward(x, W1, b1, W2, b2):
    """The forward pass, keeping what the backward pass needs: (z1, h, y_hat)."""
    z1 = x @ W1.T + b1
    h = torch.relu(z1)
    return z1, h, h @ W2.T + b2
''',
    code='''def mlp_backward(x, y, W1, b1, W2, b2):
    """Gradients of L = mse(relu(x W1ᵀ + b1) W2ᵀ + b2, y) by the chain rule.

    Return {"W1": dL/dW1, "b1": dL/db1, "W2": dL/dW2, "b2": dL/db2}, as L.backward() would fill .grad.
    """
    with torch.no_grad():               # everything by hand: no graph needed
        x, y = x.detach(), y.detach()
        z1, h, y_hat = mlp_forward(x, W1.detach(), b1.detach(), W2.detach(), b2.detach())
        grad_y_hat = mse_loss_grad(y_hat, y)
        grad_h, grad_W2, grad_b2 = linear_backward(grad_y_hat, h, W2.detach())
        grad_z1 = relu_backward(grad_h, z1)
        grad_x, grad_W1, grad_b1 = linear_backward(grad_z1, x, W1.detach())
    return {"W1": grad_W1, "b1": grad_b1, "W2": grad_W2, "b2": grad_b2}
'''))

# ==============================================================================================
# 05_gradient_descent: sgd_step
# ==============================================================================================
V.append(dict(assignment="05_gradient_descent", function="sgd_step",
    style="with torch.no_grad(): loop, `continue` on a missing .grad, p -= lr * p.grad",
    added="",
    code='''def sgd_step(params, lr):
    """Update every tensor p in the list in place: p <- p - lr * p.grad, as torch.optim.SGD(params, lr).step().

    Skip tensors whose .grad is None; each p must stay the same leaf tensor (use torch.no_grad()).
    """
    with torch.no_grad():
        for p in params:
            if p.grad is None:
                continue
            p -= lr * p.grad
'''))

V.append(dict(assignment="05_gradient_descent", function="sgd_step",
    style="@torch.no_grad() as a decorator, p.add_(p.grad, alpha=-lr) as torch.optim.SGD does",
    added="",
    code='''@torch.no_grad()
def sgd_step(params, lr):
    """Update every tensor p in the list in place: p <- p - lr * p.grad, as torch.optim.SGD(params, lr).step().

    Skip tensors whose .grad is None; each p must stay the same leaf tensor (use torch.no_grad()).
    """
    for p in params:
        if p.grad is not None:
            p.add_(p.grad, alpha=-lr)
    return None
'''))

V.append(dict(assignment="05_gradient_descent", function="sgd_step",
    style="old-style update through .data: p.data -= lr * p.grad (no graph is recorded through .data)",
    added="",
    code='''def sgd_step(params, lr):
    """Update every tensor p in the list in place: p <- p - lr * p.grad, as torch.optim.SGD(params, lr).step().

    Skip tensors whose .grad is None; each p must stay the same leaf tensor (use torch.no_grad()).
    """
    for p in params:
        if p.grad is None:
            continue
        # .data is the same storage without autograd tracking, so this changes p itself
        p.data -= lr * p.grad
'''))

V.append(dict(assignment="05_gradient_descent", function="sgd_step",
    style="reassigning p.data = p.data - lr * p.grad under torch.no_grad() (same Parameter object, new values)",
    added="",
    code='''def sgd_step(params, lr):
    """Update every tensor p in the list in place: p <- p - lr * p.grad, as torch.optim.SGD(params, lr).step().

    Skip tensors whose .grad is None; each p must stay the same leaf tensor (use torch.no_grad()).
    """
    with torch.no_grad():
        for p in params:
            if p.grad is not None:
                p.data = p.data - lr * p.grad     # the object p stays the same leaf, its values change
'''))

V.append(dict(assignment="05_gradient_descent", function="sgd_step",
    style="list comprehension of tensors with a gradient, then one torch._foreach_add_ over the two lists",
    added="",
    code='''def sgd_step(params, lr):
    """Update every tensor p in the list in place: p <- p - lr * p.grad, as torch.optim.SGD(params, lr).step().

    Skip tensors whose .grad is None; each p must stay the same leaf tensor (use torch.no_grad()).
    """
    with_grad = [p for p in params if p.grad is not None]
    if not with_grad:
        return
    with torch.no_grad():
        torch._foreach_add_(with_grad, [p.grad for p in with_grad], alpha=-lr)
'''))

V.append(dict(assignment="05_gradient_descent", function="sgd_step",
    style="filter with a lambda, p.sub_(p.grad * lr)",
    added="",
    code='''def sgd_step(params, lr):
    """Update every tensor p in the list in place: p <- p - lr * p.grad, as torch.optim.SGD(params, lr).step().

    Skip tensors whose .grad is None; each p must stay the same leaf tensor (use torch.no_grad()).
    """
    has_grad = lambda t: t.grad is not None
    with torch.no_grad():
        for p in filter(has_grad, params):
            p.sub_(p.grad * lr)
'''))

V.append(dict(assignment="05_gradient_descent", function="sgd_step",
    style="enumerate over indices, walrus on .grad, params[i].copy_(params[i] - lr * g)",
    added="",
    code='''def sgd_step(params, lr):
    """Update every tensor p in the list in place: p <- p - lr * p.grad, as torch.optim.SGD(params, lr).step().

    Skip tensors whose .grad is None; each p must stay the same leaf tensor (use torch.no_grad()).
    """
    with torch.no_grad():
        for i, _ in enumerate(params):
            if (g := params[i].grad) is not None:
                params[i].copy_(params[i] - lr * g)     # copy_ writes into the same tensor
'''))

V.append(dict(assignment="05_gradient_descent", function="sgd_step",
    style="helper (added cell) that updates a tensor in place and returns it; loop over zip(params, grads)",
    added='''def update_in_place(p, g, lr):
    """p <- p - lr * g, in place; returns p (the same object) for convenience."""
    p.sub_(lr * g)
    return p
''',
    code='''def sgd_step(params, lr):
    """Update every tensor p in the list in place: p <- p - lr * p.grad, as torch.optim.SGD(params, lr).step().

    Skip tensors whose .grad is None; each p must stay the same leaf tensor (use torch.no_grad()).
    """
    grads = [p.grad for p in params]
    with torch.no_grad():
        for p, g in zip(params, grads):
            if g is None:
                continue
            updated = update_in_place(p, g, lr)
            assert updated is p
'''))

V.append(dict(assignment="05_gradient_descent", function="sgd_step",
    style="with torch.set_grad_enabled(False): as the context manager; p.data.add_(-lr * p.grad)",
    added="",
    code='''def sgd_step(params, lr):
    """Update every tensor p in the list in place: p <- p - lr * p.grad, as torch.optim.SGD(params, lr).step().

    Skip tensors whose .grad is None; each p must stay the same leaf tensor (use torch.no_grad()).
    """
    with torch.set_grad_enabled(False):      # restored when the block ends
        for p in params:
            if p.grad is None:
                continue
            p.data.add_(-lr * p.grad)
'''))

# ==============================================================================================
# 05_gradient_descent: sgd_momentum_update
# ==============================================================================================
V.append(dict(assignment="05_gradient_descent", function="sgd_momentum_update",
    style="the docstring's formulas line by line, conditional expressions",
    added="",
    code='''def sgd_momentum_update(p, grad, buf, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False):
    """One step of torch.optim.SGD for one parameter; return (new_p, new_buf) and change no input.

    g = grad + weight_decay * p; buf = g.clone() on the first step (buf is None), else
    buf = momentum * buf + (1 - dampening) * g; step = g + momentum * buf if nesterov else buf
    (step = g and new_buf = None when momentum == 0); new_p = p - lr * step.
    """
    g = grad + weight_decay * p if weight_decay != 0 else grad
    if momentum == 0:
        return p - lr * g, None
    new_buf = g.clone() if buf is None else momentum * buf + (1 - dampening) * g
    step = g + momentum * new_buf if nesterov else new_buf
    return p - lr * step, new_buf
'''))

V.append(dict(assignment="05_gradient_descent", function="sgd_momentum_update",
    style="out-of-place method chains with alpha= (grad.add, buf.mul(...).add, p.add(step, alpha=-lr)), as torch does",
    added="",
    code='''def sgd_momentum_update(p, grad, buf, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False):
    """One step of torch.optim.SGD for one parameter; return (new_p, new_buf) and change no input.

    g = grad + weight_decay * p; buf = g.clone() on the first step (buf is None), else
    buf = momentum * buf + (1 - dampening) * g; step = g + momentum * buf if nesterov else buf
    (step = g and new_buf = None when momentum == 0); new_p = p - lr * step.
    """
    g = grad
    if weight_decay != 0:
        g = g.add(p, alpha=weight_decay)
    new_buf = None
    step = g
    if momentum != 0:
        if buf is None:
            new_buf = torch.clone(g).detach()
        else:
            new_buf = buf.mul(momentum).add(g, alpha=1 - dampening)
        step = g.add(new_buf, alpha=momentum) if nesterov else new_buf
    new_p = p.add(step, alpha=-lr)
    return new_p, new_buf
'''))

V.append(dict(assignment="05_gradient_descent", function="sgd_momentum_update",
    style="torch.no_grad() block on detached inputs, state kept in a dict, early return without momentum",
    added="",
    code='''def sgd_momentum_update(p, grad, buf, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False):
    """One step of torch.optim.SGD for one parameter; return (new_p, new_buf) and change no input.

    g = grad + weight_decay * p; buf = g.clone() on the first step (buf is None), else
    buf = momentum * buf + (1 - dampening) * g; step = g + momentum * buf if nesterov else buf
    (step = g and new_buf = None when momentum == 0); new_p = p - lr * step.
    """
    with torch.no_grad():
        p, grad = p.detach(), grad.detach()
        state = {"buf": None if buf is None else buf.detach()}
        d_p = grad + weight_decay * p if weight_decay else grad
        if not momentum:
            return p - lr * d_p, None
        if state["buf"] is None:
            state["buf"] = d_p.clone()                        # first step: a copy, no dampening
        else:
            state["buf"] = momentum * state["buf"] + (1 - dampening) * d_p
        if nesterov:
            d_p = d_p + momentum * state["buf"]
        else:
            d_p = state["buf"]
        return p - lr * d_p, state["buf"]
'''))

V.append(dict(assignment="05_gradient_descent", function="sgd_momentum_update",
    style="type hints with Optional/Tuple, torch.add/torch.sub with alpha, tuple unpacking of the result",
    added="",
    code='''from typing import Optional, Tuple


def sgd_momentum_update(p: torch.Tensor, grad: torch.Tensor, buf: Optional[torch.Tensor], lr: float,
                        momentum: float = 0.0, dampening: float = 0.0, weight_decay: float = 0.0,
                        nesterov: bool = False) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
    """One step of torch.optim.SGD for one parameter; return (new_p, new_buf) and change no input.

    g = grad + weight_decay * p; buf = g.clone() on the first step (buf is None), else
    buf = momentum * buf + (1 - dampening) * g; step = g + momentum * buf if nesterov else buf
    (step = g and new_buf = None when momentum == 0); new_p = p - lr * step.
    """
    g = torch.add(grad, p, alpha=weight_decay) if weight_decay != 0 else grad
    if momentum == 0:
        new_buf, step = None, g
    else:
        if buf is None:
            new_buf = torch.zeros_like(g).copy_(g)          # a real copy of g, not a view
        else:
            new_buf = torch.add(momentum * buf, g, alpha=1 - dampening)
        step = torch.add(g, new_buf, alpha=momentum) if nesterov else new_buf
    new_p = torch.sub(p, step, alpha=lr)
    return new_p, new_buf
'''))

V.append(dict(assignment="05_gradient_descent", function="sgd_momentum_update",
    style="small helper functions in an added cell (weight decay, buffer update), walrus in the caller",
    added='''def decayed_gradient(grad, p, weight_decay):
    """The gradient with L2 weight decay folded in (a new tensor only when needed)."""
    return grad + weight_decay * p if weight_decay != 0 else grad


def next_buffer(buf, g, momentum, dampening):
    """The momentum buffer after this step: a copy of g on the first step."""
    if buf is None:
        return g.clone()
    return momentum * buf + (1 - dampening) * g
''',
    code='''def sgd_momentum_update(p, grad, buf, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False):
    """One step of torch.optim.SGD for one parameter; return (new_p, new_buf) and change no input.

    g = grad + weight_decay * p; buf = g.clone() on the first step (buf is None), else
    buf = momentum * buf + (1 - dampening) * g; step = g + momentum * buf if nesterov else buf
    (step = g and new_buf = None when momentum == 0); new_p = p - lr * step.
    """
    g = decayed_gradient(grad, p, weight_decay)
    if momentum == 0:
        return p - lr * g, None
    step = (g + momentum * (b := next_buffer(buf, g, momentum, dampening))) if nesterov \\
        else (b := next_buffer(buf, g, momentum, dampening))
    return p - lr * step, b
'''))

V.append(dict(assignment="05_gradient_descent", function="sgd_momentum_update",
    style="clone of p updated in place with sub_ (the clone is ours, so inputs stay untouched); new buffer via mul/add_",
    added="",
    code='''def sgd_momentum_update(p, grad, buf, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False):
    """One step of torch.optim.SGD for one parameter; return (new_p, new_buf) and change no input.

    g = grad + weight_decay * p; buf = g.clone() on the first step (buf is None), else
    buf = momentum * buf + (1 - dampening) * g; step = g + momentum * buf if nesterov else buf
    (step = g and new_buf = None when momentum == 0); new_p = p - lr * step.
    """
    g = grad.clone()
    if weight_decay != 0:
        g.add_(p, alpha=weight_decay)            # g is our own copy: changing it is fine
    new_buf = None
    if momentum != 0:
        if buf is None:
            new_buf = g.clone()
        else:
            new_buf = buf * momentum             # a new tensor; buf itself is left alone
            new_buf.add_(g, alpha=1 - dampening)
        step = g + momentum * new_buf if nesterov else new_buf
    else:
        step = g
    new_p = p.clone()
    new_p.sub_(lr * step)
    return new_p, new_buf
'''))

# ==============================================================================================
# 06_putting_it_together: train_mlp
# ==============================================================================================
V.append(dict(assignment="06_putting_it_together", function="train_mlp",
    style="clones unpacked into four names, the part-2 formulas inline, out-of-place updates",
    added="",
    code='''def train_mlp(x, y, params, lr, steps):
    """Run `steps` steps of gradient descent on mse(relu(x W1ᵀ + b1) W2ᵀ + b2, y), by hand.

    Return (new_params, losses): the trained {"W1", "b1", "W2", "b2"} and the loss before each update.
    """
    W1, b1, W2, b2 = (params[k].clone() for k in ("W1", "b1", "W2", "b2"))
    losses = []
    for _ in range(steps):
        # forward
        z1 = x @ W1.T + b1
        h = torch.where(z1 > 0, z1, torch.zeros_like(z1))
        y_hat = h @ W2.T + b2
        loss = ((y_hat - y) ** 2).mean()
        losses.append(loss.item())
        # backward
        M = y_hat.numel()
        grad_y_hat = 2 * (y_hat - y) / M
        grad_W2 = grad_y_hat.T @ h
        grad_b2 = grad_y_hat.sum(0)
        grad_h = grad_y_hat @ W2
        grad_z1 = grad_h * (z1 > 0).to(z1.dtype)
        grad_W1 = grad_z1.T @ x
        grad_b1 = grad_z1.sum(0)
        # step
        W1 = W1 - lr * grad_W1
        b1 = b1 - lr * grad_b1
        W2 = W2 - lr * grad_W2
        b2 = b2 - lr * grad_b2
    return {"W1": W1, "b1": b1, "W2": W2, "b2": b2}, losses
'''))

V.append(dict(assignment="06_putting_it_together", function="train_mlp",
    style="parameters and gradients in dicts; the update is a dict comprehension over the keys",
    added="",
    code='''def train_mlp(x, y, params, lr, steps):
    """Run `steps` steps of gradient descent on mse(relu(x W1ᵀ + b1) W2ᵀ + b2, y), by hand.

    Return (new_params, losses): the trained {"W1", "b1", "W2", "b2"} and the loss before each update.
    """
    p = {name: t.clone() for name, t in params.items()}
    losses = []
    for step in range(steps):
        z1 = x @ p["W1"].T + p["b1"]
        h = z1.clamp(min=0)
        y_hat = h @ p["W2"].T + p["b2"]
        losses.append(((y_hat - y) ** 2).mean().item())

        grad_y_hat = 2 * (y_hat - y) / y_hat.numel()
        grad_h = grad_y_hat @ p["W2"]
        grad_z1 = grad_h * (z1 > 0)
        grads = {"W2": grad_y_hat.T @ h, "b2": grad_y_hat.sum(dim=0),
                 "W1": grad_z1.T @ x, "b1": grad_z1.sum(dim=0)}
        p = {name: p[name] - lr * grads[name] for name in p}
    return p, losses
'''))

V.append(dict(assignment="06_putting_it_together", function="train_mlp",
    style="mimics PyTorch: gradients stored in each clone's .grad, then a no_grad loop p -= lr * p.grad; p.grad = None",
    added="",
    code='''def train_mlp(x, y, params, lr, steps):
    """Run `steps` steps of gradient descent on mse(relu(x W1ᵀ + b1) W2ᵀ + b2, y), by hand.

    Return (new_params, losses): the trained {"W1", "b1", "W2", "b2"} and the loss before each update.
    """
    W1, b1 = params["W1"].clone(), params["b1"].clone()
    W2, b2 = params["W2"].clone(), params["b2"].clone()
    losses = []
    for _ in range(steps):
        z1 = x @ W1.T + b1
        h = torch.relu(z1)
        y_hat = h @ W2.T + b2
        loss = ((y_hat - y) ** 2).mean()
        losses.append(loss.item())

        grad_y_hat = 2 * (y_hat - y) / y_hat.numel()
        W2.grad = grad_y_hat.T @ h                     # as backward() would fill .grad
        b2.grad = grad_y_hat.sum(0)
        grad_z1 = (grad_y_hat @ W2) * (z1 > 0).to(z1.dtype)
        W1.grad = grad_z1.T @ x
        b1.grad = grad_z1.sum(0)

        with torch.no_grad():                          # as optimizer.step() then zero_grad()
            for t in (W1, b1, W2, b2):
                t -= lr * t.grad
                t.grad = None
    return {"W1": W1, "b1": b1, "W2": W2, "b2": b2}, losses
'''))

V.append(dict(assignment="06_putting_it_together", function="train_mlp",
    style="tensors in a list updated through .data in a zip(params, grads) loop",
    added="",
    code='''def train_mlp(x, y, params, lr, steps):
    """Run `steps` steps of gradient descent on mse(relu(x W1ᵀ + b1) W2ᵀ + b2, y), by hand.

    Return (new_params, losses): the trained {"W1", "b1", "W2", "b2"} and the loss before each update.
    """
    names = ["W1", "b1", "W2", "b2"]
    tensors = [params[n].detach().clone() for n in names]
    W1, b1, W2, b2 = tensors                 # the same objects as in the list
    losses = []
    for _ in range(steps):
        z1 = x @ W1.T + b1
        h = torch.relu(z1)
        y_hat = h @ W2.T + b2
        losses.append(float(((y_hat - y) ** 2).mean()))

        grad_y_hat = 2.0 * (y_hat - y) / y_hat.numel()
        grad_h = grad_y_hat @ W2
        grad_z1 = grad_h * (z1 > 0).to(grad_h.dtype)
        grads = [grad_z1.T @ x, grad_z1.sum(0), grad_y_hat.T @ h, grad_y_hat.sum(0)]
        for t, g in zip(tensors, grads):
            t.data -= lr * g                 # W1, b1, ... see the change: they are these tensors
    return dict(zip(names, tensors)), losses
'''))

V.append(dict(assignment="06_putting_it_together", function="train_mlp",
    style="forward and backward as helper functions in an added cell returning tuples; loop with itertools.repeat",
    added='''def mlp_forward(x, W1, b1, W2, b2):
    """Return (z1, h, y_hat) for the two-layer network."""
    z1 = x @ W1.T + b1
    h = torch.relu(z1)
    return z1, h, h @ W2.T + b2


def mlp_gradients(x, y, z1, h, y_hat, W2):
    """Return (grad_W1, grad_b1, grad_W2, grad_b2) by the chain rule, for the MSE loss."""
    grad_y_hat = 2 * (y_hat - y) / y_hat.numel()
    grad_W2, grad_b2 = grad_y_hat.T @ h, grad_y_hat.sum(0)
    grad_h = grad_y_hat @ W2
    grad_z1 = grad_h * (z1 > 0).to(z1.dtype)
    return grad_z1.T @ x, grad_z1.sum(0), grad_W2, grad_b2
''',
    code='''import itertools


def train_mlp(x, y, params, lr, steps):
    """Run `steps` steps of gradient descent on mse(relu(x W1ᵀ + b1) W2ᵀ + b2, y), by hand.

    Return (new_params, losses): the trained {"W1", "b1", "W2", "b2"} and the loss before each update.
    """
    current = tuple(params[k].clone() for k in ("W1", "b1", "W2", "b2"))
    losses = []
    for _ in itertools.repeat(None, steps):
        z1, h, y_hat = mlp_forward(x, *current)
        losses.append(((y_hat - y) ** 2).mean().item())
        grads = mlp_gradients(x, y, z1, h, y_hat, current[2])
        current = tuple(t - lr * g for t, g in zip(current, grads))
    W1, b1, W2, b2 = current
    return {"W1": W1, "b1": b1, "W2": W2, "b2": b2}, losses
'''))

V.append(dict(assignment="06_putting_it_together", function="train_mlp",
    style="F.mse_loss for the loss value only, detach().clone() copies, in-place sub_ under torch.no_grad() via enumerate",
    added="",
    code='''def train_mlp(x, y, params, lr, steps):
    """Run `steps` steps of gradient descent on mse(relu(x W1ᵀ + b1) W2ᵀ + b2, y), by hand.

    Return (new_params, losses): the trained {"W1", "b1", "W2", "b2"} and the loss before each update.
    """
    keys = ("W1", "b1", "W2", "b2")
    new = {k: params[k].detach().clone() for k in keys}
    losses = []
    with torch.no_grad():
        for step in range(steps):
            W1, b1, W2, b2 = (new[k] for k in keys)
            z1 = x @ W1.T + b1
            h = torch.relu(z1)
            y_hat = h @ W2.T + b2
            losses.append(F.mse_loss(y_hat, y).item())      # the value only; gradients below are by hand

            grad_y_hat = 2 * (y_hat - y) / y_hat.numel()
            grad_z1 = (grad_y_hat @ W2) * (z1 > 0).to(z1.dtype)
            grads = (grad_z1.T @ x, grad_z1.sum(0), grad_y_hat.T @ h, grad_y_hat.sum(0))
            for i, k in enumerate(keys):
                new[k].sub_(lr * grads[i])
    return new, losses
'''))

V.append(dict(assignment="06_putting_it_together", function="train_mlp",
    style="copy.deepcopy of the params dict, math.prod for M, functools.reduce summing over the batch",
    added="",
    code='''import copy
import functools
import math
import operator


def train_mlp(x, y, params, lr, steps):
    """Run `steps` steps of gradient descent on mse(relu(x W1ᵀ + b1) W2ᵀ + b2, y), by hand.

    Return (new_params, losses): the trained {"W1", "b1", "W2", "b2"} and the loss before each update.
    """
    p = copy.deepcopy(params)                       # new tensors: params stays as it was
    losses = []
    for _ in range(steps):
        z1 = x @ p["W1"].T + p["b1"]
        mask = (z1 > 0).to(z1.dtype)
        h = z1 * mask
        y_hat = h @ p["W2"].T + p["b2"]
        M = math.prod(y_hat.shape)
        losses.append(((y_hat - y) ** 2).sum().item() / M)

        grad_y_hat = 2 * (y_hat - y) / M
        grad_z1 = (grad_y_hat @ p["W2"]) * mask
        grad = {
            "W2": grad_y_hat.T @ h,
            "b2": functools.reduce(operator.add, grad_y_hat, torch.zeros_like(p["b2"])),
            "W1": grad_z1.T @ x,
            "b1": functools.reduce(operator.add, grad_z1, torch.zeros_like(p["b1"])),
        }
        for k in p:
            p[k] = p[k] - lr * grad[k]
    return p, losses
'''))

# ==============================================================================================
# 06_putting_it_together: layer_grad_norms
# ==============================================================================================
V.append(dict(assignment="06_putting_it_together", function="layer_grad_norms",
    style="model.zero_grad(set_to_none=True), F.mse_loss(...).backward(), list comprehension over nn.Linear layers",
    added="",
    code='''def layer_grad_norms(model, x, y):
    """Return [‖∂L/∂W‖₂ for the weight W of each nn.Linear in model, in order], L = mse(model(x), y).

    Start from clean gradients: model's .grad may already be set by an earlier call, and backward()
    adds to it. Zero them first (model.zero_grad(set_to_none=True)), then call backward().
    """
    model.zero_grad(set_to_none=True)
    loss = F.mse_loss(model(x), y)
    loss.backward()
    return [layer.weight.grad.norm().item() for layer in model if isinstance(layer, nn.Linear)]
'''))

V.append(dict(assignment="06_putting_it_together", function="layer_grad_norms",
    style="p.grad = None for every parameter by hand; with torch.enable_grad(); torch.linalg.vector_norm",
    added="",
    code='''def layer_grad_norms(model, x, y):
    """Return [‖∂L/∂W‖₂ for the weight W of each nn.Linear in model, in order], L = mse(model(x), y).

    Start from clean gradients: model's .grad may already be set by an earlier call, and backward()
    adds to it. Zero them first (model.zero_grad(set_to_none=True)), then call backward().
    """
    for p in model.parameters():
        p.grad = None                       # what zero_grad(set_to_none=True) does
    with torch.enable_grad():               # works even if called inside torch.no_grad()
        F.mse_loss(model(x), y).backward()
    norms = []
    for module in model.modules():
        if isinstance(module, nn.Linear):
            norms.append(float(torch.linalg.vector_norm(module.weight.grad)))
    return norms
'''))

V.append(dict(assignment="06_putting_it_together", function="layer_grad_norms",
    style="existing gradients zeroed in place with p.grad.zero_(); norm as sqrt of the sum of squares; prints each layer",
    added="",
    code='''def layer_grad_norms(model, x, y):
    """Return [‖∂L/∂W‖₂ for the weight W of each nn.Linear in model, in order], L = mse(model(x), y).

    Start from clean gradients: model's .grad may already be set by an earlier call, and backward()
    adds to it. Zero them first (model.zero_grad(set_to_none=True)), then call backward().
    """
    for p in model.parameters():
        if p.grad is not None:
            p.grad.zero_()              # backward() adds to .grad, so start from 0
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    norms = []
    linears = [m for m in model if isinstance(m, nn.Linear)]
    for i, layer in enumerate(linears, start=1):
        norm = layer.weight.grad.pow(2).sum().sqrt().item()
        print(f"layer {i}: ||dL/dW|| = {norm:.3e}")
        norms.append(norm)
    return norms
'''))

V.append(dict(assignment="06_putting_it_together", function="layer_grad_norms",
    style="a dataclass record per nn.Linear layer (index, name, norm), returned as the list of norms",
    added="",
    code='''from dataclasses import dataclass


@dataclass
class LayerGrad:
    index: int
    name: str
    norm: float


def layer_grad_norms(model, x, y):
    """Return [‖∂L/∂W‖₂ for the weight W of each nn.Linear in model, in order], L = mse(model(x), y).

    Start from clean gradients: model's .grad may already be set by an earlier call, and backward()
    adds to it. Zero them first (model.zero_grad(set_to_none=True)), then call backward().
    """
    model.zero_grad(set_to_none=True)
    F.mse_loss(model(x), y).backward()
    records = [LayerGrad(i, name, module.weight.grad.norm().item())
               for i, (name, module) in enumerate(model.named_children())
               if isinstance(module, nn.Linear)]
    return [r.norm for r in records]
'''))

V.append(dict(assignment="06_putting_it_together", function="layer_grad_norms",
    style="a small helper class (added cell) holding the Linear weights, clearing grads and reading norms",
    added='''class LinearWeights:
    """The weights of a model's nn.Linear layers, first layer first."""

    def __init__(self, model):
        self.model = model
        self.weights = [m.weight for m in model.modules() if isinstance(m, nn.Linear)]

    def clear_grads(self):
        for p in self.model.parameters():
            p.grad = None

    def grad_norms(self):
        return [w.grad.norm().item() for w in self.weights]
''',
    code='''def layer_grad_norms(model, x, y):
    """Return [‖∂L/∂W‖₂ for the weight W of each nn.Linear in model, in order], L = mse(model(x), y).

    Start from clean gradients: model's .grad may already be set by an earlier call, and backward()
    adds to it. Zero them first (model.zero_grad(set_to_none=True)), then call backward().
    """
    weights = LinearWeights(model)
    weights.clear_grads()
    F.mse_loss(model(x), y).backward()
    return weights.grad_norms()
'''))

V.append(dict(assignment="06_putting_it_together", function="layer_grad_norms",
    style="filter/map with lambdas, detached inputs, math.sqrt of a plain-Python sum over .tolist()",
    added="",
    code='''import math


def layer_grad_norms(model, x, y):
    """Return [‖∂L/∂W‖₂ for the weight W of each nn.Linear in model, in order], L = mse(model(x), y).

    Start from clean gradients: model's .grad may already be set by an earlier call, and backward()
    adds to it. Zero them first (model.zero_grad(set_to_none=True)), then call backward().
    """
    model.zero_grad(set_to_none=True)
    prediction = model(x.detach())
    F.mse_loss(prediction, y.detach()).backward()
    linears = filter(lambda m: isinstance(m, nn.Linear), model)
    l2 = lambda t: math.sqrt(sum(v * v for v in t.flatten().tolist()))
    return list(map(lambda m: l2(m.weight.grad), linears))
'''))

# ==============================================================================================
# 07_custom_autograd: LinearFunction
# ==============================================================================================
V.append(dict(assignment="07_custom_autograd", function="LinearFunction",
    style="the PyTorch-docs pattern: grad_x = grad_W = grad_b = None, then fill each one if needs_input_grad",
    added="",
    code='''class LinearFunction(torch.autograd.Function):
    """y = x W^T + b for x (N, in), W (out, in), b (out,) or None, with a backward written by hand."""

    @staticmethod
    def forward(ctx, x, W, b):
        """Return x @ W.T + b (no bias when b is None); save what backward needs in ctx."""
        ctx.save_for_backward(x, W)
        y = x @ W.T
        if b is not None:
            y = y + b
        return y

    @staticmethod
    def backward(ctx, grad_out):
        """Return (grad_x, grad_W, grad_b) = (grad_out W, grad_out^T x, grad_out summed over the batch).

        None for each input with ctx.needs_input_grad False, and for b when it is None. No autograd here.
        """
        x, W = ctx.saved_tensors
        grad_x = grad_W = grad_b = None
        if ctx.needs_input_grad[0]:
            grad_x = grad_out @ W
        if ctx.needs_input_grad[1]:
            grad_W = grad_out.T @ x
        if ctx.needs_input_grad[2]:
            grad_b = grad_out.sum(0)
        return grad_x, grad_W, grad_b
'''))

V.append(dict(assignment="07_custom_autograd", function="LinearFunction",
    style="@once_differentiable, a plain bool flag ctx.has_bias, needs_input_grad unpacked, conditional expressions",
    added="",
    code='''from torch.autograd.function import once_differentiable


class LinearFunction(torch.autograd.Function):
    """y = x W^T + b for x (N, in), W (out, in), b (out,) or None, with a backward written by hand."""

    @staticmethod
    def forward(ctx, x, W, b):
        """Return x @ W.T + b (no bias when b is None); save what backward needs in ctx."""
        ctx.has_bias = b is not None               # a plain Python flag may live on ctx
        ctx.save_for_backward(x, W)
        return F.linear(x, W, b)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out):
        """Return (grad_x, grad_W, grad_b) = (grad_out W, grad_out^T x, grad_out summed over the batch).

        None for each input with ctx.needs_input_grad False, and for b when it is None. No autograd here.
        """
        x, W = ctx.saved_tensors
        want_x, want_W, want_b = ctx.needs_input_grad
        grad_x = grad_out.mm(W) if want_x else None
        grad_W = grad_out.t().mm(x) if want_W else None
        grad_b = grad_out.sum(dim=0) if (want_b and ctx.has_bias) else None
        return grad_x, grad_W, grad_b
'''))

V.append(dict(assignment="07_custom_autograd", function="LinearFunction",
    style="torch.addmm / x.mm in forward; backward written with broadcasting sums only (no matrix product)",
    added="",
    code='''class LinearFunction(torch.autograd.Function):
    """y = x W^T + b for x (N, in), W (out, in), b (out,) or None, with a backward written by hand."""

    @staticmethod
    def forward(ctx, x, W, b):
        """Return x @ W.T + b (no bias when b is None); save what backward needs in ctx."""
        ctx.save_for_backward(x, W)
        if b is None:
            return x.mm(W.t())
        return torch.addmm(b, x, W.t())

    @staticmethod
    def backward(ctx, grad_out):
        """Return (grad_x, grad_W, grad_b) = (grad_out W, grad_out^T x, grad_out summed over the batch).

        None for each input with ctx.needs_input_grad False, and for b when it is None. No autograd here.
        """
        x, W = ctx.saved_tensors
        G = grad_out
        grad_x = (G[:, :, None] * W[None, :, :]).sum(1) if ctx.needs_input_grad[0] else None   # (N, in)
        grad_W = (G[:, :, None] * x[:, None, :]).sum(0) if ctx.needs_input_grad[1] else None   # (out, in)
        grad_b = G.sum(0) if ctx.needs_input_grad[2] else None                                 # (out,)
        return grad_x, grad_W, grad_b
'''))

V.append(dict(assignment="07_custom_autograd", function="LinearFunction",
    style="gradients built in a list from a tuple of lambdas, zipped with ctx.needs_input_grad",
    added="",
    code='''class LinearFunction(torch.autograd.Function):
    """y = x W^T + b for x (N, in), W (out, in), b (out,) or None, with a backward written by hand."""

    @staticmethod
    def forward(ctx, x, W, b):
        """Return x @ W.T + b (no bias when b is None); save what backward needs in ctx."""
        ctx.save_for_backward(x, W)
        out = torch.matmul(x, W.transpose(0, 1))
        return out if b is None else out + b

    @staticmethod
    def backward(ctx, grad_out):
        """Return (grad_x, grad_W, grad_b) = (grad_out W, grad_out^T x, grad_out summed over the batch).

        None for each input with ctx.needs_input_grad False, and for b when it is None. No autograd here.
        """
        x, W = ctx.saved_tensors
        formulas = (
            lambda: grad_out @ W,            # dL/dx
            lambda: grad_out.T @ x,          # dL/dW
            lambda: grad_out.sum(dim=0),     # dL/db
        )
        grads = [f() if needed else None for f, needed in zip(formulas, ctx.needs_input_grad)]
        return tuple(grads)
'''))

V.append(dict(assignment="07_custom_autograd", function="LinearFunction",
    style="forward asserts the feature sizes and adds b in place to the fresh mm result; backward uses torch.mm / torch.sum, early return when nothing is needed",
    added="",
    code='''class LinearFunction(torch.autograd.Function):
    """y = x W^T + b for x (N, in), W (out, in), b (out,) or None, with a backward written by hand."""

    @staticmethod
    def forward(ctx, x, W, b):
        """Return x @ W.T + b (no bias when b is None); save what backward needs in ctx."""
        assert x.shape[-1] == W.shape[1], f"x has {x.shape[-1]} features, W expects {W.shape[1]}"
        ctx.save_for_backward(x, W)
        y = torch.mm(x, W.T)
        if b is not None:
            y += b                     # y is a fresh tensor from mm: adding in place is fine
        return y

    @staticmethod
    def backward(ctx, grad_out):
        """Return (grad_x, grad_W, grad_b) = (grad_out W, grad_out^T x, grad_out summed over the batch).

        None for each input with ctx.needs_input_grad False, and for b when it is None. No autograd here.
        """
        if not any(ctx.needs_input_grad):
            return None, None, None
        x, W = ctx.saved_tensors
        need = ctx.needs_input_grad
        return (torch.mm(grad_out, W) if need[0] else None,
                torch.mm(grad_out.T, x) if need[1] else None,
                torch.sum(grad_out, dim=0) if need[2] else None)
'''))

# ==============================================================================================
# 07_custom_autograd: FakeQuantize
# ==============================================================================================
V.append(dict(assignment="07_custom_autograd", function="FakeQuantize",
    style="forward saves the bool mask of the rounded value; backward multiplies grad_out by it",
    added="",
    code='''class FakeQuantize(torch.autograd.Function):
    """Round w to the int8 grid of step scale (forward); pass the gradient straight through (backward)."""

    @staticmethod
    def forward(ctx, w, scale):
        """Return scale * clamp(round(w / scale), -128, 127), in w's dtype; save what backward needs."""
        k = torch.round(w / scale)
        ctx.save_for_backward((k >= -128) & (k <= 127))
        return scale * torch.clamp(k, -128, 127)

    @staticmethod
    def backward(ctx, grad_out):
        """Return (grad_w, None): grad_out where -128 <= round(w / scale) <= 127, else 0; None for scale."""
        inside, = ctx.saved_tensors
        return grad_out * inside, None
'''))

V.append(dict(assignment="07_custom_autograd", function="FakeQuantize",
    style="forward saves w and puts the float scale on ctx; backward recomputes the rounding and uses torch.where",
    added="",
    code='''class FakeQuantize(torch.autograd.Function):
    """Round w to the int8 grid of step scale (forward); pass the gradient straight through (backward)."""

    @staticmethod
    def forward(ctx, w, scale):
        """Return scale * clamp(round(w / scale), -128, 127), in w's dtype; save what backward needs."""
        ctx.save_for_backward(w)
        ctx.scale = scale                     # a Python float: an attribute of ctx
        return scale * torch.round(w / scale).clamp(-128, 127)

    @staticmethod
    def backward(ctx, grad_out):
        """Return (grad_w, None): grad_out where -128 <= round(w / scale) <= 127, else 0; None for scale."""
        (w,) = ctx.saved_tensors
        k = torch.round(w / ctx.scale)
        passes = (k >= -128) & (k <= 127)
        grad_w = torch.where(passes, grad_out, torch.zeros_like(grad_out))
        return grad_w, None
'''))

V.append(dict(assignment="07_custom_autograd", function="FakeQuantize",
    style="@once_differentiable; saves the rounded integers; backward masked_fill of the outside entries",
    added="",
    code='''from torch.autograd.function import once_differentiable

QMIN, QMAX = -128, 127          # the int8 range


class FakeQuantize(torch.autograd.Function):
    """Round w to the int8 grid of step scale (forward); pass the gradient straight through (backward)."""

    @staticmethod
    def forward(ctx, w, scale):
        """Return scale * clamp(round(w / scale), -128, 127), in w's dtype; save what backward needs."""
        rounded = torch.round(w / scale)
        ctx.save_for_backward(rounded)
        return torch.clamp(rounded, QMIN, QMAX) * scale

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out):
        """Return (grad_w, None): grad_out where -128 <= round(w / scale) <= 127, else 0; None for scale."""
        rounded, = ctx.saved_tensors
        outside = (rounded < QMIN) | (rounded > QMAX)
        return grad_out.masked_fill(outside, 0.0), None
'''))

V.append(dict(assignment="07_custom_autograd", function="FakeQuantize",
    style="helper in an added cell returning (rounded, q); mask with .ge/.le/logical_and cast to grad_out's dtype",
    added='''def int8_grid(w, scale):
    """Return (round(w / scale), the fake-quantized weight scale * clamp(round(w / scale), -128, 127))."""
    rounded = torch.round(w / scale)
    return rounded, scale * torch.clamp(rounded, min=-128, max=127)
''',
    code='''class FakeQuantize(torch.autograd.Function):
    """Round w to the int8 grid of step scale (forward); pass the gradient straight through (backward)."""

    @staticmethod
    def forward(ctx, w, scale):
        """Return scale * clamp(round(w / scale), -128, 127), in w's dtype; save what backward needs."""
        rounded, q = int8_grid(w, scale)
        mask = rounded.ge(-128).logical_and(rounded.le(127))
        ctx.save_for_backward(mask)
        return q

    @staticmethod
    def backward(ctx, grad_out):
        """Return (grad_w, None): grad_out where -128 <= round(w / scale) <= 127, else 0; None for scale."""
        mask = ctx.saved_tensors[0]
        grad_w = grad_out * mask.to(grad_out.dtype)
        return grad_w, None
'''))

# ==============================================================================================
# 07_custom_autograd: train_quantized
# ==============================================================================================
V.append(dict(assignment="07_custom_autograd", function="train_quantized",
    style="as the exercise reads: detach().clone().requires_grad_() copies, one SGD, zero_grad / forward / item / backward / step",
    added="",
    code='''def train_quantized(x, y, W, b, scale, lr, steps):
    """Train a linear layer whose weight is fake-quantized in the forward pass; return (W_trained, b_trained, losses).

    Float leaf copies of W and b (shadow weights), torch.optim.SGD(lr), MSE loss; losses are the floats before each step.
    """
    W_ = W.detach().clone().requires_grad_()
    b_ = b.detach().clone().requires_grad_()
    optimizer = torch.optim.SGD([W_, b_], lr=lr)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        y_hat = LinearFunction.apply(x, FakeQuantize.apply(W_, scale), b_)
        loss = F.mse_loss(y_hat, y)
        losses.append(loss.item())
        loss.backward()
        optimizer.step()
    return W_, b_, losses
'''))

V.append(dict(assignment="07_custom_autograd", function="train_quantized",
    style="gradients cleared by hand with p.grad = None over the list of shadow weights",
    added="",
    code='''def train_quantized(x, y, W, b, scale, lr, steps):
    """Train a linear layer whose weight is fake-quantized in the forward pass; return (W_trained, b_trained, losses).

    Float leaf copies of W and b (shadow weights), torch.optim.SGD(lr), MSE loss; losses are the floats before each step.
    """
    shadow = [W.clone().detach().requires_grad_(True), b.clone().detach().requires_grad_(True)]
    opt = torch.optim.SGD(shadow, lr=lr)
    losses = []
    for step in range(steps):
        for p in shadow:
            p.grad = None                          # same as opt.zero_grad()
        W_q = FakeQuantize.apply(shadow[0], scale)
        loss = F.mse_loss(LinearFunction.apply(x, W_q, shadow[1]), y)
        losses.append(loss.item())
        loss.backward()
        opt.step()
    W_trained, b_trained = shadow
    return W_trained, b_trained, losses
'''))

V.append(dict(assignment="07_custom_autograd", function="train_quantized",
    style="nn.Parameter shadow weights, zero_grad(set_to_none=False), the loop inside torch.enable_grad()",
    added="",
    code='''def train_quantized(x, y, W, b, scale, lr, steps):
    """Train a linear layer whose weight is fake-quantized in the forward pass; return (W_trained, b_trained, losses).

    Float leaf copies of W and b (shadow weights), torch.optim.SGD(lr), MSE loss; losses are the floats before each step.
    """
    W_ = nn.Parameter(W.detach().clone())         # a leaf that requires grad
    b_ = nn.Parameter(b.detach().clone())
    sgd = torch.optim.SGD([W_, b_], lr=lr)
    losses = []
    with torch.enable_grad():                      # in case the caller is inside torch.no_grad()
        for _ in range(steps):
            sgd.zero_grad(set_to_none=False)       # zeros in place (nothing to do on the first step)
            out = LinearFunction.apply(x, FakeQuantize.apply(W_, scale), b_)
            loss = F.mse_loss(out, y)
            losses.append(loss.item())
            loss.backward()
            sgd.step()
    return W_, b_, losses
'''))

V.append(dict(assignment="07_custom_autograd", function="train_quantized",
    style="inner closure for one step returning loss.item(); p.grad.zero_() when set; losses from a list comprehension",
    added="",
    code='''def train_quantized(x, y, W, b, scale, lr, steps):
    """Train a linear layer whose weight is fake-quantized in the forward pass; return (W_trained, b_trained, losses).

    Float leaf copies of W and b (shadow weights), torch.optim.SGD(lr), MSE loss; losses are the floats before each step.
    """
    W_ = W.detach().clone()
    W_.requires_grad_(True)
    b_ = b.detach().clone()
    b_.requires_grad_(True)
    optimizer = torch.optim.SGD([W_, b_], lr=lr)
    quantize = lambda w: FakeQuantize.apply(w, scale)

    def one_step():
        for p in (W_, b_):
            if p.grad is not None:
                p.grad.zero_()
        loss = F.mse_loss(LinearFunction.apply(x, quantize(W_), b_), y)
        value = loss.item()              # before the step
        loss.backward()
        optimizer.step()
        return value

    losses = [one_step() for _ in range(steps)]
    return W_, b_, losses
'''))

V.append(dict(assignment="07_custom_autograd", function="train_quantized",
    style="shadow weights kept in a dict, optimizer over dict values, requires_grad set by attribute assignment",
    added="",
    code='''def train_quantized(x, y, W, b, scale, lr, steps):
    """Train a linear layer whose weight is fake-quantized in the forward pass; return (W_trained, b_trained, losses).

    Float leaf copies of W and b (shadow weights), torch.optim.SGD(lr), MSE loss; losses are the floats before each step.
    """
    shadow = {"W": W.detach().clone(), "b": b.detach().clone()}
    for t in shadow.values():
        t.requires_grad = True
    optimizer = torch.optim.SGD(list(shadow.values()), lr=lr)
    losses: list[float] = []
    for _ in range(steps):
        optimizer.zero_grad()
        prediction = LinearFunction.apply(x, FakeQuantize.apply(shadow["W"], scale), shadow["b"])
        loss = F.mse_loss(prediction, y)
        losses.append(float(loss.item()))
        loss.backward()
        optimizer.step()
    return shadow["W"], shadow["b"], losses
'''))

V.append(dict(assignment="07_custom_autograd", function="train_quantized",
    style="copies via torch.tensor(W.tolist(), requires_grad=True); prints the first and last loss",
    added="",
    code='''def train_quantized(x, y, W, b, scale, lr, steps):
    """Train a linear layer whose weight is fake-quantized in the forward pass; return (W_trained, b_trained, losses).

    Float leaf copies of W and b (shadow weights), torch.optim.SGD(lr), MSE loss; losses are the floats before each step.
    """
    W_ = torch.tensor(W.tolist(), dtype=W.dtype, requires_grad=True)    # a brand-new leaf with W's values
    b_ = torch.tensor(b.tolist(), dtype=b.dtype, requires_grad=True)
    optimizer = torch.optim.SGD([W_, b_], lr=lr)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        q = FakeQuantize.apply(W_, scale)
        loss = F.mse_loss(LinearFunction.apply(x, q, b_), y)
        losses.append(loss.item())
        loss.backward()
        optimizer.step()
    if losses:
        print(f"loss {losses[0]:.4f} -> {losses[-1]:.4f} in {steps} steps")
    return W_, b_, losses
'''))

# ==============================================================================================
# 07_custom_autograd: record_ops
# ==============================================================================================
V.append(dict(assignment="07_custom_autograd", function="record_ops",
    style="a TorchDispatchMode subclass at the top of the cell, its list made in __init__, func.namespace filter",
    added="",
    code='''from torch.utils._python_dispatch import TorchDispatchMode


class OpRecorder(TorchDispatchMode):
    """Notes str(func) of every aten operator run while the mode is active."""

    def __init__(self):
        super().__init__()
        self.ops = []                      # a new list for every recorder

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.namespace == "aten":
            self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


def record_ops(fn):
    """Call fn() under a TorchDispatchMode you write; return [str(func) for each aten operator it ran], in order.

    Leave out other namespaces (e.g. profiler.*); keep repeats; [] if fn runs no tensor operation.
    """
    recorder = OpRecorder()
    with recorder:
        fn()
    return recorder.ops
'''))

V.append(dict(assignment="07_custom_autograd", function="record_ops",
    style="mode class defined inside record_ops, appending to a local list through the closure",
    added="",
    code='''def record_ops(fn):
    """Call fn() under a TorchDispatchMode you write; return [str(func) for each aten operator it ran], in order.

    Leave out other namespaces (e.g. profiler.*); keep repeats; [] if fn runs no tensor operation.
    """
    from torch.utils._python_dispatch import TorchDispatchMode

    seen = []

    class Recorder(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = str(func)
            if name.startswith("aten."):
                seen.append(name)
            return func(*args, **(kwargs if kwargs is not None else {}))

    with Recorder():
        fn()
    return seen
'''))

V.append(dict(assignment="07_custom_autograd", function="record_ops",
    style="helper predicate is_aten in an added cell (func.name() starts with 'aten::'); `with Mode() as rec`",
    added='''from torch.utils._python_dispatch import TorchDispatchMode


def is_aten(func):
    """Whether an operator belongs to the aten namespace ("aten::mul.Tensor" as func.name())."""
    return func.name().startswith("aten::")


class AtenLog(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.names = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        if is_aten(func):
            self.names.append(str(func))
        return result
''',
    code='''def record_ops(fn):
    """Call fn() under a TorchDispatchMode you write; return [str(func) for each aten operator it ran], in order.

    Leave out other namespaces (e.g. profiler.*); keep repeats; [] if fn runs no tensor operation.
    """
    with AtenLog() as log:
        fn()
    return list(log.names)
'''))

V.append(dict(assignment="07_custom_autograd", function="record_ops",
    style="the mode records (namespace, name) pairs of every operator; a comprehension keeps the aten ones afterwards",
    added="",
    code='''from torch.utils._python_dispatch import TorchDispatchMode


class EverythingMode(TorchDispatchMode):
    """Keeps (namespace, str(func)) for every operator, of every namespace."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.calls.append((func.namespace, str(func)))
        kwargs = kwargs or {}
        return func(*args, **kwargs)


def record_ops(fn):
    """Call fn() under a TorchDispatchMode you write; return [str(func) for each aten operator it ran], in order.

    Leave out other namespaces (e.g. profiler.*); keep repeats; [] if fn runs no tensor operation.
    """
    mode = EverythingMode()
    with mode:
        fn()
    return [name for namespace, name in mode.calls if namespace == "aten"]
'''))


VARIANTS = V

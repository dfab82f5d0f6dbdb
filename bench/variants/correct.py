"""Correct, by-hand variants of the graded functions of the course notebooks (01-03, 05-07).

VARIANTS: a list of dicts {"assignment", "function", "style", "code", "added"}: "code" is a complete
answer cell, "added" the code of a helper cell the learner added above it ("" if none).
"""

V01 = []

# ----------------------------------------------------------------------------------------------
# 01_linear_algebra: matmul
# ----------------------------------------------------------------------------------------------
V01.append(dict(assignment="01_linear_algebra", function="matmul",
    style="three nested loops over i, j, t accumulating a 0-dim tensor; f-string ValueErrors",
    added="",
    code='''def matmul(A, B):
    """Return the (n, m) matrix product of A (n, k) and B (k, m): C[i, j] = sum_t A[i, t] * B[t, j].

    Raise ValueError if A or B is not 2-D or if A.shape[1] != B.shape[0].
    """
    if A.dim() != 2 or B.dim() != 2:
        raise ValueError(f"matmul needs two 2-D tensors, got {A.dim()}-D and {B.dim()}-D")
    n, k = A.shape
    k2, m = B.shape
    if k != k2:
        raise ValueError(f"inner sizes differ: A is {n}x{k} but B is {k2}x{m}")
    C = torch.zeros(n, m, dtype=A.dtype, device=A.device)
    for i in range(n):
        for j in range(m):
            total = torch.zeros((), dtype=A.dtype, device=A.device)
            for t in range(k):
                total = total + A[i, t] * B[t, j]
            C[i, j] = total
    return C
'''))

V01.append(dict(assignment="01_linear_algebra", function="matmul",
    style="vectorized broadcasting A[:, :, None] * B[None, :, :] summed over the middle axis",
    added="",
    code='''def matmul(A, B):
    """Return the (n, m) matrix product of A (n, k) and B (k, m): C[i, j] = sum_t A[i, t] * B[t, j].

    Raise ValueError if A or B is not 2-D or if A.shape[1] != B.shape[0].
    """
    if A.ndim != 2:
        raise ValueError(f"A must be 2-D, but it has shape {tuple(A.shape)}")
    if B.ndim != 2:
        raise ValueError(f"B must be 2-D, but it has shape {tuple(B.shape)}")
    if A.shape[1] != B.shape[0]:
        raise ValueError(f"cannot multiply {tuple(A.shape)} by {tuple(B.shape)}")
    products = A[:, :, None] * B[None, :, :]     # products[i, t, j] = A[i, t] * B[t, j]
    return products.sum(dim=1)
'''))

V01.append(dict(assignment="01_linear_algebra", function="matmul",
    style="plain Python on .tolist() with zip and math.fsum, back to a tensor of A's dtype",
    added="",
    code='''import math


def matmul(A, B):
    """Return the (n, m) matrix product of A (n, k) and B (k, m): C[i, j] = sum_t A[i, t] * B[t, j].

    Raise ValueError if A or B is not 2-D or if A.shape[1] != B.shape[0].
    """
    if len(A.shape) != 2 or len(B.shape) != 2:
        raise ValueError("both arguments must be 2-D matrices")
    n, k = A.shape
    if B.shape[0] != k:
        raise ValueError(f"inner sizes differ: {k} columns in A, {B.shape[0]} rows in B")
    m = B.shape[1]
    a_rows = A.tolist()
    b_cols = [list(col) for col in zip(*B.tolist())] if k > 0 else [[] for _ in range(m)]
    values = [[math.fsum(a * b for a, b in zip(row, col)) for col in b_cols] for row in a_rows]
    return torch.tensor(values, dtype=A.dtype, device=A.device).reshape(n, m)
'''))

V01.append(dict(assignment="01_linear_algebra", function="matmul",
    style="functools.reduce with operator.add over the k outer products column(A) * row(B)",
    added="",
    code='''import functools
import operator


def matmul(A, B):
    """Return the (n, m) matrix product of A (n, k) and B (k, m): C[i, j] = sum_t A[i, t] * B[t, j].

    Raise ValueError if A or B is not 2-D or if A.shape[1] != B.shape[0].
    """
    if A.dim() != 2 or B.dim() != 2 or A.shape[1] != B.shape[0]:
        raise ValueError(f"matmul: cannot multiply {tuple(A.shape)} by {tuple(B.shape)}")
    n, k = A.shape
    m = B.shape[1]
    start = torch.zeros(n, m, dtype=A.dtype, device=A.device)
    # C = sum over t of (column t of A) times (row t of B)
    outer_products = (A[:, t].unsqueeze(1) * B[t, :].unsqueeze(0) for t in range(k))
    return functools.reduce(operator.add, outer_products, start)
'''))

V01.append(dict(assignment="01_linear_algebra", function="matmul",
    style="helper cell with a validation function; one loop over rows, row i of A times B, written into new_zeros",
    added='''def require_matrix(name, T):
    """Raise ValueError unless T is a 2-D tensor."""
    if T.dim() != 2:
        raise ValueError(f"{name} should be a 2-D tensor, got shape {tuple(T.shape)}")
''',
    code='''def matmul(A, B):
    """Return the (n, m) matrix product of A (n, k) and B (k, m): C[i, j] = sum_t A[i, t] * B[t, j].

    Raise ValueError if A or B is not 2-D or if A.shape[1] != B.shape[0].
    """
    require_matrix("A", A)
    require_matrix("B", B)
    if A.shape[1] != B.shape[0]:
        raise ValueError(f"inner sizes do not match: {A.shape[1]} != {B.shape[0]}")
    C = A.new_zeros(A.shape[0], B.shape[1])
    for i in range(A.shape[0]):
        # row i of C: sum over t of A[i, t] * B[t, :]
        C[i] = (A[i].unsqueeze(1) * B).sum(dim=0)
    return C
'''))

V01.append(dict(assignment="01_linear_algebra", function="matmul",
    style="type hints, early return for empty sizes, list comprehension over columns + torch.stack, assert on the result",
    added="",
    code='''def matmul(A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
    """Return the (n, m) matrix product of A (n, k) and B (k, m): C[i, j] = sum_t A[i, t] * B[t, j].

    Raise ValueError if A or B is not 2-D or if A.shape[1] != B.shape[0].
    """
    if A.dim() != 2 or B.dim() != 2:
        raise ValueError(f"expected 2-D tensors, got shapes {tuple(A.shape)} and {tuple(B.shape)}")
    n, k = A.shape
    if k != B.shape[0]:
        raise ValueError(f"A has {k} columns but B has {B.shape[0]} rows")
    m = B.shape[1]
    if n == 0 or m == 0:
        return torch.zeros(n, m, dtype=A.dtype, device=A.device)
    columns = [(A * B[:, j]).sum(dim=1) for j in range(m)]   # column j of C: A times column j of B
    C = torch.stack(columns, dim=1)
    assert C.shape == (n, m)
    return C
'''))

# ----------------------------------------------------------------------------------------------
# 01_linear_algebra: linear_forward
# ----------------------------------------------------------------------------------------------
V01.append(dict(assignment="01_linear_algebra", function="linear_forward",
    style="unsqueeze(0) for a single sample, matmul(x, W.T), optional bias, squeeze(0) back",
    added="",
    code='''def linear_forward(x, W, b=None):
    """Return x Wᵀ + b, as nn.Linear does, using matmul.

    x: (N, in) or (in,); W: (out, in); b: (out,) or None. Result: (N, out), or (out,) for 1-D x.
    """
    single = x.dim() == 1
    batch = x.unsqueeze(0) if single else x
    y = matmul(batch, W.T)
    if b is not None:
        y = y + b
    if single:
        y = y.squeeze(0)
    return y
'''))

V01.append(dict(assignment="01_linear_algebra", function="linear_forward",
    style="early return by recursion for 1-D input; W.t() and torch.add",
    added="",
    code='''def linear_forward(x, W, b=None):
    """Return x Wᵀ + b, as nn.Linear does, using matmul.

    x: (N, in) or (in,); W: (out, in); b: (out,) or None. Result: (N, out), or (out,) for 1-D x.
    """
    if x.dim() == 1:
        return linear_forward(x.unsqueeze(0), W, b).squeeze(0)
    out = matmul(x, W.t())
    if b is None:
        return out
    return torch.add(out, b)
'''))

V01.append(dict(assignment="01_linear_algebra", function="linear_forward",
    style="helper cell (add_bias); reshape to (-1, in) and back to x.shape[:-1] + (out,)",
    added='''def add_bias(y, b):
    """Add the bias row b (out,) to every row of y (N, out); no bias when b is None."""
    if b is None:
        return y
    return y + b.reshape(1, -1)
''',
    code='''def linear_forward(x, W, b=None):
    """Return x Wᵀ + b, as nn.Linear does, using matmul.

    x: (N, in) or (in,); W: (out, in); b: (out,) or None. Result: (N, out), or (out,) for 1-D x.
    """
    n_out, n_in = W.shape
    rows = x.reshape(-1, n_in)                      # (N, in); a single sample becomes (1, in)
    y = add_bias(matmul(rows, W.transpose(0, 1)), b)
    return y.reshape(*x.shape[:-1], n_out)
'''))

V01.append(dict(assignment="01_linear_algebra", function="linear_forward",
    style="None-indexing x[None, :] and y[0]; in-place += of the bias on the fresh product",
    added="",
    code='''def linear_forward(x, W, b=None):
    """Return x Wᵀ + b, as nn.Linear does, using matmul.

    x: (N, in) or (in,); W: (out, in); b: (out,) or None. Result: (N, out), or (out,) for 1-D x.
    """
    is_vector = len(x.shape) == 1
    if is_vector:
        x = x[None, :]               # a batch of one (a new view; the caller's x is not changed)
    y = matmul(x, W.T)               # a new tensor, (N, out)
    if b is not None:
        y += b                       # in place on our own result only
    return y[0] if is_vector else y
'''))

V01.append(dict(assignment="01_linear_algebra", function="linear_forward",
    style="type hints with torch.Tensor | None, permute for the transpose, explicit expand of the bias, assert on shapes",
    added="",
    code='''def linear_forward(x: torch.Tensor, W: torch.Tensor, b: torch.Tensor | None = None) -> torch.Tensor:
    """Return x Wᵀ + b, as nn.Linear does, using matmul.

    x: (N, in) or (in,); W: (out, in); b: (out,) or None. Result: (N, out), or (out,) for 1-D x.
    """
    assert x.shape[-1] == W.shape[1], f"x has {x.shape[-1]} features but W expects {W.shape[1]}"
    batch = x if x.dim() == 2 else x.unsqueeze(0)
    y = matmul(batch, W.permute(1, 0))
    if b is not None:
        y = y + b.unsqueeze(0).expand(y.shape[0], -1)
    return y if x.dim() == 2 else y.squeeze(0)
'''))

V02 = []
A2 = "02_activation_functions"

# ----------------------------------------------------------------------------------------------
# collapse_linear
# ----------------------------------------------------------------------------------------------
V02.append(dict(assignment=A2, function="collapse_linear",
    style="the two formulas with @",
    added="",
    code='''def collapse_linear(W1, b1, W2, b2):
    """Return (W, b) with linear(linear(x, W1, b1), W2, b2) == linear(x, W, b) for every x.

    W1: (hidden, in), b1: (hidden,), W2: (out, hidden), b2: (out,). Result: W (out, in), b (out,).
    """
    W = W2 @ W1
    b = W2 @ b1 + b2
    return W, b
'''))

V02.append(dict(assignment=A2, function="collapse_linear",
    style="torch.mm for the matrix, torch.mv + torch.add for the bias",
    added="",
    code='''def collapse_linear(W1, b1, W2, b2):
    """Return (W, b) with linear(linear(x, W1, b1), W2, b2) == linear(x, W, b) for every x.

    W1: (hidden, in), b1: (hidden,), W2: (out, hidden), b2: (out,). Result: W (out, in), b (out,).
    """
    W = torch.mm(W2, W1)
    b = torch.add(torch.mv(W2, b1), b2)
    return (W, b)
'''))

V02.append(dict(assignment=A2, function="collapse_linear",
    style="row form of the derivation: W = (W1ᵀ W2ᵀ)ᵀ, b = b1 W2ᵀ + b2, with torch.matmul",
    added="",
    code='''def collapse_linear(W1, b1, W2, b2):
    """Return (W, b) with linear(linear(x, W1, b1), W2, b2) == linear(x, W, b) for every x.

    W1: (hidden, in), b1: (hidden,), W2: (out, hidden), b2: (out,). Result: W (out, in), b (out,).
    """
    W_T = torch.matmul(W1.T, W2.T)          # x W1ᵀ W2ᵀ = x (W2 W1)ᵀ
    b = torch.matmul(b1, W2.T) + b2         # the constant row b1 W2ᵀ + b2
    return W_T.T, b
'''))

V02.append(dict(assignment=A2, function="collapse_linear",
    style="torch.einsum for both products, type hints and a shape assert",
    added="",
    code='''def collapse_linear(W1: torch.Tensor, b1: torch.Tensor, W2: torch.Tensor, b2: torch.Tensor) -> tuple:
    """Return (W, b) with linear(linear(x, W1, b1), W2, b2) == linear(x, W, b) for every x.

    W1: (hidden, in), b1: (hidden,), W2: (out, hidden), b2: (out,). Result: W (out, in), b (out,).
    """
    assert W2.shape[1] == W1.shape[0] == b1.shape[0], "hidden sizes of the two layers differ"
    W = torch.einsum("oh,hi->oi", W2, W1)
    b = torch.einsum("oh,h->o", W2, b1) + b2
    return W, b
'''))

V02.append(dict(assignment=A2, function="collapse_linear",
    style="torch.addmv for b = b2 + W2 b1, W2.matmul(W1) as a tensor method",
    added="",
    code='''def collapse_linear(W1, b1, W2, b2):
    """Return (W, b) with linear(linear(x, W1, b1), W2, b2) == linear(x, W, b) for every x.

    W1: (hidden, in), b1: (hidden,), W2: (out, hidden), b2: (out,). Result: W (out, in), b (out,).
    """
    W = W2.matmul(W1)
    b = torch.addmv(b2, W2, b1)      # b2 + W2 @ b1
    return W, b
'''))

V02.append(dict(assignment=A2, function="collapse_linear",
    style="probe the composed map: b = f(0), columns of W = f(e_i) - b (helper cell defines the two-layer map)",
    added='''def two_layers(x, W1, b1, W2, b2):
    """The two linear layers applied one after the other, to a batch x (N, in)."""
    return (x @ W1.T + b1) @ W2.T + b2
''',
    code='''def collapse_linear(W1, b1, W2, b2):
    """Return (W, b) with linear(linear(x, W1, b1), W2, b2) == linear(x, W, b) for every x.

    W1: (hidden, in), b1: (hidden,), W2: (out, hidden), b2: (out,). Result: W (out, in), b (out,).
    """
    n_in = W1.shape[1]
    zero = torch.zeros(1, n_in, dtype=W1.dtype)
    b = two_layers(zero, W1, b1, W2, b2)[0]                     # f(0) = b
    basis = torch.eye(n_in, dtype=W1.dtype)                      # rows e_1, ..., e_in
    W = (two_layers(basis, W1, b1, W2, b2) - b).T                # f(e_i) - b = column i of W
    return W, b
'''))

# ----------------------------------------------------------------------------------------------
# relu
# ----------------------------------------------------------------------------------------------
V02.append(dict(assignment=A2, function="relu",
    style="torch.clamp(z, min=0)",
    added="",
    code='''def relu(z):
    """Return max(z, 0) for every entry of z (same shape and dtype as z)."""
    return torch.clamp(z, min=0)
'''))

V02.append(dict(assignment=A2, function="relu",
    style="torch.where with zeros_like",
    added="",
    code='''def relu(z):
    """Return max(z, 0) for every entry of z (same shape and dtype as z)."""
    return torch.where(z > 0, z, torch.zeros_like(z))
'''))

V02.append(dict(assignment=A2, function="relu",
    style="boolean mask multiplication z * (z > 0)",
    added="",
    code='''def relu(z):
    """Return max(z, 0) for every entry of z (same shape and dtype as z)."""
    mask = z > 0            # True where z is positive
    return z * mask
'''))

V02.append(dict(assignment=A2, function="relu",
    style="clone, then in-place masked assignment on the copy only",
    added="",
    code='''def relu(z):
    """Return max(z, 0) for every entry of z (same shape and dtype as z)."""
    out = z.clone()          # a fresh tensor: z itself stays as it is
    out[out < 0] = 0.0
    return out
'''))

V02.append(dict(assignment=A2, function="relu",
    style="torch.maximum against a zero tensor, with type hints",
    added="",
    code='''def relu(z: torch.Tensor) -> torch.Tensor:
    """Return max(z, 0) for every entry of z (same shape and dtype as z)."""
    zeros = torch.zeros_like(z)
    return torch.maximum(z, zeros)
'''))

V02.append(dict(assignment=A2, function="relu",
    style="masked_fill (method, out of place) with an assert on shape and dtype",
    added="",
    code='''def relu(z):
    """Return max(z, 0) for every entry of z (same shape and dtype as z)."""
    result = z.masked_fill(z < 0, 0.0)
    assert result.shape == z.shape and result.dtype == z.dtype
    return result
'''))

# ----------------------------------------------------------------------------------------------
# relu_derivative
# ----------------------------------------------------------------------------------------------
V02.append(dict(assignment=A2, function="relu_derivative",
    style="(z > 0).to(z.dtype)",
    added="",
    code='''def relu_derivative(z):
    """Return 1.0 where z > 0 and 0.0 elsewhere (also at z == 0, like torch.relu); same shape and dtype as z."""
    return (z > 0).to(z.dtype)
'''))

V02.append(dict(assignment=A2, function="relu_derivative",
    style="torch.where with ones_like / zeros_like",
    added="",
    code='''def relu_derivative(z):
    """Return 1.0 where z > 0 and 0.0 elsewhere (also at z == 0, like torch.relu); same shape and dtype as z."""
    return torch.where(z > 0, torch.ones_like(z), torch.zeros_like(z))
'''))

V02.append(dict(assignment=A2, function="relu_derivative",
    style="zeros_like, then boolean-index assignment of 1.0 on the fresh tensor",
    added="",
    code='''def relu_derivative(z):
    """Return 1.0 where z > 0 and 0.0 elsewhere (also at z == 0, like torch.relu); same shape and dtype as z."""
    slope = torch.zeros_like(z)
    slope[z > 0] = 1.0
    return slope
'''))

V02.append(dict(assignment=A2, function="relu_derivative",
    style="method chain z.gt(0).type_as(z)",
    added="",
    code='''def relu_derivative(z):
    """Return 1.0 where z > 0 and 0.0 elsewhere (also at z == 0, like torch.relu); same shape and dtype as z."""
    return z.gt(0).type_as(z)
'''))

V02.append(dict(assignment=A2, function="relu_derivative",
    style="in-place masked_fill_ on a fresh zero tensor; type hints",
    added="",
    code='''def relu_derivative(z: torch.Tensor) -> torch.Tensor:
    """Return 1.0 where z > 0 and 0.0 elsewhere (also at z == 0, like torch.relu); same shape and dtype as z."""
    positive = z > 0
    return torch.zeros_like(z).masked_fill_(positive, 1.0)
'''))

V02.append(dict(assignment=A2, function="relu_derivative",
    style="helper cell with the two slope values as constants; new_full tensors chosen with torch.where",
    added='''SLOPE_RIGHT = 1.0   # relu's slope for z > 0
SLOPE_LEFT = 0.0    # relu's slope for z <= 0 (torch.relu's convention at z == 0)
''',
    code='''def relu_derivative(z):
    """Return 1.0 where z > 0 and 0.0 elsewhere (also at z == 0, like torch.relu); same shape and dtype as z."""
    right = z.new_full(z.shape, SLOPE_RIGHT)
    left = z.new_full(z.shape, SLOPE_LEFT)
    return torch.where(z > 0, right, left)
'''))

# ----------------------------------------------------------------------------------------------
# sigmoid
# ----------------------------------------------------------------------------------------------
V02.append(dict(assignment=A2, function="sigmoid",
    style="the formula 1 / (1 + torch.exp(-z))",
    added="",
    code='''def sigmoid(z):
    """Return 1 / (1 + exp(-z)) for every entry of z (same shape and dtype as z)."""
    return 1 / (1 + torch.exp(-z))
'''))

V02.append(dict(assignment=A2, function="sigmoid",
    style="torch.reciprocal and torch.neg as functions",
    added="",
    code='''def sigmoid(z):
    """Return 1 / (1 + exp(-z)) for every entry of z (same shape and dtype as z)."""
    denominator = 1.0 + torch.exp(torch.neg(z))
    return torch.reciprocal(denominator)
'''))

V02.append(dict(assignment=A2, function="sigmoid",
    style="tensor methods, power -1: (1 + (-z).exp()).pow(-1)",
    added="",
    code='''def sigmoid(z):
    """Return 1 / (1 + exp(-z)) for every entry of z (same shape and dtype as z)."""
    return (1 + (-z).exp()).pow(-1)
'''))

V02.append(dict(assignment=A2, function="sigmoid",
    style="ones_like numerator and denominator, type hints",
    added="",
    code='''def sigmoid(z: torch.Tensor) -> torch.Tensor:
    """Return 1 / (1 + exp(-z)) for every entry of z (same shape and dtype as z)."""
    one = torch.ones_like(z)
    return one / (one + torch.exp(-z))
'''))

V02.append(dict(assignment=A2, function="sigmoid",
    style="helper cell computing exp(-z); torch.div / torch.add",
    added='''def exp_of_minus(z):
    """e^(-z), entry by entry."""
    return torch.exp(-z)
''',
    code='''def sigmoid(z):
    """Return 1 / (1 + exp(-z)) for every entry of z (same shape and dtype as z)."""
    return torch.div(torch.ones_like(z), torch.add(exp_of_minus(z), 1))
'''))

V02.append(dict(assignment=A2, function="sigmoid",
    style="method chain z.neg().exp().add(1).reciprocal() with an assert on dtype",
    added="",
    code='''def sigmoid(z):
    """Return 1 / (1 + exp(-z)) for every entry of z (same shape and dtype as z)."""
    s = z.neg().exp().add(1).reciprocal()
    assert s.dtype == z.dtype
    return s
'''))

# ----------------------------------------------------------------------------------------------
# sigmoid_derivative
# ----------------------------------------------------------------------------------------------
V02.append(dict(assignment=A2, function="sigmoid_derivative",
    style="s = sigmoid(z); s * (1 - s)",
    added="",
    code='''def sigmoid_derivative(z):
    """Return σ(z) * (1 - σ(z)), the derivative of the sigmoid at every entry of z."""
    s = sigmoid(z)
    return s * (1 - s)
'''))

V02.append(dict(assignment=A2, function="sigmoid_derivative",
    style="expanded form s - s ** 2",
    added="",
    code='''def sigmoid_derivative(z):
    """Return σ(z) * (1 - σ(z)), the derivative of the sigmoid at every entry of z."""
    s = sigmoid(z)
    return s - s ** 2
'''))

V02.append(dict(assignment=A2, function="sigmoid_derivative",
    style="tensor methods s.mul(s.neg().add(1))",
    added="",
    code='''def sigmoid_derivative(z):
    """Return σ(z) * (1 - σ(z)), the derivative of the sigmoid at every entry of z."""
    s = sigmoid(z)
    return s.mul(s.neg().add(1))
'''))

V02.append(dict(assignment=A2, function="sigmoid_derivative",
    style="the identity 1 - σ(z) = σ(-z): sigmoid(z) * sigmoid(-z)",
    added="",
    code='''def sigmoid_derivative(z):
    """Return σ(z) * (1 - σ(z)), the derivative of the sigmoid at every entry of z."""
    # 1 - σ(z) = e^(-z) / (1 + e^(-z)) = 1 / (1 + e^z) = σ(-z)
    return sigmoid(z) * sigmoid(-z)
'''))

V02.append(dict(assignment=A2, function="sigmoid_derivative",
    style="torch.addcmul(s, s, s, value=-1) = s - s·s; type hints",
    added="",
    code='''def sigmoid_derivative(z: torch.Tensor) -> torch.Tensor:
    """Return σ(z) * (1 - σ(z)), the derivative of the sigmoid at every entry of z."""
    s = sigmoid(z)
    return torch.addcmul(s, s, s, value=-1.0)
'''))

V02.append(dict(assignment=A2, function="sigmoid_derivative",
    style="helper cell one_minus(t); torch.mul",
    added='''def one_minus(t):
    """1 - t, entry by entry."""
    return 1.0 - t
''',
    code='''def sigmoid_derivative(z):
    """Return σ(z) * (1 - σ(z)), the derivative of the sigmoid at every entry of z."""
    s = sigmoid(z)
    return torch.mul(s, one_minus(s))
'''))

V03 = []
A3 = "03_chain_rule"

# ----------------------------------------------------------------------------------------------
# mse_loss
# ----------------------------------------------------------------------------------------------
V03.append(dict(assignment=A3, function="mse_loss",
    style="((y_hat - y) ** 2).mean()",
    added="",
    code='''def mse_loss(y_hat, y):
    """Return the mean over all entries of (y_hat - y) ** 2, as a 0-dim tensor (like F.mse_loss)."""
    return ((y_hat - y) ** 2).mean()
'''))

V03.append(dict(assignment=A3, function="mse_loss",
    style="sum of diff * diff divided by numel()",
    added="",
    code='''def mse_loss(y_hat, y):
    """Return the mean over all entries of (y_hat - y) ** 2, as a 0-dim tensor (like F.mse_loss)."""
    diff = y_hat - y
    M = diff.numel()
    return (diff * diff).sum() / M
'''))

V03.append(dict(assignment=A3, function="mse_loss",
    style="torch functions only: torch.mean(torch.square(torch.sub(...)))",
    added="",
    code='''def mse_loss(y_hat, y):
    """Return the mean over all entries of (y_hat - y) ** 2, as a 0-dim tensor (like F.mse_loss)."""
    return torch.mean(torch.square(torch.sub(y_hat, y)))
'''))

V03.append(dict(assignment=A3, function="mse_loss",
    style="flattened difference dotted with itself via @ (allowed in this notebook)",
    added="",
    code='''def mse_loss(y_hat, y):
    """Return the mean over all entries of (y_hat - y) ** 2, as a 0-dim tensor (like F.mse_loss)."""
    d = (y_hat - y).reshape(-1)       # all M entries in one vector
    return (d @ d) / d.numel()
'''))

V03.append(dict(assignment=A3, function="mse_loss",
    style="math.prod of the shape for M; pow(2).sum().div(M); type hints",
    added="",
    code='''import math


def mse_loss(y_hat: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Return the mean over all entries of (y_hat - y) ** 2, as a 0-dim tensor (like F.mse_loss)."""
    M = math.prod(y_hat.shape)           # number of entries (1 for a 0-dim tensor)
    return (y_hat - y).pow(2).sum().div(M)
'''))

V03.append(dict(assignment=A3, function="mse_loss",
    style="functools.reduce over the rows of the flattened squared error, helper cell for the row sums",
    added='''def squared_error_rows(y_hat, y):
    """Squared differences, one row per sample (a 0-dim or 1-D input is a single row)."""
    d = y_hat - y
    squared = d * d
    if squared.dim() < 2:
        return squared.reshape(1, -1)
    return squared.flatten(start_dim=1)
''',
    code='''import functools
import operator


def mse_loss(y_hat, y):
    """Return the mean over all entries of (y_hat - y) ** 2, as a 0-dim tensor (like F.mse_loss)."""
    rows = squared_error_rows(y_hat, y)
    start = torch.zeros((), dtype=rows.dtype)
    total = functools.reduce(operator.add, (row.sum() for row in rows), start)
    return total / y_hat.numel()
'''))

# ----------------------------------------------------------------------------------------------
# mse_loss_grad
# ----------------------------------------------------------------------------------------------
V03.append(dict(assignment=A3, function="mse_loss_grad",
    style="2 * (y_hat - y) / y_hat.numel()",
    added="",
    code='''def mse_loss_grad(y_hat, y):
    """Return dL/dy_hat for L = mse_loss(y_hat, y): 2 * (y_hat - y) / y_hat.numel()."""
    return 2 * (y_hat - y) / y_hat.numel()
'''))

V03.append(dict(assignment=A3, function="mse_loss_grad",
    style="math.prod for M, one Python factor 2 / M, .mul method",
    added="",
    code='''import math


def mse_loss_grad(y_hat, y):
    """Return dL/dy_hat for L = mse_loss(y_hat, y): 2 * (y_hat - y) / y_hat.numel()."""
    M = math.prod(y_hat.shape)
    return (y_hat - y).mul(2.0 / M)
'''))

V03.append(dict(assignment=A3, function="mse_loss_grad",
    style="torch functions: torch.div(torch.mul(torch.sub(...), 2), M)",
    added="",
    code='''def mse_loss_grad(y_hat, y):
    """Return dL/dy_hat for L = mse_loss(y_hat, y): 2 * (y_hat - y) / y_hat.numel()."""
    M = y_hat.numel()
    return torch.div(torch.mul(torch.sub(y_hat, y), 2), M)
'''))

V03.append(dict(assignment=A3, function="mse_loss_grad",
    style="full_like tensor holding 2/M, multiplied elementwise",
    added="",
    code='''def mse_loss_grad(y_hat, y):
    """Return dL/dy_hat for L = mse_loss(y_hat, y): 2 * (y_hat - y) / y_hat.numel()."""
    factor = torch.full_like(y_hat, 2.0 / y_hat.numel())
    return factor * (y_hat - y)
'''))

V03.append(dict(assignment=A3, function="mse_loss_grad",
    style="type hints, assert on matching shapes with an f-string, M from len(flatten())",
    added="",
    code='''def mse_loss_grad(y_hat: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Return dL/dy_hat for L = mse_loss(y_hat, y): 2 * (y_hat - y) / y_hat.numel()."""
    assert y_hat.shape == y.shape, f"shapes differ: {tuple(y_hat.shape)} vs {tuple(y.shape)}"
    M = len(y_hat.flatten())             # all entries, not the batch size
    return (y_hat - y) * 2 / M
'''))

# ----------------------------------------------------------------------------------------------
# linear_backward
# ----------------------------------------------------------------------------------------------
V03.append(dict(assignment=A3, function="linear_backward",
    style="the three formulas with @ and .sum(dim=0)",
    added="",
    code='''def linear_backward(grad_out, x, W):
    """For y = x Wᵀ + b and grad_out = dL/dy (N, out), return (dL/dx, dL/dW, dL/db).

    x: (N, in), W: (out, in). Shapes of the results: (N, in), (out, in), (out,).
    """
    grad_x = grad_out @ W
    grad_W = grad_out.T @ x
    grad_b = grad_out.sum(dim=0)
    return grad_x, grad_W, grad_b
'''))

V03.append(dict(assignment=A3, function="linear_backward",
    style="torch.mm / torch.sum functions, t() for the transpose",
    added="",
    code='''def linear_backward(grad_out, x, W):
    """For y = x Wᵀ + b and grad_out = dL/dy (N, out), return (dL/dx, dL/dW, dL/db).

    x: (N, in), W: (out, in). Shapes of the results: (N, in), (out, in), (out,).
    """
    return torch.mm(grad_out, W), torch.mm(grad_out.t(), x), torch.sum(grad_out, 0)
'''))

V03.append(dict(assignment=A3, function="linear_backward",
    style="broadcasting elementwise products summed over the right axis (no matrix product)",
    added="",
    code='''def linear_backward(grad_out, x, W):
    """For y = x Wᵀ + b and grad_out = dL/dy (N, out), return (dL/dx, dL/dW, dL/db).

    x: (N, in), W: (out, in). Shapes of the results: (N, in), (out, in), (out,).
    """
    G = grad_out
    grad_x = (G[:, :, None] * W[None, :, :]).sum(dim=1)     # sum_j G[n, j] W[j, i]
    grad_W = (G[:, :, None] * x[:, None, :]).sum(dim=0)     # sum_n G[n, j] x[n, i]
    grad_b = G.sum(dim=0)                                   # sum_n G[n, j]
    return grad_x, grad_W, grad_b
'''))

V03.append(dict(assignment=A3, function="linear_backward",
    style="loop over samples accumulating outer products in fresh zero tensors (in-place +=)",
    added="",
    code='''def linear_backward(grad_out, x, W):
    """For y = x Wᵀ + b and grad_out = dL/dy (N, out), return (dL/dx, dL/dW, dL/db).

    x: (N, in), W: (out, in). Shapes of the results: (N, in), (out, in), (out,).
    """
    grad_W = W.new_zeros(W.shape)
    grad_b = W.new_zeros(W.shape[0])
    for g_n, x_n in zip(grad_out, x):        # W and b are used by every sample: their gradients add up
        grad_W += torch.outer(g_n, x_n)
        grad_b += g_n
    grad_x = grad_out @ W                    # each sample gets its own row
    return grad_x, grad_W, grad_b
'''))

V03.append(dict(assignment=A3, function="linear_backward",
    style="torch.einsum for the products, ones-vector product for the bias",
    added="",
    code='''def linear_backward(grad_out, x, W):
    """For y = x Wᵀ + b and grad_out = dL/dy (N, out), return (dL/dx, dL/dW, dL/db).

    x: (N, in), W: (out, in). Shapes of the results: (N, in), (out, in), (out,).
    """
    grad_x = torch.einsum("nj,ji->ni", grad_out, W)
    grad_W = torch.einsum("nj,ni->ji", grad_out, x)
    ones = torch.ones(grad_out.shape[0], dtype=grad_out.dtype)
    grad_b = ones @ grad_out
    return grad_x, grad_W, grad_b
'''))

V03.append(dict(assignment=A3, function="linear_backward",
    style="type hints, torch.matmul with transpose(0, 1), shape asserts against the inputs",
    added="",
    code='''def linear_backward(grad_out: torch.Tensor, x: torch.Tensor, W: torch.Tensor) -> tuple:
    """For y = x Wᵀ + b and grad_out = dL/dy (N, out), return (dL/dx, dL/dW, dL/db).

    x: (N, in), W: (out, in). Shapes of the results: (N, in), (out, in), (out,).
    """
    grad_x = torch.matmul(grad_out, W)
    grad_W = torch.matmul(grad_out.transpose(0, 1), x)
    grad_b = grad_out.sum(0)
    assert grad_x.shape == x.shape and grad_W.shape == W.shape, "each gradient has its tensor's shape"
    assert grad_b.shape == (W.shape[0],)
    return (grad_x, grad_W, grad_b)
'''))

# ----------------------------------------------------------------------------------------------
# relu_backward
# ----------------------------------------------------------------------------------------------
V03.append(dict(assignment=A3, function="relu_backward",
    style="grad_out times the float mask (z > 0) in grad_out's dtype",
    added="",
    code='''def relu_backward(grad_out, z):
    """For a = relu(z) and grad_out = dL/da, return dL/dz: grad_out where z > 0, and 0 where z <= 0."""
    return grad_out * (z > 0).to(grad_out.dtype)
'''))

V03.append(dict(assignment=A3, function="relu_backward",
    style="torch.where with zeros_like(grad_out)",
    added="",
    code='''def relu_backward(grad_out, z):
    """For a = relu(z) and grad_out = dL/da, return dL/dz: grad_out where z > 0, and 0 where z <= 0."""
    return torch.where(z > 0, grad_out, torch.zeros_like(grad_out))
'''))

V03.append(dict(assignment=A3, function="relu_backward",
    style="clone grad_out, zero the blocked entries by boolean indexing",
    added="",
    code='''def relu_backward(grad_out, z):
    """For a = relu(z) and grad_out = dL/da, return dL/dz: grad_out where z > 0, and 0 where z <= 0."""
    grad_z = grad_out.clone()          # never write into the caller's tensor
    grad_z[z <= 0] = 0.0
    return grad_z
'''))

V03.append(dict(assignment=A3, function="relu_backward",
    style="masked_fill with the logical not of the pass mask",
    added="",
    code='''def relu_backward(grad_out, z):
    """For a = relu(z) and grad_out = dL/da, return dL/dz: grad_out where z > 0, and 0 where z <= 0."""
    passes = z > 0
    return grad_out.masked_fill(~passes, 0.0)
'''))

V03.append(dict(assignment=A3, function="relu_backward",
    style="helper cell computing relu'(z) in a given dtype; torch.mul",
    added='''def relu_slope(z, dtype):
    """relu'(z): 1 where z > 0, 0 elsewhere (0 at z == 0, as torch.relu), in the given dtype."""
    return (z > 0).to(dtype)
''',
    code='''def relu_backward(grad_out, z):
    """For a = relu(z) and grad_out = dL/da, return dL/dz: grad_out where z > 0, and 0 where z <= 0."""
    local = relu_slope(z, grad_out.dtype)      # the diagonal of the Jacobian
    return torch.mul(grad_out, local)          # upstream times local
'''))

V03.append(dict(assignment=A3, function="relu_backward",
    style="z.gt(0) with torch.where and a Python scalar 0.0; type hints and a shape check raising ValueError",
    added="",
    code='''def relu_backward(grad_out: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """For a = relu(z) and grad_out = dL/da, return dL/dz: grad_out where z > 0, and 0 where z <= 0."""
    if grad_out.shape != z.shape:
        raise ValueError(f"grad_out {tuple(grad_out.shape)} and z {tuple(z.shape)} must have the same shape")
    return torch.where(z.gt(0), grad_out, 0.0)
'''))

# ----------------------------------------------------------------------------------------------
# mlp_backward
# ----------------------------------------------------------------------------------------------
V03.append(dict(assignment=A3, function="mlp_backward",
    style="forward with @ and torch.relu, then the table's four backward steps",
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

V03.append(dict(assignment=A3, function="mlp_backward",
    style="clamp(min=0) forward inside torch.no_grad(), dict(...) keyword constructor",
    added="",
    code='''def mlp_backward(x, y, W1, b1, W2, b2):
    """Gradients of L = mse(relu(x W1ᵀ + b1) W2ᵀ + b2, y) by the chain rule.

    Return {"W1": dL/dW1, "b1": dL/db1, "W2": dL/dW2, "b2": dL/db2}, as L.backward() would fill .grad.
    """
    with torch.no_grad():
        z1 = torch.matmul(x, W1.t()) + b1
        h = z1.clamp(min=0)
        y_hat = torch.matmul(h, W2.t()) + b2
        grad_y_hat = mse_loss_grad(y_hat, y)
        grad_h, grad_W2, grad_b2 = linear_backward(grad_y_hat, h, W2)
        grad_z1 = relu_backward(grad_h, z1)
        grad_x, grad_W1, grad_b1 = linear_backward(grad_z1, x, W1)
    return dict(W1=grad_W1, b1=grad_b1, W2=grad_W2, b2=grad_b2)
'''))

V03.append(dict(assignment=A3, function="mlp_backward",
    style="F.linear for the forward layers, results read by index from the returned tuples",
    added="",
    code='''def mlp_backward(x, y, W1, b1, W2, b2):
    """Gradients of L = mse(relu(x W1ᵀ + b1) W2ᵀ + b2, y) by the chain rule.

    Return {"W1": dL/dW1, "b1": dL/db1, "W2": dL/dW2, "b2": dL/db2}, as L.backward() would fill .grad.
    """
    z1 = F.linear(x, W1, b1)
    h = torch.relu(z1)
    y_hat = F.linear(h, W2, b2)
    second = linear_backward(mse_loss_grad(y_hat, y), h, W2)     # (grad_h, grad_W2, grad_b2)
    first = linear_backward(relu_backward(second[0], z1), x, W1)  # (grad_x, grad_W1, grad_b1)
    return {"W1": first[1], "b1": first[2], "W2": second[1], "b2": second[2]}
'''))

V03.append(dict(assignment=A3, function="mlp_backward",
    style="generic loop over a list of layers: forward keeps inputs and pre-activations, backward walks reversed()",
    added="",
    code='''def mlp_backward(x, y, W1, b1, W2, b2):
    """Gradients of L = mse(relu(x W1ᵀ + b1) W2ᵀ + b2, y) by the chain rule.

    Return {"W1": dL/dW1, "b1": dL/db1, "W2": dL/dW2, "b2": dL/db2}, as L.backward() would fill .grad.
    """
    layers = [(W1, b1), (W2, b2)]
    inputs, pre_activations = [], []
    a = x
    for k, (W, b) in enumerate(layers):
        inputs.append(a)
        z = a @ W.T + b
        pre_activations.append(z)
        a = z.clamp(min=0) if k < len(layers) - 1 else z     # ReLU between layers, none after the last
    grad = mse_loss_grad(a, y)
    grads = {}
    for k in reversed(range(len(layers))):
        if k < len(layers) - 1:
            grad = relu_backward(grad, pre_activations[k])
        grad, grads[f"W{k + 1}"], grads[f"b{k + 1}"] = linear_backward(grad, inputs[k], layers[k][0])
    return grads
'''))

V03.append(dict(assignment=A3, function="mlp_backward",
    style="helper cell holding the forward pass (returns z1, h, y_hat); dict built with zip",
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
    z1, h, y_hat = mlp_forward(x, W1, b1, W2, b2)
    grad_h, grad_W2, grad_b2 = linear_backward(mse_loss_grad(y_hat, y), h, W2)
    _, grad_W1, grad_b1 = linear_backward(relu_backward(grad_h, z1), x, W1)
    names = ("W1", "b1", "W2", "b2")
    return dict(zip(names, (grad_W1, grad_b1, grad_W2, grad_b2)))
'''))

V03.append(dict(assignment=A3, function="mlp_backward",
    style="type hints, comments per pass, loop asserting each gradient has its parameter's shape, dict comprehension for the result",
    added="",
    code='''def mlp_backward(x: torch.Tensor, y: torch.Tensor, W1: torch.Tensor, b1: torch.Tensor,
                 W2: torch.Tensor, b2: torch.Tensor) -> dict:
    """Gradients of L = mse(relu(x W1ᵀ + b1) W2ᵀ + b2, y) by the chain rule.

    Return {"W1": dL/dW1, "b1": dL/db1, "W2": dL/dW2, "b2": dL/db2}, as L.backward() would fill .grad.
    """
    # forward
    z1 = x @ W1.T + b1
    h = torch.clamp(z1, min=0)
    y_hat = h @ W2.T + b2
    # backward, from the loss to the first layer
    grad_y_hat = mse_loss_grad(y_hat, y)
    grad_h, grad_W2, grad_b2 = linear_backward(grad_y_hat, h, W2)
    grad_z1 = relu_backward(grad_h, z1)
    grad_x, grad_W1, grad_b1 = linear_backward(grad_z1, x, W1)
    grads = {"W1": grad_W1, "b1": grad_b1, "W2": grad_W2, "b2": grad_b2}
    params = {"W1": W1, "b1": b1, "W2": W2, "b2": b2}
    for name in grads:
        assert grads[name].shape == params[name].shape, f"grad of {name} has the wrong shape"
    return {name: grads[name] for name in ("W1", "b1", "W2", "b2")}
'''))

V05 = []
A5 = "05_gradient_descent"

# ----------------------------------------------------------------------------------------------
# sgd_step
# ----------------------------------------------------------------------------------------------
V05.append(dict(assignment=A5, function="sgd_step",
    style="with torch.no_grad(): loop, continue on None grads, p -= lr * p.grad",
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

V05.append(dict(assignment=A5, function="sgd_step",
    style="@torch.no_grad() decorator, p.add_(p.grad, alpha=-lr) as torch.optim.SGD does",
    added="",
    code='''@torch.no_grad()
def sgd_step(params, lr):
    """Update every tensor p in the list in place: p <- p - lr * p.grad, as torch.optim.SGD(params, lr).step().

    Skip tensors whose .grad is None; each p must stay the same leaf tensor (use torch.no_grad()).
    """
    for p in params:
        if p.grad is not None:
            p.add_(p.grad, alpha=-lr)
'''))

V05.append(dict(assignment=A5, function="sgd_step",
    style="list comprehension filtering the tensors with a gradient, then sub_ on each",
    added="",
    code='''def sgd_step(params, lr):
    """Update every tensor p in the list in place: p <- p - lr * p.grad, as torch.optim.SGD(params, lr).step().

    Skip tensors whose .grad is None; each p must stay the same leaf tensor (use torch.no_grad()).
    """
    with_grad = [p for p in params if p.grad is not None]
    with torch.no_grad():
        for p in with_grad:
            p.sub_(lr * p.grad)
    return None
'''))

V05.append(dict(assignment=A5, function="sgd_step",
    style="writes through .data (inside torch.no_grad()), .data.sub_(grad, alpha=lr)",
    added="",
    code='''def sgd_step(params, lr):
    """Update every tensor p in the list in place: p <- p - lr * p.grad, as torch.optim.SGD(params, lr).step().

    Skip tensors whose .grad is None; each p must stay the same leaf tensor (use torch.no_grad()).
    """
    with torch.no_grad():
        for p in params:
            grad = p.grad
            if grad is None:
                continue                      # torch.optim.SGD skips it too
            p.data.sub_(grad.data, alpha=lr)   # same storage: p itself changes
'''))

V05.append(dict(assignment=A5, function="sgd_step",
    style="type hints, index loop with range(len(...)), copy_ of the new values into the same tensor",
    added="",
    code='''def sgd_step(params: list, lr: float) -> None:
    """Update every tensor p in the list in place: p <- p - lr * p.grad, as torch.optim.SGD(params, lr).step().

    Skip tensors whose .grad is None; each p must stay the same leaf tensor (use torch.no_grad()).
    """
    with torch.no_grad():
        for i in range(len(params)):
            p = params[i]
            if p.grad is not None:
                p.copy_(p - lr * p.grad)
'''))

V05.append(dict(assignment=A5, function="sgd_step",
    style="torch.set_grad_enabled(False) as a context manager, early return on an empty list, add_ of a negated step",
    added="",
    code='''def sgd_step(params, lr):
    """Update every tensor p in the list in place: p <- p - lr * p.grad, as torch.optim.SGD(params, lr).step().

    Skip tensors whose .grad is None; each p must stay the same leaf tensor (use torch.no_grad()).
    """
    if len(params) == 0:
        return
    with torch.set_grad_enabled(False):       # restores the previous grad mode on exit
        for p in filter(lambda t: t.grad is not None, params):
            step = -lr * p.grad
            p.add_(step)
'''))

# ----------------------------------------------------------------------------------------------
# sgd_momentum_update
# ----------------------------------------------------------------------------------------------
V05.append(dict(assignment=A5, function="sgd_momentum_update",
    style="the docstring's recipe, if/else blocks",
    added="",
    code='''def sgd_momentum_update(p, grad, buf, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False):
    """One step of torch.optim.SGD for one parameter; return (new_p, new_buf) and change no input.

    g = grad + weight_decay * p; buf = g.clone() on the first step (buf is None), else
    buf = momentum * buf + (1 - dampening) * g; step = g + momentum * buf if nesterov else buf
    (step = g and new_buf = None when momentum == 0); new_p = p - lr * step.
    """
    g = grad
    if weight_decay != 0:
        g = g + weight_decay * p
    if momentum != 0:
        if buf is None:
            new_buf = g.clone()
        else:
            new_buf = momentum * buf + (1 - dampening) * g
        if nesterov:
            step = g + momentum * new_buf
        else:
            step = new_buf
    else:
        new_buf = None
        step = g
    new_p = p - lr * step
    return new_p, new_buf
'''))

V05.append(dict(assignment=A5, function="sgd_momentum_update",
    style="early return for momentum == 0; out-of-place add/mul with alpha, as torch.optim.SGD writes it",
    added="",
    code='''def sgd_momentum_update(p, grad, buf, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False):
    """One step of torch.optim.SGD for one parameter; return (new_p, new_buf) and change no input.

    g = grad + weight_decay * p; buf = g.clone() on the first step (buf is None), else
    buf = momentum * buf + (1 - dampening) * g; step = g + momentum * buf if nesterov else buf
    (step = g and new_buf = None when momentum == 0); new_p = p - lr * step.
    """
    g = torch.add(grad, p, alpha=weight_decay) if weight_decay != 0 else grad
    if momentum == 0:
        return p.add(g, alpha=-lr), None
    if buf is None:
        new_buf = torch.clone(g).detach()
    else:
        new_buf = buf.mul(momentum).add(g, alpha=1 - dampening)
    step = g.add(new_buf, alpha=momentum) if nesterov else new_buf
    return p.add(step, alpha=-lr), new_buf
'''))

V05.append(dict(assignment=A5, function="sgd_momentum_update",
    style="copy.deepcopy for the first buffer, conditional expressions throughout",
    added="",
    code='''import copy


def sgd_momentum_update(p, grad, buf, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False):
    """One step of torch.optim.SGD for one parameter; return (new_p, new_buf) and change no input.

    g = grad + weight_decay * p; buf = g.clone() on the first step (buf is None), else
    buf = momentum * buf + (1 - dampening) * g; step = g + momentum * buf if nesterov else buf
    (step = g and new_buf = None when momentum == 0); new_p = p - lr * step.
    """
    g = grad + weight_decay * p if weight_decay else grad
    if not momentum:
        return p - lr * g, None
    new_buf = copy.deepcopy(g) if buf is None else momentum * buf + (1.0 - dampening) * g
    step = g + momentum * new_buf if nesterov else new_buf
    return p - lr * step, new_buf
'''))

V05.append(dict(assignment=A5, function="sgd_momentum_update",
    style="helper cell with small functions (weight decay, buffer, direction); ValueErrors with f-strings for settings torch.optim.SGD refuses",
    added='''def with_weight_decay(grad, p, weight_decay):
    """g = grad + weight_decay * p (a new tensor only when weight_decay is not 0)."""
    return grad if weight_decay == 0 else grad + weight_decay * p


def next_buffer(buf, g, momentum, dampening):
    """The momentum buffer after this step: a copy of g on the first step, else momentum * buf + (1 - dampening) * g."""
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
    if lr < 0:
        raise ValueError(f"invalid learning rate: {lr}")
    if momentum < 0:
        raise ValueError(f"invalid momentum value: {momentum}")
    if nesterov and (momentum <= 0 or dampening != 0):
        raise ValueError(f"Nesterov needs momentum > 0 and zero dampening (got {momentum}, {dampening})")
    g = with_weight_decay(grad, p, weight_decay)
    new_buf = None
    direction = g
    if momentum != 0:
        new_buf = next_buffer(buf, g, momentum, dampening)
        direction = g + momentum * new_buf if nesterov else new_buf
    return p - lr * direction, new_buf
'''))

V05.append(dict(assignment=A5, function="sgd_momentum_update",
    style="in-place ops only on fresh clones (clone().mul_().add_()), under torch.no_grad()",
    added="",
    code='''def sgd_momentum_update(p, grad, buf, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False):
    """One step of torch.optim.SGD for one parameter; return (new_p, new_buf) and change no input.

    g = grad + weight_decay * p; buf = g.clone() on the first step (buf is None), else
    buf = momentum * buf + (1 - dampening) * g; step = g + momentum * buf if nesterov else buf
    (step = g and new_buf = None when momentum == 0); new_p = p - lr * step.
    """
    with torch.no_grad():
        g = grad.clone()                       # our own copy: in-place changes below touch only it
        if weight_decay != 0:
            g.add_(p, alpha=weight_decay)
        new_buf = None
        if momentum != 0:
            if buf is None:
                new_buf = g.clone()
            else:
                new_buf = buf.clone().mul_(momentum).add_(g, alpha=1 - dampening)
            if nesterov:
                g.add_(new_buf, alpha=momentum)
            else:
                g = new_buf.clone()
        new_p = p.clone()
        new_p.sub_(lr * g)
    return new_p, new_buf
'''))

V05.append(dict(assignment=A5, function="sgd_momentum_update",
    style="type hints (torch.Tensor | None), tuple of named intermediate steps, assert that shapes are kept",
    added="",
    code='''def sgd_momentum_update(p: torch.Tensor, grad: torch.Tensor, buf: torch.Tensor | None, lr: float,
                        momentum: float = 0.0, dampening: float = 0.0, weight_decay: float = 0.0,
                        nesterov: bool = False) -> tuple:
    """One step of torch.optim.SGD for one parameter; return (new_p, new_buf) and change no input.

    g = grad + weight_decay * p; buf = g.clone() on the first step (buf is None), else
    buf = momentum * buf + (1 - dampening) * g; step = g + momentum * buf if nesterov else buf
    (step = g and new_buf = None when momentum == 0); new_p = p - lr * step.
    """
    assert grad.shape == p.shape, f"grad {tuple(grad.shape)} does not match p {tuple(p.shape)}"
    g = grad if weight_decay == 0 else torch.add(grad, torch.mul(p, weight_decay))
    if momentum == 0:
        new_buf = None
        update = g
    else:
        first_step = buf is None
        new_buf = g.clone() if first_step else torch.add(torch.mul(buf, momentum), torch.mul(g, 1 - dampening))
        update = torch.add(g, torch.mul(new_buf, momentum)) if nesterov else new_buf
    new_p = torch.sub(p, torch.mul(update, lr))
    assert new_p.shape == p.shape
    return new_p, new_buf
'''))

V06 = []
A6 = "06_putting_it_together"

V06.append(dict(assignment=A6, function="train_mlp",
    style="straightforward loop with the part-2 names; out-of-place updates of cloned tensors",
    added="",
    code='''def train_mlp(x, y, params, lr, steps):
    """Run `steps` steps of gradient descent on mse(relu(x W1ᵀ + b1) W2ᵀ + b2, y), by hand.

    Return (new_params, losses): the trained {"W1", "b1", "W2", "b2"} and the loss before each update.
    """
    W1 = params["W1"].clone()
    b1 = params["b1"].clone()
    W2 = params["W2"].clone()
    b2 = params["b2"].clone()
    losses = []
    for step in range(steps):
        # forward
        z1 = x @ W1.T + b1
        h = torch.relu(z1)
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

V06.append(dict(assignment=A6, function="train_mlp",
    style="torch.no_grad(), dict comprehension of detached clones, in-place sub_ on the copies, torch.where mask, clamp for ReLU",
    added="",
    code='''def train_mlp(x, y, params, lr, steps):
    """Run `steps` steps of gradient descent on mse(relu(x W1ᵀ + b1) W2ᵀ + b2, y), by hand.

    Return (new_params, losses): the trained {"W1", "b1", "W2", "b2"} and the loss before each update.
    """
    p = {name: t.detach().clone() for name, t in params.items()}
    losses = []
    with torch.no_grad():
        for _ in range(steps):
            z1 = x @ p["W1"].T + p["b1"]
            h = z1.clamp(min=0)
            y_hat = h @ p["W2"].T + p["b2"]
            losses.append(((y_hat - y) ** 2).mean().item())

            grad_y_hat = 2 * (y_hat - y) / y_hat.numel()
            grad_W2 = grad_y_hat.T @ h
            grad_b2 = grad_y_hat.sum(dim=0)
            grad_h = grad_y_hat @ p["W2"]
            grad_z1 = torch.where(z1 > 0, grad_h, torch.zeros_like(grad_h))
            grad_W1 = grad_z1.T @ x
            grad_b1 = grad_z1.sum(dim=0)

            p["W1"].sub_(lr * grad_W1)      # our own copies: params is left alone
            p["b1"].sub_(lr * grad_b1)
            p["W2"].sub_(lr * grad_W2)
            p["b2"].sub_(lr * grad_b2)
    return p, losses
'''))

V06.append(dict(assignment=A6, function="train_mlp",
    style="copy.deepcopy of the dict, a grads dict and a loop applying -= to each copy",
    added="",
    code='''import copy


def train_mlp(x, y, params, lr, steps):
    """Run `steps` steps of gradient descent on mse(relu(x W1ᵀ + b1) W2ᵀ + b2, y), by hand.

    Return (new_params, losses): the trained {"W1", "b1", "W2", "b2"} and the loss before each update.
    """
    new_params = copy.deepcopy(params)          # new tensors: the caller's dict and tensors stay as they are
    losses = []
    for _ in range(steps):
        W1, b1, W2, b2 = new_params["W1"], new_params["b1"], new_params["W2"], new_params["b2"]
        z1 = torch.matmul(x, W1.t()) + b1
        h = torch.relu(z1)
        y_hat = torch.matmul(h, W2.t()) + b2
        diff = y_hat - y
        losses.append(float((diff * diff).sum() / diff.numel()))

        grad_y_hat = 2 * diff / y_hat.numel()
        grad_h = grad_y_hat @ W2
        grad_z1 = grad_h * (z1 > 0)
        grads = {"W2": grad_y_hat.t() @ h, "b2": grad_y_hat.sum(0),
                 "W1": grad_z1.t() @ x, "b1": grad_z1.sum(0)}
        for name in new_params:
            new_params[name] -= lr * grads[name]
    return new_params, losses
'''))

V06.append(dict(assignment=A6, function="train_mlp",
    style="helper cell with constants (parameter names, print interval); prints progress; float(loss)",
    added='''PARAM_NAMES = ("W1", "b1", "W2", "b2")
PRINT_EVERY = 50        # print the loss every this many steps
''',
    code='''def train_mlp(x, y, params, lr, steps):
    """Run `steps` steps of gradient descent on mse(relu(x W1ᵀ + b1) W2ᵀ + b2, y), by hand.

    Return (new_params, losses): the trained {"W1", "b1", "W2", "b2"} and the loss before each update.
    """
    W1, b1, W2, b2 = (params[name].clone() for name in PARAM_NAMES)
    losses = []
    for step in range(steps):
        z1 = x @ W1.T + b1
        h = torch.clamp(z1, min=0)
        y_hat = h @ W2.T + b2
        loss = torch.mean((y_hat - y) ** 2)
        losses.append(float(loss))
        if step % PRINT_EVERY == 0:
            print(f"step {step:4d}  loss {loss.item():.5f}")

        grad_y_hat = 2 * (y_hat - y) / y_hat.numel()
        grad_W2, grad_b2 = grad_y_hat.T @ h, grad_y_hat.sum(0)
        grad_h = grad_y_hat @ W2
        grad_z1 = grad_h * (z1 > 0).type_as(grad_h)
        grad_W1, grad_b1 = grad_z1.T @ x, grad_z1.sum(0)

        W1, b1 = W1 - lr * grad_W1, b1 - lr * grad_b1
        W2, b2 = W2 - lr * grad_W2, b2 - lr * grad_b2
    return dict(zip(PARAM_NAMES, (W1, b1, W2, b2))), losses
'''))

V06.append(dict(assignment=A6, function="train_mlp",
    style="type hints, input checks raising ValueError with f-strings, torch functions (mm, sum, mean), a fresh dict per step",
    added="",
    code='''def train_mlp(x: torch.Tensor, y: torch.Tensor, params: dict, lr: float, steps: int) -> tuple:
    """Run `steps` steps of gradient descent on mse(relu(x W1ᵀ + b1) W2ᵀ + b2, y), by hand.

    Return (new_params, losses): the trained {"W1", "b1", "W2", "b2"} and the loss before each update.
    """
    if steps < 0:
        raise ValueError(f"steps must be >= 0, got {steps}")
    missing = {"W1", "b1", "W2", "b2"} - set(params)
    if missing:
        raise ValueError(f"params is missing {sorted(missing)}")
    current = {name: params[name].clone() for name in ("W1", "b1", "W2", "b2")}
    losses: list = []
    for _ in range(steps):
        z1 = torch.mm(x, current["W1"].t()) + current["b1"]
        h = torch.where(z1 > 0, z1, torch.zeros_like(z1))
        y_hat = torch.mm(h, current["W2"].t()) + current["b2"]
        losses.append(torch.mean(torch.square(y_hat - y)).item())

        grad_y_hat = torch.mul(torch.sub(y_hat, y), 2.0 / y_hat.numel())
        grad_h = torch.mm(grad_y_hat, current["W2"])
        grad_z1 = torch.mul(grad_h, (z1 > 0).to(grad_h.dtype))
        grads = {"W1": torch.mm(grad_z1.t(), x), "b1": torch.sum(grad_z1, 0),
                 "W2": torch.mm(grad_y_hat.t(), h), "b2": torch.sum(grad_y_hat, 0)}
        current = {name: current[name] - lr * grads[name] for name in current}
    return current, losses
'''))

V07 = []
A7 = "07_custom_autograd"

V07.append(dict(assignment=A7, function="LinearFunction",
    style="save x, W, b; backward with @ under needs_input_grad checks",
    added="",
    code='''class LinearFunction(torch.autograd.Function):
    """y = x W^T + b for x (N, in), W (out, in), b (out,) or None, with a backward written by hand."""

    @staticmethod
    def forward(ctx, x, W, b):
        """Return x @ W.T + b (no bias when b is None); save what backward needs in ctx."""
        ctx.save_for_backward(x, W, b)
        y = x @ W.T
        if b is not None:
            y = y + b
        return y

    @staticmethod
    def backward(ctx, grad_out):
        """Return (grad_x, grad_W, grad_b) = (grad_out W, grad_out^T x, grad_out summed over the batch).

        None for each input with ctx.needs_input_grad False, and for b when it is None. No autograd here.
        """
        x, W, b = ctx.saved_tensors
        grad_x = grad_W = grad_b = None
        if ctx.needs_input_grad[0]:
            grad_x = grad_out @ W
        if ctx.needs_input_grad[1]:
            grad_W = grad_out.T @ x
        if b is not None and ctx.needs_input_grad[2]:
            grad_b = grad_out.sum(dim=0)
        return grad_x, grad_W, grad_b
'''))

V07.append(dict(assignment=A7, function="LinearFunction",
    style="F.linear in forward, only x and W saved plus a plain flag ctx.has_bias; torch.mm in backward",
    added="",
    code='''class LinearFunction(torch.autograd.Function):
    """y = x W^T + b for x (N, in), W (out, in), b (out,) or None, with a backward written by hand."""

    @staticmethod
    def forward(ctx, x, W, b):
        """Return x @ W.T + b (no bias when b is None); save what backward needs in ctx."""
        ctx.save_for_backward(x, W)
        ctx.has_bias = b is not None          # a plain Python value: an attribute of ctx
        return F.linear(x, W, b)

    @staticmethod
    def backward(ctx, grad_out):
        """Return (grad_x, grad_W, grad_b) = (grad_out W, grad_out^T x, grad_out summed over the batch).

        None for each input with ctx.needs_input_grad False, and for b when it is None. No autograd here.
        """
        x, W = ctx.saved_tensors
        need_x, need_W, need_b = ctx.needs_input_grad
        grad_x = torch.mm(grad_out, W) if need_x else None
        grad_W = torch.mm(grad_out.t(), x) if need_W else None
        grad_b = torch.sum(grad_out, dim=0) if (ctx.has_bias and need_b) else None
        return grad_x, grad_W, grad_b
'''))

V07.append(dict(assignment=A7, function="LinearFunction",
    style="torch.addmm / torch.mm in forward; torch.einsum in backward; a list of three results turned into a tuple",
    added="",
    code='''class LinearFunction(torch.autograd.Function):
    """y = x W^T + b for x (N, in), W (out, in), b (out,) or None, with a backward written by hand."""

    @staticmethod
    def forward(ctx, x, W, b):
        """Return x @ W.T + b (no bias when b is None); save what backward needs in ctx."""
        ctx.save_for_backward(x, W, b)
        if b is None:
            return torch.mm(x, W.t())
        return torch.addmm(b, x, W.t())

    @staticmethod
    def backward(ctx, grad_out):
        """Return (grad_x, grad_W, grad_b) = (grad_out W, grad_out^T x, grad_out summed over the batch).

        None for each input with ctx.needs_input_grad False, and for b when it is None. No autograd here.
        """
        x, W, b = ctx.saved_tensors
        grads = [None, None, None]
        if ctx.needs_input_grad[0]:
            grads[0] = torch.einsum("no,oi->ni", grad_out, W)
        if ctx.needs_input_grad[1]:
            grads[1] = torch.einsum("no,ni->oi", grad_out, x)
        if ctx.needs_input_grad[2] and b is not None:
            grads[2] = torch.einsum("no->o", grad_out)
        return tuple(grads)
'''))

V07.append(dict(assignment=A7, function="LinearFunction",
    style="any number of leading batch dimensions: matmul in forward, reshape to 2-D in backward",
    added="",
    code='''class LinearFunction(torch.autograd.Function):
    """y = x W^T + b for x (N, in), W (out, in), b (out,) or None, with a backward written by hand."""

    @staticmethod
    def forward(ctx, x, W, b):
        """Return x @ W.T + b (no bias when b is None); save what backward needs in ctx."""
        ctx.save_for_backward(x, W)
        ctx.bias_given = b is not None
        y = torch.matmul(x, W.transpose(0, 1))
        return y if b is None else y + b

    @staticmethod
    def backward(ctx, grad_out):
        """Return (grad_x, grad_W, grad_b) = (grad_out W, grad_out^T x, grad_out summed over the batch).

        None for each input with ctx.needs_input_grad False, and for b when it is None. No autograd here.
        """
        x, W = ctx.saved_tensors
        n_out, n_in = W.shape
        G = grad_out.reshape(-1, n_out)          # every sample as one row, whatever the leading dims
        X = x.reshape(-1, n_in)
        grad_x = (G @ W).reshape(x.shape) if ctx.needs_input_grad[0] else None
        grad_W = G.T @ X if ctx.needs_input_grad[1] else None
        grad_b = G.sum(0) if ctx.bias_given and ctx.needs_input_grad[2] else None
        return grad_x, grad_W, grad_b
'''))

V07.append(dict(assignment=A7, function="LinearFunction",
    style="helper cell with the three gradient formulas as functions; type hints, early return when nothing is needed, shape asserts",
    added='''def input_grad(grad_out, W):
    """dL/dx = G W, shape (N, in)."""
    return grad_out @ W


def weight_grad(grad_out, x):
    """dL/dW = G^T x, shape (out, in)."""
    return grad_out.transpose(0, 1) @ x


def bias_grad(grad_out):
    """dL/db = G summed over the batch, shape (out,)."""
    return grad_out.sum(0)
''',
    code='''class LinearFunction(torch.autograd.Function):
    """y = x W^T + b for x (N, in), W (out, in), b (out,) or None, with a backward written by hand."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, W: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
        """Return x @ W.T + b (no bias when b is None); save what backward needs in ctx."""
        ctx.save_for_backward(x, W, b)
        out = x.matmul(W.T)
        if b is not None:
            out += b                          # in place on the fresh product only
        return out

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor) -> tuple:
        """Return (grad_x, grad_W, grad_b) = (grad_out W, grad_out^T x, grad_out summed over the batch).

        None for each input with ctx.needs_input_grad False, and for b when it is None. No autograd here.
        """
        if not any(ctx.needs_input_grad):
            return None, None, None
        x, W, b = ctx.saved_tensors
        grad_x = input_grad(grad_out, W) if ctx.needs_input_grad[0] else None
        grad_W = weight_grad(grad_out, x) if ctx.needs_input_grad[1] else None
        grad_b = bias_grad(grad_out) if (b is not None and ctx.needs_input_grad[2]) else None
        assert grad_W is None or grad_W.shape == W.shape
        assert grad_x is None or grad_x.shape == x.shape
        return grad_x, grad_W, grad_b
'''))

VARIANTS = V01 + V02 + V03 + V05 + V06 + V07

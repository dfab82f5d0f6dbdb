"""Held-out probe (issue 36): correct learner answers written from the release notebooks alone.

Each entry of VARIANTS is one learner's answer to one graded function:
  assignment  the folder id ("01_linear_algebra", ...)
  function    the graded function's name (for 07's classes: the answer cell's grade_id)
  style       a short description of how the answer is written
  code        the complete answer cell (def/class line, docstring, body)
  added       a helper cell the learner added just above the answer cell ("" if none)

Every answer was written from the exercise's text, its "What you may use" sentence, the def line
and docstring of its answer cell and ../shared/CONTRACT.md, and checked against PyTorch (float32
and float64, batch and single-sample inputs where the contract says) with a throwaway script; none
was tuned to the grader. Answers to by-hand exercises stay within their "What you may use"
sentence: only `math`, `itertools`, `functools`, `operator`, `copy` (and `torch` in 07), no
`getattr`/`eval`/`exec`, no `__dunder__`/`_private` attributes, no classes, no later exercise's
function, no autograd, and in 01 no built-in matrix product.
"""

VARIANTS = [
    # ------------------------------------------------------------------ 01_linear_algebra: matmul
    dict(
        assignment="01_linear_algebra",
        function="matmul",
        style="triple loop over .tolist() rows with zip and math.fsum; dim() checks; result rebuilt with torch.tensor(dtype=A.dtype)",
        added="",
        code=r'''import math


def matmul(A, B):
    """Return the (n, m) matrix product of A (n, k) and B (k, m): C[i, j] = sum_t A[i, t] * B[t, j].

    Raise ValueError if A or B is not 2-D or if A.shape[1] != B.shape[0].
    """
    if A.dim() != 2 or B.dim() != 2:
        raise ValueError(f"matmul needs 2-D tensors, got {A.dim()}-D and {B.dim()}-D")
    n, k = A.shape
    k2, m = B.shape
    if k != k2:
        raise ValueError(f"inner sizes differ: A is {tuple(A.shape)}, B is {tuple(B.shape)}")
    rows = A.tolist()
    cols = B.t().tolist()          # column j of B as a list
    result = []
    for row in rows:
        for col in cols:
            result.append(math.fsum(a * b for a, b in zip(row, col)))
    return torch.tensor(result, dtype=A.dtype).reshape(n, m)
''',
    ),
    dict(
        assignment="01_linear_algebra",
        function="matmul",
        style="match statement on the two shapes with a guard; broadcasting (n, k, 1) * (1, k, m) summed over the middle axis; type annotations",
        added="",
        code=r'''def matmul(A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
    """Return the (n, m) matrix product of A (n, k) and B (k, m): C[i, j] = sum_t A[i, t] * B[t, j].

    Raise ValueError if A or B is not 2-D or if A.shape[1] != B.shape[0].
    """
    match (tuple(A.shape), tuple(B.shape)):
        case ((n, k), (k2, m)) if k == k2:
            products = A[:, :, None] * B[None, :, :]      # (n, k, m): every A[i, t] * B[t, j]
            return products.sum(dim=1)
        case ((_, _), (_, _)):
            raise ValueError(f"inner sizes differ: {A.shape[1]} columns in A, {B.shape[0]} rows in B")
        case _:
            raise ValueError(f"matmul takes 2-D tensors, not shapes {tuple(A.shape)} and {tuple(B.shape)}")
''',
    ),
    dict(
        assignment="01_linear_algebra",
        function="matmul",
        style="functools.reduce with operator.add over rank-one outer products (column t of A times row t of B), zeros start; checks in a helper of an added cell",
        added=r'''import functools
import operator


def check_2d_pair(A, B):
    """Raise ValueError unless A (n, k) and B (k, m) can be multiplied."""
    if A.ndim != 2:
        raise ValueError(f"A must be 2-D, it has shape {tuple(A.shape)}")
    if B.ndim != 2:
        raise ValueError(f"B must be 2-D, it has shape {tuple(B.shape)}")
    if A.shape[1] != B.shape[0]:
        raise ValueError(f"cannot multiply {tuple(A.shape)} by {tuple(B.shape)}: inner sizes differ")
''',
        code=r'''def matmul(A, B):
    """Return the (n, m) matrix product of A (n, k) and B (k, m): C[i, j] = sum_t A[i, t] * B[t, j].

    Raise ValueError if A or B is not 2-D or if A.shape[1] != B.shape[0].
    """
    check_2d_pair(A, B)
    start = torch.zeros(A.shape[0], B.shape[1], dtype=A.dtype)
    outer_products = (A[:, t:t + 1] * B[t:t + 1, :] for t in range(A.shape[1]))
    return functools.reduce(operator.add, outer_products, start)
''',
    ),
    dict(
        assignment="01_linear_algebra",
        function="matmul",
        style="try/except around unpacking the shapes (re-raised as ValueError from None); one row per sample with a list comprehension and torch.stack; empty batch handled",
        added="",
        code=r'''def matmul(A, B):
    """Return the (n, m) matrix product of A (n, k) and B (k, m): C[i, j] = sum_t A[i, t] * B[t, j].

    Raise ValueError if A or B is not 2-D or if A.shape[1] != B.shape[0].
    """
    try:
        n, k = A.shape
        k_b, m = B.shape
    except ValueError:
        raise ValueError("matmul: both arguments must be 2-D tensors") from None
    if k != k_b:
        raise ValueError(f"matmul: A has {k} columns but B has {k_b} rows")
    if n == 0:
        return torch.zeros(0, m, dtype=A.dtype)
    # row i of C: sum over t of A[i, t] * (row t of B)
    rows = [(A[i].unsqueeze(1) * B).sum(dim=0) for i in range(n)]
    return torch.stack(rows)
''',
    ),
    dict(
        assignment="01_linear_algebra",
        function="matmul",
        style="decorator from an added cell using functools.wraps for the 2-D checks; itertools.product over (i, j) filling a zeros tensor entry by entry; enumerate",
        added=r'''import functools
import itertools


def needs_matrices(fn):
    """Decorator: check that both arguments are 2-D and that their inner sizes agree."""
    @functools.wraps(fn)
    def checked(A, B):
        for position, M in enumerate((A, B), start=1):
            if M.dim() != 2:
                raise ValueError(f"argument {position} is {M.dim()}-D; matmul needs 2-D tensors")
        if A.shape[1] != B.shape[0]:
            raise ValueError(f"inner sizes differ: {A.shape[1]} != {B.shape[0]}")
        return fn(A, B)
    return checked
''',
        code=r'''@needs_matrices
def matmul(A, B):
    """Return the (n, m) matrix product of A (n, k) and B (k, m): C[i, j] = sum_t A[i, t] * B[t, j].

    Raise ValueError if A or B is not 2-D or if A.shape[1] != B.shape[0].
    """
    n, m = A.shape[0], B.shape[1]
    C = torch.zeros(n, m, dtype=A.dtype)
    for i, j in itertools.product(range(n), range(m)):
        C[i, j] = (A[i, :] * B[:, j]).sum()
    return C
''',
    ),
    dict(
        assignment="01_linear_algebra",
        function="matmul",
        style="functools.lru_cache on a pure shape helper (tuples in, tuple out); print left in for debugging; column-wise loop with torch.stack(dim=1)",
        added=r'''import functools


@functools.lru_cache(maxsize=None)
def product_shape(shape_a, shape_b):
    """(n, k), (k, m) -> (n, k, m); ValueError for anything else."""
    if len(shape_a) != 2 or len(shape_b) != 2:
        raise ValueError(f"not 2-D: {shape_a} and {shape_b}")
    if shape_a[1] != shape_b[0]:
        raise ValueError(f"inner sizes differ: {shape_a} @ {shape_b}")
    return shape_a[0], shape_a[1], shape_b[1]
''',
        code=r'''def matmul(A, B):
    """Return the (n, m) matrix product of A (n, k) and B (k, m): C[i, j] = sum_t A[i, t] * B[t, j].

    Raise ValueError if A or B is not 2-D or if A.shape[1] != B.shape[0].
    """
    n, k, m = product_shape(tuple(A.shape), tuple(B.shape))
    DEBUG = False
    if DEBUG:
        print(f"matmul: ({n}, {k}) x ({k}, {m})")
    if m == 0:
        return torch.zeros(n, 0, dtype=A.dtype)
    columns = [(A * B[:, j]).sum(dim=1) for j in range(m)]    # column j of C
    return torch.stack(columns, dim=1)
''',
    ),
    # ------------------------------------------------------------ 01_linear_algebra: linear_forward
    dict(
        assignment="01_linear_algebra",
        function="linear_forward",
        style="the hint's unsqueeze(0)/squeeze(0) for a single sample; matmul(x, W.T); bias added only when given",
        added="",
        code=r'''def linear_forward(x, W, b=None):
    """Return x Wᵀ + b, as nn.Linear does, using matmul.

    x: (N, in) or (in,); W: (out, in); b: (out,) or None. Result: (N, out), or (out,) for 1-D x.
    """
    single = x.dim() == 1
    if single:
        x = x.unsqueeze(0)
    y = matmul(x, W.T)
    if b is not None:
        y = y + b
    if single:
        y = y.squeeze(0)
    return y
''',
    ),
    dict(
        assignment="01_linear_algebra",
        function="linear_forward",
        style="match on x.dim() with a recursive call for the 1-D case; annotations with `torch.Tensor | None`",
        added="",
        code=r'''def linear_forward(x: torch.Tensor, W: torch.Tensor, b: torch.Tensor | None = None) -> torch.Tensor:
    """Return x Wᵀ + b, as nn.Linear does, using matmul.

    x: (N, in) or (in,); W: (out, in); b: (out,) or None. Result: (N, out), or (out,) for 1-D x.
    """
    match x.dim():
        case 1:
            return linear_forward(x.unsqueeze(0), W, b).squeeze(0)
        case 2:
            out = matmul(x, W.t())
            return out if b is None else out + b
        case d:
            raise ValueError(f"x must be (N, in) or (in,), got a {d}-D tensor")
''',
    ),
    dict(
        assignment="01_linear_algebra",
        function="linear_forward",
        style="general leading dimensions: reshape to (-1, in), matmul with W.transpose(0, 1), reshape back to x.shape[:-1] + (out,)",
        added="",
        code=r'''def linear_forward(x, W, b=None):
    """Return x Wᵀ + b, as nn.Linear does, using matmul.

    x: (N, in) or (in,); W: (out, in); b: (out,) or None. Result: (N, out), or (out,) for 1-D x.
    """
    lead = tuple(x.shape[:-1])                  # () for one sample, (N,) for a batch
    flat = x.reshape(-1, x.shape[-1])           # always (rows, in)
    y = matmul(flat, W.transpose(0, 1))         # (rows, out)
    if b is not None:
        y = y + b.reshape(1, -1)                # one row, broadcast down the batch
    return y.reshape(lead + (W.shape[0],))
''',
    ),
    dict(
        assignment="01_linear_algebra",
        function="linear_forward",
        style="lambdas in an added cell to make and undo a batch of one; conditional expression for the bias (+ 0 when None); walrus",
        added=r'''as_batch = lambda t: t if t.dim() == 2 else t.unsqueeze(0)
undo_batch = lambda y, was_single: y.squeeze(0) if was_single else y
''',
        code=r'''def linear_forward(x, W, b=None):
    """Return x Wᵀ + b, as nn.Linear does, using matmul.

    x: (N, in) or (in,); W: (out, in); b: (out,) or None. Result: (N, out), or (out,) for 1-D x.
    """
    y = matmul(as_batch(x), W.T) + (b if (has_bias := b is not None) else 0)
    assert y.shape[-1] == W.shape[0], f"bias used: {has_bias}, got {tuple(y.shape)}"
    return undo_batch(y, x.dim() == 1)
''',
    ),
    dict(
        assignment="01_linear_algebra",
        function="linear_forward",
        style="bias folded in as a column of ones times an extra column of W (torch.cat), debugging print guarded by a flag, shapes asserted",
        added="",
        code=r'''def linear_forward(x, W, b=None):
    """Return x Wᵀ + b, as nn.Linear does, using matmul.

    x: (N, in) or (in,); W: (out, in); b: (out,) or None. Result: (N, out), or (out,) for 1-D x.
    """
    verbose = False
    xb = x.unsqueeze(0) if x.ndim == 1 else x
    assert xb.shape[1] == W.shape[1], "x and W disagree on the number of inputs"
    if b is None:
        y = matmul(xb, W.T)
    else:
        ones = torch.ones(xb.shape[0], 1, dtype=xb.dtype)
        x_aug = torch.cat([xb, ones], dim=1)                 # (N, in + 1)
        W_aug = torch.cat([W, b.unsqueeze(1)], dim=1)        # (out, in + 1)
        y = matmul(x_aug, W_aug.T)
    if verbose:
        print("linear_forward:", tuple(x.shape), "->", tuple(y.shape))
    return y[0] if x.ndim == 1 else y
''',
    ),
    # ------------------------------------------------------------ 02_activation_functions: collapse_linear
    dict(
        assignment="02_activation_functions",
        function="collapse_linear",
        style="the two formulas with @, returned as a tuple",
        added="",
        code=r'''def collapse_linear(W1, b1, W2, b2):
    """Return (W, b) with linear(linear(x, W1, b1), W2, b2) == linear(x, W, b) for every x.

    W1: (hidden, in), b1: (hidden,), W2: (out, hidden), b2: (out,). Result: W (out, in), b (out,).
    """
    W = W2 @ W1
    b = W2 @ b1 + b2
    return W, b
''',
    ),
    dict(
        assignment="02_activation_functions",
        function="collapse_linear",
        style="torch.mm and torch.mv; annotated tuple return; shape asserts with f-strings",
        added="",
        code=r'''def collapse_linear(W1: torch.Tensor, b1: torch.Tensor, W2: torch.Tensor, b2: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Return (W, b) with linear(linear(x, W1, b1), W2, b2) == linear(x, W, b) for every x.

    W1: (hidden, in), b1: (hidden,), W2: (out, hidden), b2: (out,). Result: W (out, in), b (out,).
    """
    assert W2.shape[1] == W1.shape[0], f"hidden sizes differ: {tuple(W1.shape)} then {tuple(W2.shape)}"
    W = torch.mm(W2, W1)
    b = torch.mv(W2, b1) + b2
    assert W.shape == (W2.shape[0], W1.shape[1]) and b.shape == b2.shape
    return (W, b)
''',
    ),
    dict(
        assignment="02_activation_functions",
        function="collapse_linear",
        style="row form of the derivation: W = (W1ᵀ W2ᵀ)ᵀ and b = b1 W2ᵀ + b2, with torch.matmul",
        added="",
        code=r'''def collapse_linear(W1, b1, W2, b2):
    """Return (W, b) with linear(linear(x, W1, b1), W2, b2) == linear(x, W, b) for every x.

    W1: (hidden, in), b1: (hidden,), W2: (out, hidden), b2: (out,). Result: W (out, in), b (out,).
    """
    # y = (x W1ᵀ + b1) W2ᵀ + b2 = x (W1ᵀ W2ᵀ) + (b1 W2ᵀ + b2)
    W_T = torch.matmul(W1.T, W2.T)          # (in, out)
    b = torch.matmul(b1, W2.T) + b2         # (out,)
    return W_T.T, b
''',
    ),
    dict(
        assignment="02_activation_functions",
        function="collapse_linear",
        style="bias as an elementwise product summed over the hidden axis; bias column with [:, None] for the weight-free check; named intermediate dict",
        added="",
        code=r'''def collapse_linear(W1, b1, W2, b2):
    """Return (W, b) with linear(linear(x, W1, b1), W2, b2) == linear(x, W, b) for every x.

    W1: (hidden, in), b1: (hidden,), W2: (out, hidden), b2: (out,). Result: W (out, in), b (out,).
    """
    parts = {
        "W": W2 @ W1,                                  # (out, in)
        "b": (W2 @ b1[:, None]).squeeze(1) + b2,       # W2 b1 as a column, then flattened
    }
    return parts["W"], parts["b"]
''',
    ),
    # ------------------------------------------------------------ 02_activation_functions: relu
    dict(
        assignment="02_activation_functions",
        function="relu",
        style="torch.clamp(z, min=0)",
        added="",
        code=r'''def relu(z):
    """Return max(z, 0) for every entry of z (same shape and dtype as z)."""
    return torch.clamp(z, min=0)
''',
    ),
    dict(
        assignment="02_activation_functions",
        function="relu",
        style="torch.where(z > 0, z, zeros_like(z)) with an intermediate mask name",
        added="",
        code=r'''def relu(z):
    """Return max(z, 0) for every entry of z (same shape and dtype as z)."""
    positive = z > 0
    return torch.where(positive, z, torch.zeros_like(z))
''',
    ),
    dict(
        assignment="02_activation_functions",
        function="relu",
        style="torch.maximum against a 0-d zero of z's dtype (z.new_zeros(())); annotations",
        added="",
        code=r'''def relu(z: torch.Tensor) -> torch.Tensor:
    """Return max(z, 0) for every entry of z (same shape and dtype as z)."""
    zero = z.new_zeros(())          # a 0-d tensor of z's dtype, broadcast against z
    return torch.maximum(z, zero)
''',
    ),
    dict(
        assignment="02_activation_functions",
        function="relu",
        style="out-of-place masked_fill of the negative entries (z itself untouched), method chaining",
        added="",
        code=r'''def relu(z):
    """Return max(z, 0) for every entry of z (same shape and dtype as z)."""
    # masked_fill (no underscore) returns a new tensor; z is left as it is
    return z.masked_fill(z < 0, 0.0)
''',
    ),
    dict(
        assignment="02_activation_functions",
        function="relu",
        style="Tensor.clamp_min method with a float literal, assert on the dtype",
        added="",
        code=r'''def relu(z):
    """Return max(z, 0) for every entry of z (same shape and dtype as z)."""
    out = z.clamp_min(0.0)
    assert out.dtype == z.dtype and out.shape == z.shape
    return out
''',
    ),
    # ------------------------------------------------------------ 02_activation_functions: relu_derivative
    dict(
        assignment="02_activation_functions",
        function="relu_derivative",
        style="(z > 0).to(z.dtype), as the text suggests",
        added="",
        code=r'''def relu_derivative(z):
    """Return 1.0 where z > 0 and 0.0 elsewhere (also at z == 0, like torch.relu); same shape and dtype as z."""
    return (z > 0).to(z.dtype)
''',
    ),
    dict(
        assignment="02_activation_functions",
        function="relu_derivative",
        style="(z > 0).type(z.dtype)",
        added="",
        code=r'''def relu_derivative(z):
    """Return 1.0 where z > 0 and 0.0 elsewhere (also at z == 0, like torch.relu); same shape and dtype as z."""
    mask = z > 0                    # bool
    return mask.type(z.dtype)       # 1.0 / 0.0 in z's own floating dtype
''',
    ),
    dict(
        assignment="02_activation_functions",
        function="relu_derivative",
        style="torch.where with ones_like / zeros_like (dtype follows z)",
        added="",
        code=r'''def relu_derivative(z):
    """Return 1.0 where z > 0 and 0.0 elsewhere (also at z == 0, like torch.relu); same shape and dtype as z."""
    return torch.where(z > 0, torch.ones_like(z), torch.zeros_like(z))
''',
    ),
    dict(
        assignment="02_activation_functions",
        function="relu_derivative",
        style="torch.gt(z, 0).to(dtype=z.dtype) with an assert that z is floating; annotated",
        added="",
        code=r'''def relu_derivative(z: torch.Tensor) -> torch.Tensor:
    """Return 1.0 where z > 0 and 0.0 elsewhere (also at z == 0, like torch.relu); same shape and dtype as z."""
    assert z.is_floating_point(), f"expected a float tensor, got {z.dtype}"
    slope = torch.gt(z, 0).to(dtype=z.dtype)
    return slope
''',
    ),
    # ------------------------------------------------------------ 02_activation_functions: sigmoid
    dict(
        assignment="02_activation_functions",
        function="sigmoid",
        style="1 / (1 + torch.exp(-z)), the form of the text",
        added="",
        code=r'''def sigmoid(z):
    """Return 1 / (1 + exp(-z)) for every entry of z (same shape and dtype as z)."""
    return 1 / (1 + torch.exp(-z))
''',
    ),
    dict(
        assignment="02_activation_functions",
        function="sigmoid",
        style="torch.reciprocal of (1.0 + torch.exp(torch.neg(z))), named intermediate",
        added="",
        code=r'''def sigmoid(z):
    """Return 1 / (1 + exp(-z)) for every entry of z (same shape and dtype as z)."""
    denominator = 1.0 + torch.exp(torch.neg(z))     # inf for very negative z: 1 / inf = 0
    return torch.reciprocal(denominator)
''',
    ),
    dict(
        assignment="02_activation_functions",
        function="sigmoid",
        style="ones_like(z) numerator, z.neg().exp() method chain; annotations",
        added="",
        code=r'''def sigmoid(z: torch.Tensor) -> torch.Tensor:
    """Return 1 / (1 + exp(-z)) for every entry of z (same shape and dtype as z)."""
    one = torch.ones_like(z)
    return one / (one + z.neg().exp())
''',
    ),
    dict(
        assignment="02_activation_functions",
        function="sigmoid",
        style="operator.truediv and a lambda helper from an added cell for e^(-z)",
        added=r'''import operator

exp_minus = lambda t: torch.exp(-1.0 * t)      # e^(-t), entry by entry
''',
        code=r'''def sigmoid(z):
    """Return 1 / (1 + exp(-z)) for every entry of z (same shape and dtype as z)."""
    return operator.truediv(1.0, 1.0 + exp_minus(z))
''',
    ),
    # ------------------------------------------------------------ 02_activation_functions: sigmoid_derivative
    dict(
        assignment="02_activation_functions",
        function="sigmoid_derivative",
        style="s = sigmoid(z); s * (1 - s)",
        added="",
        code=r'''def sigmoid_derivative(z):
    """Return σ(z) * (1 - σ(z)), the derivative of the sigmoid at every entry of z."""
    s = sigmoid(z)
    return s * (1 - s)
''',
    ),
    dict(
        assignment="02_activation_functions",
        function="sigmoid_derivative",
        style="walrus in a one-line return",
        added="",
        code=r'''def sigmoid_derivative(z):
    """Return σ(z) * (1 - σ(z)), the derivative of the sigmoid at every entry of z."""
    return (s := sigmoid(z)) * (1 - s)
''',
    ),
    dict(
        assignment="02_activation_functions",
        function="sigmoid_derivative",
        style="operator.mul / operator.sub; annotated",
        added="",
        code=r'''import operator


def sigmoid_derivative(z: torch.Tensor) -> torch.Tensor:
    """Return σ(z) * (1 - σ(z)), the derivative of the sigmoid at every entry of z."""
    s = sigmoid(z)
    return operator.mul(s, operator.sub(1.0, s))
''',
    ),
    dict(
        assignment="02_activation_functions",
        function="sigmoid_derivative",
        style="nested helper function and method calls s.mul(...); comment with the derivation",
        added="",
        code=r'''def sigmoid_derivative(z):
    """Return σ(z) * (1 - σ(z)), the derivative of the sigmoid at every entry of z."""
    def one_minus(t):
        return 1 - t

    # σ'(z) = e^{-z} / (1 + e^{-z})^2 = σ(z) (1 - σ(z))
    s = sigmoid(z)
    return s.mul(one_minus(s))
''',
    ),
    # ------------------------------------------------------------ 03_chain_rule: mse_loss
    dict(
        assignment="03_chain_rule",
        function="mse_loss",
        style="((y_hat - y) ** 2).mean()",
        added="",
        code=r'''def mse_loss(y_hat, y):
    """Return the mean over all entries of (y_hat - y) ** 2, as a 0-dim tensor (like F.mse_loss)."""
    return ((y_hat - y) ** 2).mean()
''',
    ),
    dict(
        assignment="03_chain_rule",
        function="mse_loss",
        style="diff * diff summed and divided by numel()",
        added="",
        code=r'''def mse_loss(y_hat, y):
    """Return the mean over all entries of (y_hat - y) ** 2, as a 0-dim tensor (like F.mse_loss)."""
    diff = y_hat - y
    M = diff.numel()
    return (diff * diff).sum() / M
''',
    ),
    dict(
        assignment="03_chain_rule",
        function="mse_loss",
        style="torch.mean(torch.square(...)); annotations; assert on matching shapes",
        added="",
        code=r'''def mse_loss(y_hat: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Return the mean over all entries of (y_hat - y) ** 2, as a 0-dim tensor (like F.mse_loss)."""
    assert y_hat.shape == y.shape, f"shapes differ: {tuple(y_hat.shape)} vs {tuple(y.shape)}"
    return torch.mean(torch.square(torch.sub(y_hat, y)))
''',
    ),
    dict(
        assignment="03_chain_rule",
        function="mse_loss",
        style="method chain .pow(2).sum().div(math.prod(shape))",
        added="",
        code=r'''import math


def mse_loss(y_hat, y):
    """Return the mean over all entries of (y_hat - y) ** 2, as a 0-dim tensor (like F.mse_loss)."""
    M = math.prod(y_hat.shape)          # number of entries (1 for a 0-dim tensor)
    return (y_hat - y).pow(2).sum().div(M)
''',
    ),
    # ------------------------------------------------------------ 03_chain_rule: mse_loss_grad
    dict(
        assignment="03_chain_rule",
        function="mse_loss_grad",
        style="2 * (y_hat - y) / y_hat.numel(), as in the docstring",
        added="",
        code=r'''def mse_loss_grad(y_hat, y):
    """Return dL/dy_hat for L = mse_loss(y_hat, y): 2 * (y_hat - y) / y_hat.numel()."""
    return 2 * (y_hat - y) / y_hat.numel()
''',
    ),
    dict(
        assignment="03_chain_rule",
        function="mse_loss_grad",
        style="M from math.prod over the shape; float constants",
        added="",
        code=r'''import math


def mse_loss_grad(y_hat, y):
    """Return dL/dy_hat for L = mse_loss(y_hat, y): 2 * (y_hat - y) / y_hat.numel()."""
    M = math.prod(y_hat.shape)
    return 2.0 * (y_hat - y) / M
''',
    ),
    dict(
        assignment="03_chain_rule",
        function="mse_loss_grad",
        style="lambda helper from an added cell; torch.sub(...).mul(2).div(M) chain",
        added=r'''n_entries = lambda t: t.numel()     # M in the notebook's formulas
''',
        code=r'''def mse_loss_grad(y_hat, y):
    """Return dL/dy_hat for L = mse_loss(y_hat, y): 2 * (y_hat - y) / y_hat.numel()."""
    return torch.sub(y_hat, y).mul(2).div(n_entries(y_hat))
''',
    ),
    dict(
        assignment="03_chain_rule",
        function="mse_loss_grad",
        style="annotated, named upstream gradient, shape assert",
        added="",
        code=r'''def mse_loss_grad(y_hat: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Return dL/dy_hat for L = mse_loss(y_hat, y): 2 * (y_hat - y) / y_hat.numel()."""
    residual = y_hat - y
    grad_y_hat = 2 * residual / residual.numel()
    assert grad_y_hat.shape == y_hat.shape
    return grad_y_hat
''',
    ),
    # ------------------------------------------------------------ 03_chain_rule: linear_backward
    dict(
        assignment="03_chain_rule",
        function="linear_backward",
        style="G W, Gᵀ x, G summed over the batch, with @",
        added="",
        code=r'''def linear_backward(grad_out, x, W):
    """For y = x Wᵀ + b and grad_out = dL/dy (N, out), return (dL/dx, dL/dW, dL/db).

    x: (N, in), W: (out, in). Shapes of the results: (N, in), (out, in), (out,).
    """
    grad_x = grad_out @ W
    grad_W = grad_out.T @ x
    grad_b = grad_out.sum(dim=0)
    return grad_x, grad_W, grad_b
''',
    ),
    dict(
        assignment="03_chain_rule",
        function="linear_backward",
        style="torch.mm with .t(), torch.sum(., 0); annotated tuple; shape asserts",
        added="",
        code=r'''def linear_backward(grad_out: torch.Tensor, x: torch.Tensor, W: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """For y = x Wᵀ + b and grad_out = dL/dy (N, out), return (dL/dx, dL/dW, dL/db).

    x: (N, in), W: (out, in). Shapes of the results: (N, in), (out, in), (out,).
    """
    grad_x = torch.mm(grad_out, W)               # (N, out)(out, in)
    grad_W = torch.mm(grad_out.t(), x)           # (out, N)(N, in)
    grad_b = torch.sum(grad_out, 0)              # (out,)
    assert grad_x.shape == x.shape and grad_W.shape == W.shape
    return (grad_x, grad_W, grad_b)
''',
    ),
    dict(
        assignment="03_chain_rule",
        function="linear_backward",
        style="no matrix product: broadcasting (N, out, 1) * (N, 1, in) and summing, as the entry formulas read",
        added="",
        code=r'''def linear_backward(grad_out, x, W):
    """For y = x Wᵀ + b and grad_out = dL/dy (N, out), return (dL/dx, dL/dW, dL/db).

    x: (N, in), W: (out, in). Shapes of the results: (N, in), (out, in), (out,).
    """
    G = grad_out
    # dL/dW[j, i] = sum_n G[n, j] x[n, i]
    grad_W = (G[:, :, None] * x[:, None, :]).sum(dim=0)
    # dL/dx[n, i] = sum_j G[n, j] W[j, i]
    grad_x = (G[:, :, None] * W[None, :, :]).sum(dim=1)
    # dL/db[j] = sum_n G[n, j]
    grad_b = G.sum(dim=0)
    return grad_x, grad_W, grad_b
''',
    ),
    dict(
        assignment="03_chain_rule",
        function="linear_backward",
        style="match on the shapes with a guard, torch.matmul and .mT, try/except-free ValueError on mismatch",
        added="",
        code=r'''def linear_backward(grad_out, x, W):
    """For y = x Wᵀ + b and grad_out = dL/dy (N, out), return (dL/dx, dL/dW, dL/db).

    x: (N, in), W: (out, in). Shapes of the results: (N, in), (out, in), (out,).
    """
    match tuple(grad_out.shape), tuple(x.shape), tuple(W.shape):
        case (N, out), (N2, n_in), (out2, n_in2) if N == N2 and out == out2 and n_in == n_in2:
            pass
        case shapes:
            raise ValueError(f"shapes do not fit a linear layer: {shapes}")
    return torch.matmul(grad_out, W), torch.matmul(grad_out.mT, x), grad_out.sum(0)
''',
    ),
    dict(
        assignment="03_chain_rule",
        function="linear_backward",
        style="dict of named gradients built in a comprehension-free block, returned via a tuple of keys with a generator",
        added="",
        code=r'''def linear_backward(grad_out, x, W):
    """For y = x Wᵀ + b and grad_out = dL/dy (N, out), return (dL/dx, dL/dW, dL/db).

    x: (N, in), W: (out, in). Shapes of the results: (N, in), (out, in), (out,).
    """
    grads = {}
    grads["x"] = grad_out @ W                        # each sample's own row
    grads["W"] = grad_out.transpose(0, 1) @ x        # summed over the batch by the product
    grads["b"] = grad_out.sum(dim=0, keepdim=True).squeeze(0)
    return tuple(grads[k] for k in ("x", "W", "b"))
''',
    ),
    # ------------------------------------------------------------ 03_chain_rule: relu_backward
    dict(
        assignment="03_chain_rule",
        function="relu_backward",
        style="grad_out * (z > 0) (bool mask promotes to grad_out's dtype)",
        added="",
        code=r'''def relu_backward(grad_out, z):
    """For a = relu(z) and grad_out = dL/da, return dL/dz: grad_out where z > 0, and 0 where z <= 0."""
    return grad_out * (z > 0)
''',
    ),
    dict(
        assignment="03_chain_rule",
        function="relu_backward",
        style="torch.where(z > 0, grad_out, zeros_like(grad_out))",
        added="",
        code=r'''def relu_backward(grad_out, z):
    """For a = relu(z) and grad_out = dL/da, return dL/dz: grad_out where z > 0, and 0 where z <= 0."""
    return torch.where(z > 0, grad_out, torch.zeros_like(grad_out))
''',
    ),
    dict(
        assignment="03_chain_rule",
        function="relu_backward",
        style="out-of-place masked_fill where z <= 0",
        added="",
        code=r'''def relu_backward(grad_out, z):
    """For a = relu(z) and grad_out = dL/da, return dL/dz: grad_out where z > 0, and 0 where z <= 0."""
    blocked = z <= 0
    return grad_out.masked_fill(blocked, 0.0)
''',
    ),
    dict(
        assignment="03_chain_rule",
        function="relu_backward",
        style="local gradient as a float mask .to(grad_out.dtype), upstream times local; annotated",
        added="",
        code=r'''def relu_backward(grad_out: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """For a = relu(z) and grad_out = dL/da, return dL/dz: grad_out where z > 0, and 0 where z <= 0."""
    local = (z > 0).to(grad_out.dtype)      # relu'(z), 0 at z == 0 as torch.relu
    grad_z = grad_out * local               # upstream times local
    return grad_z
''',
    ),
    # ------------------------------------------------------------ 03_chain_rule: mlp_backward
    dict(
        assignment="03_chain_rule",
        function="mlp_backward",
        style="the table of the notebook step by step with the three helpers; torch.relu forward",
        added="",
        code=r'''def mlp_backward(x, y, W1, b1, W2, b2):
    """Gradients of L = mse(relu(x W1ᵀ + b1) W2ᵀ + b2, y) by the chain rule.

    Return {"W1": dL/dW1, "b1": dL/db1, "W2": dL/dW2, "b2": dL/db2}, as L.backward() would fill .grad.
    """
    z1 = x @ W1.T + b1
    h = torch.relu(z1)
    y_hat = h @ W2.T + b2
    grad_y_hat = mse_loss_grad(y_hat, y)
    grad_h, grad_W2, grad_b2 = linear_backward(grad_y_hat, h, W2)
    grad_z1 = relu_backward(grad_h, z1)
    grad_x, grad_W1, grad_b1 = linear_backward(grad_z1, x, W1)
    return {"W1": grad_W1, "b1": grad_b1, "W2": grad_W2, "b2": grad_b2}
''',
    ),
    dict(
        assignment="03_chain_rule",
        function="mlp_backward",
        style="clamp(min=0) forward; underscores for unused results; dict(zip(keys, values))",
        added="",
        code=r'''def mlp_backward(x, y, W1, b1, W2, b2):
    """Gradients of L = mse(relu(x W1ᵀ + b1) W2ᵀ + b2, y) by the chain rule.

    Return {"W1": dL/dW1, "b1": dL/db1, "W2": dL/dW2, "b2": dL/db2}, as L.backward() would fill .grad.
    """
    z1 = torch.matmul(x, W1.t()) + b1
    h = z1.clamp(min=0)
    y_hat = torch.matmul(h, W2.t()) + b2
    grad_h, gW2, gb2 = linear_backward(mse_loss_grad(y_hat, y), h, W2)
    _, gW1, gb1 = linear_backward(relu_backward(grad_h, z1), x, W1)
    keys = ("W1", "b1", "W2", "b2")
    return dict(zip(keys, (gW1, gb1, gW2, gb2)))
''',
    ),
    dict(
        assignment="03_chain_rule",
        function="mlp_backward",
        style="nested forward() helper returning the kept tensors; annotated dict return; debug print behind a flag",
        added="",
        code=r'''def mlp_backward(x, y, W1, b1, W2, b2) -> dict[str, torch.Tensor]:
    """Gradients of L = mse(relu(x W1ᵀ + b1) W2ᵀ + b2, y) by the chain rule.

    Return {"W1": dL/dW1, "b1": dL/db1, "W2": dL/dW2, "b2": dL/db2}, as L.backward() would fill .grad.
    """
    def forward():
        z1 = x @ W1.T + b1
        h = torch.relu(z1)
        return z1, h, h @ W2.T + b2

    z1, h, y_hat = forward()
    debug = False
    if debug:
        print("z1", tuple(z1.shape), "h", tuple(h.shape), "y_hat", tuple(y_hat.shape))

    grads = {}
    grad_h, grads["W2"], grads["b2"] = linear_backward(mse_loss_grad(y_hat, y), h, W2)
    grad_z1 = relu_backward(grad_h, z1)
    _, grads["W1"], grads["b1"] = linear_backward(grad_z1, x, W1)
    return {k: grads[k] for k in ("W1", "b1", "W2", "b2")}
''',
    ),
    dict(
        assignment="03_chain_rule",
        function="mlp_backward",
        style="forward ReLU with torch.where; upstream gradient threaded through a loop over the two layers (reversed list of (input, weight, names))",
        added="",
        code=r'''def mlp_backward(x, y, W1, b1, W2, b2):
    """Gradients of L = mse(relu(x W1ᵀ + b1) W2ᵀ + b2, y) by the chain rule.

    Return {"W1": dL/dW1, "b1": dL/db1, "W2": dL/dW2, "b2": dL/db2}, as L.backward() would fill .grad.
    """
    z1 = x @ W1.T + b1
    h = torch.where(z1 > 0, z1, torch.zeros_like(z1))
    y_hat = h @ W2.T + b2

    layers = [(x, W1, "W1", "b1"), (h, W2, "W2", "b2")]
    grad = mse_loss_grad(y_hat, y)                 # upstream gradient of y_hat
    result = {}
    for i, (inp, W, w_name, b_name) in enumerate(reversed(layers)):
        grad_in, result[w_name], result[b_name] = linear_backward(grad, inp, W)
        if i == 0:                                 # between the layers: the ReLU
            grad = relu_backward(grad_in, z1)
    return result
''',
    ),
    # ------------------------------------------------------------ 04_computational_graph: graph_nodes
    dict(
        assignment="04_computational_graph",
        function="graph_nodes",
        style="recursive visit() with a set of seen nodes, as the text suggests",
        added="",
        code=r'''def graph_nodes(t):
    """Return the names (type(node).__name__) of the autograd nodes reachable from t.grad_fn.

    Depth first, pre-order, following node.next_functions in order, skipping None,
    each node listed once. Return [] when t has no grad_fn.
    """
    names = []
    seen = set()

    def visit(node):
        if node is None or node in seen:
            return
        seen.add(node)
        names.append(type(node).__name__)
        for child, _ in node.next_functions:
            visit(child)

    visit(t.grad_fn)
    return names
''',
    ),
    dict(
        assignment="04_computational_graph",
        function="graph_nodes",
        style="iterative stack, children pushed in reverse, a node marked when popped (no recursion limit)",
        added="",
        code=r'''def graph_nodes(t):
    """Return the names (type(node).__name__) of the autograd nodes reachable from t.grad_fn.

    Depth first, pre-order, following node.next_functions in order, skipping None,
    each node listed once. Return [] when t has no grad_fn.
    """
    if t.grad_fn is None:
        return []
    order, seen = [], set()
    stack = [t.grad_fn]
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        order.append(type(node).__name__)
        children = [child for child, _ in node.next_functions if child is not None]
        stack.extend(reversed(children))
    return order
''',
    ),
    dict(
        assignment="04_computational_graph",
        function="graph_nodes",
        style="from __future__ import annotations, typing Iterator/Optional, recursive generator with yield from; leftover unused numpy import",
        added="",
        code=r'''from __future__ import annotations

from typing import Iterator, Optional

import numpy as np   # not needed any more


def graph_nodes(t: torch.Tensor) -> list[str]:
    """Return the names (type(node).__name__) of the autograd nodes reachable from t.grad_fn.

    Depth first, pre-order, following node.next_functions in order, skipping None,
    each node listed once. Return [] when t has no grad_fn.
    """
    seen: set = set()

    def walk(node: Optional[object]) -> Iterator[object]:
        if node is None or node in seen:
            return
        seen.add(node)
        yield node
        for child, _index in node.next_functions:
            yield from walk(child)

    return [type(node).__name__ for node in walk(t.grad_fn)]
''',
    ),
    dict(
        assignment="04_computational_graph",
        function="graph_nodes",
        style="a dataclass in an added cell holding the walk's state (list + set) with a visit method; hasattr check for non-tensors",
        added=r'''from dataclasses import dataclass, field


@dataclass
class Walk:
    """State of a depth-first, pre-order walk over grad_fn nodes."""
    nodes: list = field(default_factory=list)
    seen: set = field(default_factory=set)

    def visit(self, node):
        if node is None or node in self.seen:
            return self
        self.seen.add(node)
        self.nodes.append(node)
        for child, _ in node.next_functions:
            self.visit(child)
        return self
''',
        code=r'''def graph_nodes(t):
    """Return the names (type(node).__name__) of the autograd nodes reachable from t.grad_fn.

    Depth first, pre-order, following node.next_functions in order, skipping None,
    each node listed once. Return [] when t has no grad_fn.
    """
    if not hasattr(t, "grad_fn"):
        raise TypeError(f"expected a tensor, got {type(t).__name__}")
    return [type(n).__name__ for n in Walk().visit(t.grad_fn).nodes]
''',
    ),
    dict(
        assignment="04_computational_graph",
        function="graph_nodes",
        style="seen set keyed by id() (the nodes themselves kept alive in the result list); walrus in the loop; print for debugging behind a flag",
        added="",
        code=r'''def graph_nodes(t):
    """Return the names (type(node).__name__) of the autograd nodes reachable from t.grad_fn.

    Depth first, pre-order, following node.next_functions in order, skipping None,
    each node listed once. Return [] when t has no grad_fn.
    """
    DEBUG = False
    found = []              # the node objects, in walk order (keeps them alive, so ids stay unique)
    seen_ids = set()

    def visit(node, depth=0):
        if id(node) in seen_ids:
            return
        seen_ids.add(id(node))
        found.append(node)
        if DEBUG:
            print("  " * depth + type(node).__name__)
        for pair in node.next_functions:
            if (child := pair[0]) is not None:
                visit(child, depth + 1)

    if t.grad_fn is not None:
        visit(t.grad_fn)
    return [type(node).__name__ for node in found]
''',
    ),
    # ------------------------------------------------------------ 04_computational_graph: leaf_tensors
    dict(
        assignment="04_computational_graph",
        function="leaf_tensors",
        style="recursive walk, AccumulateGrad recognised by type(node).__name__, node.variable collected",
        added="",
        code=r'''def leaf_tensors(t):
    """Return the tensors held by the AccumulateGrad nodes reachable from t.grad_fn.

    Same walk as graph_nodes (depth first, pre-order, each node once); return node.variable
    itself (no copies), in the order the walk meets them. Return [] when t has no grad_fn.
    """
    leaves = []
    seen = set()

    def visit(node):
        if node is None or node in seen:
            return
        seen.add(node)
        if type(node).__name__ == "AccumulateGrad":
            leaves.append(node.variable)
        for child, _ in node.next_functions:
            visit(child)

    visit(t.grad_fn)
    return leaves
''',
    ),
    dict(
        assignment="04_computational_graph",
        function="leaf_tensors",
        style="iterative stack; hasattr(node, 'variable') to spot AccumulateGrad; tensors deduplicated by id (never `in` on tensors)",
        added="",
        code=r'''def leaf_tensors(t):
    """Return the tensors held by the AccumulateGrad nodes reachable from t.grad_fn.

    Same walk as graph_nodes (depth first, pre-order, each node once); return node.variable
    itself (no copies), in the order the walk meets them. Return [] when t has no grad_fn.
    """
    if t.grad_fn is None:
        return []
    leaves, leaf_ids, seen = [], set(), set()
    stack = [t.grad_fn]
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        if hasattr(node, "variable") and id(node.variable) not in leaf_ids:
            leaf_ids.add(id(node.variable))
            leaves.append(node.variable)
        stack.extend(child for child, _ in reversed(node.next_functions) if child is not None)
    return leaves
''',
    ),
    dict(
        assignment="04_computational_graph",
        function="leaf_tensors",
        style="a shared walk helper in an added cell (recursive, returns the nodes) reused with a comprehension; typing List",
        added=r'''from typing import List


def walk_nodes(root) -> List[object]:
    """Every node reachable from root, depth first, pre-order, each once ([] for root None)."""
    out, seen = [], set()

    def visit(node):
        if node is not None and node not in seen:
            seen.add(node)
            out.append(node)
            for child, _ in node.next_functions:
                visit(child)

    visit(root)
    return out
''',
        code=r'''def leaf_tensors(t):
    """Return the tensors held by the AccumulateGrad nodes reachable from t.grad_fn.

    Same walk as graph_nodes (depth first, pre-order, each node once); return node.variable
    itself (no copies), in the order the walk meets them. Return [] when t has no grad_fn.
    """
    return [node.variable for node in walk_nodes(t.grad_fn)
            if type(node).__name__ == "AccumulateGrad"]
''',
    ),
    dict(
        assignment="04_computational_graph",
        function="leaf_tensors",
        style="from __future__ import annotations, NamedTuple record (node, depth) on an explicit stack, Optional annotations",
        added=r'''from typing import NamedTuple, Optional


class Frame(NamedTuple):
    node: object
    depth: int
''',
        code=r'''from __future__ import annotations


def leaf_tensors(t: torch.Tensor) -> list[torch.Tensor]:
    """Return the tensors held by the AccumulateGrad nodes reachable from t.grad_fn.

    Same walk as graph_nodes (depth first, pre-order, each node once); return node.variable
    itself (no copies), in the order the walk meets them. Return [] when t has no grad_fn.
    """
    root: Optional[object] = t.grad_fn
    stack = [Frame(root, 0)] if root is not None else []
    seen, leaves = set(), []
    while stack:
        frame = stack.pop()
        if frame.node in seen:
            continue
        seen.add(frame.node)
        if type(frame.node).__name__ == "AccumulateGrad":
            leaves.append(frame.node.variable)
        for child, _ in reversed(frame.node.next_functions):
            if child is not None:
                stack.append(Frame(child, frame.depth + 1))
    return leaves
''',
    ),
    # ------------------------------------------------------------ 04_computational_graph: hidden_grad
    dict(
        assignment="04_computational_graph",
        function="hidden_grad",
        style="layers one at a time, h.retain_grad(), F.mse_loss, one backward, return h.grad",
        added="",
        code=r'''def hidden_grad(model, x, y):
    """Return grad_h = ∂L/∂h for L = F.mse_loss(model(x), y), where h is the output of model[1] (the ReLU).

    Use autograd (h.retain_grad() or a hook) with a single L.backward(), which also leaves
    every parameter's .grad as L.backward() does.
    """
    z = model[0](x)
    h = model[1](z)
    h.retain_grad()
    out = model[2](h)
    L = F.mse_loss(out, y)
    L.backward()
    return h.grad
''',
    ),
    dict(
        assignment="04_computational_graph",
        function="hidden_grad",
        style="tensor hook appending to a list (list.append as the hook), handle removed afterwards",
        added="",
        code=r'''def hidden_grad(model, x, y):
    """Return grad_h = ∂L/∂h for L = F.mse_loss(model(x), y), where h is the output of model[1] (the ReLU).

    Use autograd (h.retain_grad() or a hook) with a single L.backward(), which also leaves
    every parameter's .grad as L.backward() does.
    """
    caught = []
    h = model[1](model[0](x))
    handle = h.register_hook(caught.append)     # returns None: the gradient goes on unchanged
    loss = F.mse_loss(model[2](h), y)
    loss.backward()
    handle.remove()
    assert len(caught) == 1
    return caught[0]
''',
    ),
    dict(
        assignment="04_computational_graph",
        function="hidden_grad",
        style="enumerate over the Sequential, retain_grad on the module at index 1; type annotations with from __future__ and typing",
        added="",
        code=r'''from __future__ import annotations

from typing import Optional


def hidden_grad(model: nn.Sequential, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Return grad_h = ∂L/∂h for L = F.mse_loss(model(x), y), where h is the output of model[1] (the ReLU).

    Use autograd (h.retain_grad() or a hook) with a single L.backward(), which also leaves
    every parameter's .grad as L.backward() does.
    """
    h: Optional[torch.Tensor] = None
    out = x
    for i, layer in enumerate(model):
        out = layer(out)
        if i == 1:
            h = out
            h.retain_grad()
    F.mse_loss(out, y).backward()
    return h.grad
''',
    ),
    dict(
        assignment="04_computational_graph",
        function="hidden_grad",
        style="nested hook function writing into a dict via nonlocal-free closure; isinstance check with type(...).__name__ in the message",
        added="",
        code=r'''def hidden_grad(model, x, y):
    """Return grad_h = ∂L/∂h for L = F.mse_loss(model(x), y), where h is the output of model[1] (the ReLU).

    Use autograd (h.retain_grad() or a hook) with a single L.backward(), which also leaves
    every parameter's .grad as L.backward() does.
    """
    if not isinstance(model, nn.Sequential):
        raise TypeError(f"expected nn.Sequential, got {type(model).__name__}")
    store = {}

    def keep(grad):
        store["h"] = grad

    first, relu, second = model[0], model[1], model[2]
    h = relu(first(x))
    h.register_hook(keep)
    loss = F.mse_loss(second(h), y)
    loss.backward()
    return store["h"]
''',
    ),
    # ------------------------------------------------------------ 05_gradient_descent: sgd_step
    dict(
        assignment="05_gradient_descent",
        function="sgd_step",
        style="with torch.no_grad(): p.add_(p.grad, alpha=-lr), skipping None with continue",
        added="",
        code=r'''def sgd_step(params, lr):
    """Update every tensor p in the list in place: p <- p - lr * p.grad, as torch.optim.SGD(params, lr).step().

    Skip tensors whose .grad is None; each p must stay the same leaf tensor (use torch.no_grad()).
    """
    with torch.no_grad():
        for p in params:
            if p.grad is None:
                continue
            p.add_(p.grad, alpha=-lr)
''',
    ),
    dict(
        assignment="05_gradient_descent",
        function="sgd_step",
        style="@torch.no_grad() as a decorator, p.sub_(lr * p.grad); annotated, returns None explicitly",
        added="",
        code=r'''@torch.no_grad()
def sgd_step(params: list[torch.Tensor], lr: float) -> None:
    """Update every tensor p in the list in place: p <- p - lr * p.grad, as torch.optim.SGD(params, lr).step().

    Skip tensors whose .grad is None; each p must stay the same leaf tensor (use torch.no_grad()).
    """
    for p in params:
        if p.grad is not None:
            p.sub_(lr * p.grad)
    return None
''',
    ),
    dict(
        assignment="05_gradient_descent",
        function="sgd_step",
        style="p.data -= lr * p.grad inside a no_grad block, over a filtered comprehension",
        added="",
        code=r'''def sgd_step(params, lr):
    """Update every tensor p in the list in place: p <- p - lr * p.grad, as torch.optim.SGD(params, lr).step().

    Skip tensors whose .grad is None; each p must stay the same leaf tensor (use torch.no_grad()).
    """
    with torch.no_grad():
        for p in [q for q in params if q.grad is not None]:
            p.data -= lr * p.grad
''',
    ),
    dict(
        assignment="05_gradient_descent",
        function="sgd_step",
        style="filter with a lambda, p.sub_(p.grad, alpha=lr), print for debugging behind a flag, enumerate",
        added="",
        code=r'''def sgd_step(params, lr):
    """Update every tensor p in the list in place: p <- p - lr * p.grad, as torch.optim.SGD(params, lr).step().

    Skip tensors whose .grad is None; each p must stay the same leaf tensor (use torch.no_grad()).
    """
    verbose = False
    with torch.no_grad():
        for i, p in enumerate(filter(lambda q: q.grad is not None, params)):
            p.sub_(p.grad, alpha=lr)
            if verbose:
                print(f"param {i}: shape {tuple(p.shape)}, |grad| = {p.grad.norm().item():.3g}")
''',
    ),
    dict(
        assignment="05_gradient_descent",
        function="sgd_step",
        style="copy_ of the new value into the same tensor under no_grad (p.copy_(p - lr * p.grad)); helper in an added cell with functools.wraps-decorated no_grad wrapper",
        added=r'''import functools


def without_grad(fn):
    """Run fn with autograd recording off (like @torch.no_grad())."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with torch.no_grad():
            return fn(*args, **kwargs)
    return wrapper
''',
        code=r'''@without_grad
def sgd_step(params, lr):
    """Update every tensor p in the list in place: p <- p - lr * p.grad, as torch.optim.SGD(params, lr).step().

    Skip tensors whose .grad is None; each p must stay the same leaf tensor (use torch.no_grad()).
    """
    for p in params:
        g = p.grad
        if g is None:
            continue
        p.copy_(p - lr * g)       # same tensor object, new numbers
''',
    ),
    # ------------------------------------------------------------ 05_gradient_descent: sgd_momentum_update
    dict(
        assignment="05_gradient_descent",
        function="sgd_momentum_update",
        style="the docstring's recipe line by line, out-of-place arithmetic, early return for momentum 0",
        added="",
        code=r'''def sgd_momentum_update(p, grad, buf, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False):
    """One step of torch.optim.SGD for one parameter; return (new_p, new_buf) and change no input.

    g = grad + weight_decay * p; buf = g.clone() on the first step (buf is None), else
    buf = momentum * buf + (1 - dampening) * g; step = g + momentum * buf if nesterov else buf
    (step = g and new_buf = None when momentum == 0); new_p = p - lr * step.
    """
    g = grad
    if weight_decay != 0:
        g = g + weight_decay * p
    if momentum == 0:
        return p - lr * g, None
    if buf is None:
        new_buf = g.clone()
    else:
        new_buf = momentum * buf + (1 - dampening) * g
    step = g + momentum * new_buf if nesterov else new_buf
    return p - lr * step, new_buf
''',
    ),
    dict(
        assignment="05_gradient_descent",
        function="sgd_momentum_update",
        style="PyTorch's own spelling out of place: grad.add(p, alpha=wd), buf.mul(m).add(g, alpha=1 - d), p.add(step, alpha=-lr)",
        added="",
        code=r'''def sgd_momentum_update(p, grad, buf, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False):
    """One step of torch.optim.SGD for one parameter; return (new_p, new_buf) and change no input.

    g = grad + weight_decay * p; buf = g.clone() on the first step (buf is None), else
    buf = momentum * buf + (1 - dampening) * g; step = g + momentum * buf if nesterov else buf
    (step = g and new_buf = None when momentum == 0); new_p = p - lr * step.
    """
    d_p = grad.add(p, alpha=weight_decay) if weight_decay != 0 else grad
    new_buf = None
    if momentum != 0:
        if buf is None:
            new_buf = torch.clone(d_p).detach()
        else:
            new_buf = buf.mul(momentum).add(d_p, alpha=1 - dampening)
        d_p = d_p.add(new_buf, alpha=momentum) if nesterov else new_buf
    return p.add(d_p, alpha=-lr), new_buf
''',
    ),
    dict(
        assignment="05_gradient_descent",
        function="sgd_momentum_update",
        style="match statement on (buf is None, nesterov); annotated with `torch.Tensor | None` and a tuple return",
        added="",
        code=r'''def sgd_momentum_update(p: torch.Tensor, grad: torch.Tensor, buf: torch.Tensor | None, lr: float,
                        momentum: float = 0.0, dampening: float = 0.0, weight_decay: float = 0.0,
                        nesterov: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
    """One step of torch.optim.SGD for one parameter; return (new_p, new_buf) and change no input.

    g = grad + weight_decay * p; buf = g.clone() on the first step (buf is None), else
    buf = momentum * buf + (1 - dampening) * g; step = g + momentum * buf if nesterov else buf
    (step = g and new_buf = None when momentum == 0); new_p = p - lr * step.
    """
    g = grad + weight_decay * p if weight_decay else grad
    if not momentum:
        return p - lr * g, None
    match buf is None, nesterov:
        case True, _:
            new_buf = g.clone()
        case False, _:
            new_buf = momentum * buf + (1 - dampening) * g
    match nesterov:
        case True:
            step = g + momentum * new_buf
        case _:
            step = new_buf
    return p - lr * step, new_buf
''',
    ),
    dict(
        assignment="05_gradient_descent",
        function="sgd_momentum_update",
        style="nested helper functions for each line of the formula; copy.deepcopy for the first buffer; asserts that inputs are left alone",
        added="",
        code=r'''import copy


def sgd_momentum_update(p, grad, buf, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False):
    """One step of torch.optim.SGD for one parameter; return (new_p, new_buf) and change no input.

    g = grad + weight_decay * p; buf = g.clone() on the first step (buf is None), else
    buf = momentum * buf + (1 - dampening) * g; step = g + momentum * buf if nesterov else buf
    (step = g and new_buf = None when momentum == 0); new_p = p - lr * step.
    """
    def decayed_gradient():
        return grad + weight_decay * p if weight_decay != 0 else grad

    def next_buffer(g):
        if buf is None:
            return copy.deepcopy(g.detach())           # first step: a plain copy, no dampening
        return momentum * buf + (1 - dampening) * g

    def direction(g, m):
        return g + momentum * m if nesterov else m

    g = decayed_gradient()
    if momentum == 0:
        new_buf, step = None, g
    else:
        new_buf = next_buffer(g)
        step = direction(g, new_buf)
    new_p = p - lr * step
    assert new_p is not p, "a new tensor, not p changed in place"
    return new_p, new_buf
''',
    ),
    dict(
        assignment="05_gradient_descent",
        function="sgd_momentum_update",
        style="operator.add/mul/sub, math.isclose for the zero-momentum test, nested conditional expressions instead of if blocks",
        added="",
        code=r'''import math
import operator


def sgd_momentum_update(p, grad, buf, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False):
    """One step of torch.optim.SGD for one parameter; return (new_p, new_buf) and change no input.

    g = grad + weight_decay * p; buf = g.clone() on the first step (buf is None), else
    buf = momentum * buf + (1 - dampening) * g; step = g + momentum * buf if nesterov else buf
    (step = g and new_buf = None when momentum == 0); new_p = p - lr * step.
    """
    g = operator.add(grad, operator.mul(weight_decay, p)) if weight_decay != 0 else grad
    no_momentum = math.isclose(momentum, 0.0, abs_tol=0.0)
    new_buf = None if no_momentum else (g.clone() if buf is None else momentum * buf + (1 - dampening) * g)
    step = g if no_momentum else (g + momentum * new_buf if nesterov else new_buf)
    return operator.sub(p, lr * step), new_buf
''',
    ),
    # ------------------------------------------------------------ 06_putting_it_together: train_mlp
    dict(
        assignment="06_putting_it_together",
        function="train_mlp",
        style="straight loop with the notebook's names, clones of the params, clamp(min=0) forward, out-of-place update",
        added="",
        code=r'''def train_mlp(x, y, params, lr, steps):
    """Run `steps` steps of gradient descent on mse(relu(x W1ᵀ + b1) W2ᵀ + b2, y), by hand.

    Return (new_params, losses): the trained {"W1", "b1", "W2", "b2"} and the loss before each update.
    """
    W1, b1, W2, b2 = (params[k].clone() for k in ("W1", "b1", "W2", "b2"))
    losses = []
    for _ in range(steps):
        z1 = x @ W1.T + b1
        h = z1.clamp(min=0)
        y_hat = h @ W2.T + b2
        loss = ((y_hat - y) ** 2).mean()
        losses.append(loss.item())

        grad_y_hat = 2 * (y_hat - y) / y_hat.numel()
        grad_W2 = grad_y_hat.T @ h
        grad_b2 = grad_y_hat.sum(dim=0)
        grad_h = grad_y_hat @ W2
        grad_z1 = grad_h * (z1 > 0)
        grad_W1 = grad_z1.T @ x
        grad_b1 = grad_z1.sum(dim=0)

        W1 = W1 - lr * grad_W1
        b1 = b1 - lr * grad_b1
        W2 = W2 - lr * grad_W2
        b2 = b2 - lr * grad_b2
    return {"W1": W1, "b1": b1, "W2": W2, "b2": b2}, losses
''',
    ),
    dict(
        assignment="06_putting_it_together",
        function="train_mlp",
        style="in-place updates (sub_) on detached clones under torch.no_grad(); dict of parameters and dict of gradients; float(loss)",
        added="",
        code=r'''def train_mlp(x, y, params, lr, steps):
    """Run `steps` steps of gradient descent on mse(relu(x W1ᵀ + b1) W2ᵀ + b2, y), by hand.

    Return (new_params, losses): the trained {"W1", "b1", "W2", "b2"} and the loss before each update.
    """
    p = {k: v.detach().clone() for k, v in params.items()}
    losses = []
    for step in range(steps):
        z1 = x @ p["W1"].T + p["b1"]
        h = torch.where(z1 > 0, z1, torch.zeros_like(z1))
        y_hat = h @ p["W2"].T + p["b2"]
        losses.append(float(((y_hat - y) ** 2).mean()))

        grad_y_hat = 2 * (y_hat - y) / y_hat.numel()
        grad_h = grad_y_hat @ p["W2"]
        grad_z1 = torch.where(z1 > 0, grad_h, torch.zeros_like(grad_h))
        grads = {
            "W2": grad_y_hat.T @ h,
            "b2": grad_y_hat.sum(0),
            "W1": grad_z1.T @ x,
            "b1": grad_z1.sum(0),
        }
        with torch.no_grad():
            for k, g in grads.items():
                p[k].sub_(lr * g)
    return p, losses
''',
    ),
    dict(
        assignment="06_putting_it_together",
        function="train_mlp",
        style="constants and a mask helper in an added cell; nested forward/backward functions; dict comprehension update over zip; print every 100 steps behind a flag",
        added=r'''PARAM_NAMES = ("W1", "b1", "W2", "b2")


def active(z):
    """ReLU's slope as a float mask: 1 where z > 0, 0 elsewhere (also at 0)."""
    return (z > 0).to(z.dtype)
''',
        code=r'''def train_mlp(x, y, params, lr, steps):
    """Run `steps` steps of gradient descent on mse(relu(x W1ᵀ + b1) W2ᵀ + b2, y), by hand.

    Return (new_params, losses): the trained {"W1", "b1", "W2", "b2"} and the loss before each update.
    """
    def forward(W1, b1, W2, b2):
        z1 = x @ W1.T + b1
        h = z1 * active(z1)
        return z1, h, h @ W2.T + b2

    def backward(z1, h, y_hat, W2):
        grad_y_hat = 2 * (y_hat - y) / y_hat.numel()
        grad_h = grad_y_hat @ W2
        grad_z1 = grad_h * active(z1)
        return grad_z1.T @ x, grad_z1.sum(0), grad_y_hat.T @ h, grad_y_hat.sum(0)

    verbose = False
    current = {k: params[k].clone() for k in PARAM_NAMES}
    losses = []
    for step in range(steps):
        z1, h, y_hat = forward(*(current[k] for k in PARAM_NAMES))
        loss = ((y_hat - y) ** 2).mean()
        losses.append(loss.item())
        if verbose and step % 100 == 0:
            print(f"step {step}: loss {losses[-1]:.4f}")
        grads = backward(z1, h, y_hat, current["W2"])
        current = {k: current[k] - lr * g for k, g in zip(PARAM_NAMES, grads)}
    return current, losses
''',
    ),
    dict(
        assignment="06_putting_it_together",
        function="train_mlp",
        style="annotated (dict[str, torch.Tensor], tuple return), torch.maximum forward, torch.matmul and .t(), copy.copy of the dict then replaced tensors, walrus for the residual",
        added="",
        code=r'''import copy


def train_mlp(x: torch.Tensor, y: torch.Tensor, params: dict[str, torch.Tensor], lr: float, steps: int
              ) -> tuple[dict[str, torch.Tensor], list[float]]:
    """Run `steps` steps of gradient descent on mse(relu(x W1ᵀ + b1) W2ᵀ + b2, y), by hand.

    Return (new_params, losses): the trained {"W1", "b1", "W2", "b2"} and the loss before each update.
    """
    new_params = copy.copy(params)                       # a new dict; tensors replaced below, never changed
    for k in new_params:
        new_params[k] = new_params[k].clone()
    losses: list[float] = []
    for _ in range(steps):
        W1, b1, W2, b2 = new_params["W1"], new_params["b1"], new_params["W2"], new_params["b2"]
        z1 = torch.matmul(x, W1.t()) + b1
        h = torch.maximum(z1, torch.zeros_like(z1))
        y_hat = torch.matmul(h, W2.t()) + b2
        losses.append(torch.mean((residual := y_hat - y) ** 2).item())

        grad_y_hat = 2 * residual / residual.numel()
        grad_W2 = torch.matmul(grad_y_hat.t(), h)
        grad_b2 = grad_y_hat.sum(dim=0)
        grad_h = torch.matmul(grad_y_hat, W2)
        grad_z1 = grad_h * (z1 > 0).to(grad_h.dtype)
        grad_W1 = torch.matmul(grad_z1.t(), x)
        grad_b1 = grad_z1.sum(dim=0)

        new_params = {"W1": W1 - lr * grad_W1, "b1": b1 - lr * grad_b1,
                      "W2": W2 - lr * grad_W2, "b2": b2 - lr * grad_b2}
    return new_params, losses
''',
    ),
    dict(
        assignment="06_putting_it_together",
        function="train_mlp",
        style="@torch.no_grad() on a nested update helper; p.add_(g, alpha=-lr) on clones; itertools.repeat for the step count; enumerate/zip over names and gradients",
        added="",
        code=r'''import itertools


def train_mlp(x, y, params, lr, steps):
    """Run `steps` steps of gradient descent on mse(relu(x W1ᵀ + b1) W2ᵀ + b2, y), by hand.

    Return (new_params, losses): the trained {"W1", "b1", "W2", "b2"} and the loss before each update.
    """
    names = ["W1", "b1", "W2", "b2"]
    theta = {name: params[name].detach().clone() for name in names}

    @torch.no_grad()
    def update(grads):
        for name, grad in zip(names, grads):
            theta[name].add_(grad, alpha=-lr)

    losses = []
    for _ in itertools.repeat(None, steps):
        z1 = x @ theta["W1"].T + theta["b1"]
        mask = z1 > 0
        h = z1 * mask
        y_hat = h @ theta["W2"].T + theta["b2"]
        M = y_hat.numel()
        losses.append((((y_hat - y) ** 2).sum() / M).item())

        grad_y_hat = 2 * (y_hat - y) / M
        grad_h = grad_y_hat @ theta["W2"]
        grad_z1 = grad_h * mask
        update([grad_z1.T @ x, grad_z1.sum(0), grad_y_hat.T @ h, grad_y_hat.sum(0)])
    return theta, losses
''',
    ),
    # ------------------------------------------------------------ 07_custom_autograd: LinearFunction
    dict(
        assignment="07_custom_autograd",
        function="LinearFunction",
        style="save x, W and b (None allowed) with save_for_backward; backward by the three formulas with needs_input_grad",
        added="",
        code=r'''class LinearFunction(torch.autograd.Function):
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
''',
    ),
    dict(
        assignment="07_custom_autograd",
        function="LinearFunction",
        style="@once_differentiable on backward (imported from torch.autograd.function, as 'Extending torch.autograd' shows); F.linear in forward; bias flag on ctx",
        added="",
        code=r'''from torch.autograd.function import once_differentiable


class LinearFunction(torch.autograd.Function):
    """y = x W^T + b for x (N, in), W (out, in), b (out,) or None, with a backward written by hand."""

    @staticmethod
    def forward(ctx, x, W, b):
        """Return x @ W.T + b (no bias when b is None); save what backward needs in ctx."""
        ctx.save_for_backward(x, W)
        ctx.has_bias = b is not None
        return F.linear(x, W, b)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out):
        """Return (grad_x, grad_W, grad_b) = (grad_out W, grad_out^T x, grad_out summed over the batch).

        None for each input with ctx.needs_input_grad False, and for b when it is None. No autograd here.
        """
        x, W = ctx.saved_tensors
        need_x, need_W, need_b = ctx.needs_input_grad
        grad_x = grad_out.mm(W) if need_x else None
        grad_W = grad_out.t().mm(x) if need_W else None
        grad_b = grad_out.sum(0) if (ctx.has_bias and need_b) else None
        return grad_x, grad_W, grad_b
''',
    ),
    dict(
        assignment="07_custom_autograd",
        function="LinearFunction",
        style="torch.addmm / torch.mm in forward; backward builds a list and returns tuple(...); annotations with `torch.Tensor | None`",
        added="",
        code=r'''class LinearFunction(torch.autograd.Function):
    """y = x W^T + b for x (N, in), W (out, in), b (out,) or None, with a backward written by hand."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, W: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
        """Return x @ W.T + b (no bias when b is None); save what backward needs in ctx."""
        ctx.save_for_backward(x, W)
        ctx.bias_is_none = b is None
        if b is None:
            return torch.mm(x, W.t())
        return torch.addmm(b, x, W.t())

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        """Return (grad_x, grad_W, grad_b) = (grad_out W, grad_out^T x, grad_out summed over the batch).

        None for each input with ctx.needs_input_grad False, and for b when it is None. No autograd here.
        """
        x, W = ctx.saved_tensors
        grads = [None, None, None]
        if ctx.needs_input_grad[0]:
            grads[0] = torch.matmul(grad_out, W)
        if ctx.needs_input_grad[1]:
            grads[1] = torch.matmul(grad_out.transpose(0, 1), x)
        if not ctx.bias_is_none and ctx.needs_input_grad[2]:
            grads[2] = grad_out.sum(dim=0)
        return tuple(grads)
''',
    ),
    dict(
        assignment="07_custom_autograd",
        function="LinearFunction",
        style="helper functions in an added cell for the bias sum and a guarded product; zip over needs_input_grad and lambdas in backward",
        added=r'''def batch_sum(g):
    """Sum the upstream gradient over the batch: the bias gradient."""
    return g.sum(dim=0)


def if_needed(flag, compute):
    """compute() when flag is True, else None."""
    return compute() if flag else None
''',
        code=r'''class LinearFunction(torch.autograd.Function):
    """y = x W^T + b for x (N, in), W (out, in), b (out,) or None, with a backward written by hand."""

    @staticmethod
    def forward(ctx, x, W, b):
        """Return x @ W.T + b (no bias when b is None); save what backward needs in ctx."""
        ctx.save_for_backward(x, W, b)
        out = torch.matmul(x, W.T)
        return out + b if b is not None else out

    @staticmethod
    def backward(ctx, grad_out):
        """Return (grad_x, grad_W, grad_b) = (grad_out W, grad_out^T x, grad_out summed over the batch).

        None for each input with ctx.needs_input_grad False, and for b when it is None. No autograd here.
        """
        x, W, b = ctx.saved_tensors
        rules = (
            lambda: grad_out @ W,
            lambda: grad_out.T @ x,
            lambda: None if b is None else batch_sum(grad_out),
        )
        return tuple(if_needed(need, rule) for need, rule in zip(ctx.needs_input_grad, rules))
''',
    ),
    dict(
        assignment="07_custom_autograd",
        function="LinearFunction",
        style="unused math/functools imports left at the top of the cell; x.matmul(W.mT) and an in-place += on the fresh forward result; walrus on ctx.saved_tensors; shape assert in backward",
        added="",
        code=r'''import functools
import math


class LinearFunction(torch.autograd.Function):
    """y = x W^T + b for x (N, in), W (out, in), b (out,) or None, with a backward written by hand."""

    @staticmethod
    def forward(ctx, x, W, b):
        """Return x @ W.T + b (no bias when b is None); save what backward needs in ctx."""
        y = x.matmul(W.mT)
        if b is not None:
            y += b                     # y is a fresh tensor: adding in place is fine here
        ctx.save_for_backward(x, W)
        ctx.with_bias = b is not None
        return y

    @staticmethod
    def backward(ctx, grad_out):
        """Return (grad_x, grad_W, grad_b) = (grad_out W, grad_out^T x, grad_out summed over the batch).

        None for each input with ctx.needs_input_grad False, and for b when it is None. No autograd here.
        """
        assert len(saved := ctx.saved_tensors) == 2
        x, W = saved
        grad_x = grad_out @ W if ctx.needs_input_grad[0] else None
        grad_W = grad_out.mT @ x if ctx.needs_input_grad[1] else None
        grad_b = grad_out.sum(0) if ctx.with_bias and ctx.needs_input_grad[2] else None
        if grad_W is not None:
            assert grad_W.shape == W.shape, f"{tuple(grad_W.shape)} != {tuple(W.shape)}"
        return grad_x, grad_W, grad_b
''',
    ),
    # ------------------------------------------------------------ 07_custom_autograd: FakeQuantize
    dict(
        assignment="07_custom_autograd",
        function="FakeQuantize",
        style="save the rounded value w/scale; mask -128 <= r <= 127 built from it; grad_out * mask",
        added="",
        code=r'''class FakeQuantize(torch.autograd.Function):
    """Round w to the int8 grid of step scale (forward); pass the gradient straight through (backward)."""

    @staticmethod
    def forward(ctx, w, scale):
        """Return scale * clamp(round(w / scale), -128, 127), in w's dtype; save what backward needs."""
        r = torch.round(w / scale)
        ctx.save_for_backward(r)
        ctx.scale = scale
        return scale * torch.clamp(r, -128, 127)

    @staticmethod
    def backward(ctx, grad_out):
        """Return (grad_w, None): grad_out where -128 <= round(w / scale) <= 127, else 0; None for scale."""
        (r,) = ctx.saved_tensors
        inside = (r >= -128) & (r <= 127)
        return grad_out * inside, None
''',
    ),
    dict(
        assignment="07_custom_autograd",
        function="FakeQuantize",
        style="save w itself and scale on ctx; backward recomputes the rounding; torch.where; @once_differentiable",
        added="",
        code=r'''from torch.autograd.function import once_differentiable


class FakeQuantize(torch.autograd.Function):
    """Round w to the int8 grid of step scale (forward); pass the gradient straight through (backward)."""

    @staticmethod
    def forward(ctx, w, scale):
        """Return scale * clamp(round(w / scale), -128, 127), in w's dtype; save what backward needs."""
        ctx.save_for_backward(w)
        ctx.scale = scale
        return torch.clamp(torch.round(w / scale), min=-128, max=127) * scale

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out):
        """Return (grad_w, None): grad_out where -128 <= round(w / scale) <= 127, else 0; None for scale."""
        w, = ctx.saved_tensors
        k = torch.round(w / ctx.scale)
        keep = torch.logical_and(k >= -128, k <= 127)
        return torch.where(keep, grad_out, torch.zeros_like(grad_out)), None
''',
    ),
    dict(
        assignment="07_custom_autograd",
        function="FakeQuantize",
        style="from __future__ import annotations, typing Optional/Tuple; constants in an added cell; save the bool mask; type(w).__name__ in the error; .to(grad_out.dtype)",
        added=r'''QMIN, QMAX = -128, 127       # the int8 grid
''',
        code=r'''from __future__ import annotations

from typing import Optional, Tuple


class FakeQuantize(torch.autograd.Function):
    """Round w to the int8 grid of step scale (forward); pass the gradient straight through (backward)."""

    @staticmethod
    def forward(ctx, w: torch.Tensor, scale: float) -> torch.Tensor:
        """Return scale * clamp(round(w / scale), -128, 127), in w's dtype; save what backward needs."""
        if not isinstance(w, torch.Tensor):
            raise TypeError(f"w must be a tensor, not {type(w).__name__}")
        if scale <= 0:
            raise ValueError(f"scale must be positive, got {scale}")
        k = (w / scale).round()
        ctx.save_for_backward((k >= QMIN) & (k <= QMAX))
        return k.clamp(QMIN, QMAX) * scale

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
        """Return (grad_w, None): grad_out where -128 <= round(w / scale) <= 127, else 0; None for scale."""
        (mask,) = ctx.saved_tensors
        return grad_out * mask.to(grad_out.dtype), None
''',
    ),
    dict(
        assignment="07_custom_autograd",
        function="FakeQuantize",
        style="functools.lru_cache on a pure helper giving the grid bounds for a bit width; math.isfinite check; leftover unused numpy import; masked_fill",
        added=r'''import functools
import math


@functools.lru_cache(maxsize=None)
def int_range(bits):
    """(lowest, highest) integer of a signed `bits`-bit grid: (-128, 127) for 8 bits."""
    return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
''',
        code=r'''import numpy as np   # used while exploring, not any more


class FakeQuantize(torch.autograd.Function):
    """Round w to the int8 grid of step scale (forward); pass the gradient straight through (backward)."""

    @staticmethod
    def forward(ctx, w, scale):
        """Return scale * clamp(round(w / scale), -128, 127), in w's dtype; save what backward needs."""
        assert scale > 0 and math.isfinite(scale), "scale must be a positive finite number"
        lo, hi = int_range(8)
        ctx.scale = scale
        ctx.save_for_backward(w)
        q = torch.round(w / scale).clamp(lo, hi)
        return scale * q

    @staticmethod
    def backward(ctx, grad_out):
        """Return (grad_w, None): grad_out where -128 <= round(w / scale) <= 127, else 0; None for scale."""
        (w,) = ctx.saved_tensors
        lo, hi = int_range(8)
        rounded = torch.round(w / ctx.scale)
        outside = (rounded < lo) | (rounded > hi) | torch.isnan(rounded)
        return grad_out.masked_fill(outside, 0), None
''',
    ),
    dict(
        assignment="07_custom_autograd",
        function="FakeQuantize",
        style="NamedTuple record for the grid in an added cell; hasattr check on scale; lambda for the inside test; needs_input_grad respected",
        added=r'''from typing import NamedTuple


class Grid(NamedTuple):
    lo: int = -128
    hi: int = 127


INT8 = Grid()
''',
        code=r'''class FakeQuantize(torch.autograd.Function):
    """Round w to the int8 grid of step scale (forward); pass the gradient straight through (backward)."""

    @staticmethod
    def forward(ctx, w, scale):
        """Return scale * clamp(round(w / scale), -128, 127), in w's dtype; save what backward needs."""
        if hasattr(scale, "item"):          # a 0-d tensor passed by mistake: use its number
            scale = scale.item()
        ctx.scale = float(scale)
        ctx.save_for_backward(w)
        steps = torch.round(w / ctx.scale)
        return ctx.scale * torch.clamp(steps, INT8.lo, INT8.hi)

    @staticmethod
    def backward(ctx, grad_out):
        """Return (grad_w, None): grad_out where -128 <= round(w / scale) <= 127, else 0; None for scale."""
        if not ctx.needs_input_grad[0]:
            return None, None
        w, = ctx.saved_tensors
        inside = lambda k: (k >= INT8.lo) & (k <= INT8.hi)
        grad_w = grad_out * inside(torch.round(w / ctx.scale)).to(grad_out.dtype)
        return grad_w, None
''',
    ),
    # ------------------------------------------------------------ 07_custom_autograd: train_quantized
    dict(
        assignment="07_custom_autograd",
        function="train_quantized",
        style="the text's recipe: detach().clone().requires_grad_(), one SGD, zero_grad / forward / loss.item() / backward / step; detached results",
        added="",
        code=r'''def train_quantized(x, y, W, b, scale, lr, steps):
    """Train a linear layer whose weight is fake-quantized in the forward pass; return (W_trained, b_trained, losses).

    Float leaf copies of W and b (shadow weights), torch.optim.SGD(lr), MSE loss; losses are the floats before each step.
    """
    W_ = W.detach().clone().requires_grad_(True)
    b_ = b.detach().clone().requires_grad_(True)
    optimizer = torch.optim.SGD([W_, b_], lr=lr)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        y_hat = LinearFunction.apply(x, FakeQuantize.apply(W_, scale), b_)
        loss = F.mse_loss(y_hat, y)
        losses.append(loss.item())
        loss.backward()
        optimizer.step()
    return W_.detach(), b_.detach(), losses
''',
    ),
    dict(
        assignment="07_custom_autograd",
        function="train_quantized",
        style="from __future__ import annotations, typing Tuple/List/Optional; .to(W.dtype) copies; b may be None (params list built accordingly); torch.enable_grad() block",
        added="",
        code=r'''from __future__ import annotations

from typing import List, Optional, Tuple


def train_quantized(x: torch.Tensor, y: torch.Tensor, W: torch.Tensor, b: Optional[torch.Tensor],
                    scale: float, lr: float, steps: int) -> Tuple[torch.Tensor, Optional[torch.Tensor], List[float]]:
    """Train a linear layer whose weight is fake-quantized in the forward pass; return (W_trained, b_trained, losses).

    Float leaf copies of W and b (shadow weights), torch.optim.SGD(lr), MSE loss; losses are the floats before each step.
    """
    W_ = W.detach().to(W.dtype, copy=True).requires_grad_()
    b_ = None if b is None else b.detach().to(b.dtype, copy=True).requires_grad_()
    shadow = [W_] + ([b_] if b_ is not None else [])
    opt = torch.optim.SGD(shadow, lr=lr)
    losses: List[float] = []
    with torch.enable_grad():
        for _ in range(steps):
            opt.zero_grad(set_to_none=True)
            loss = F.mse_loss(LinearFunction.apply(x, FakeQuantize.apply(W_, scale), b_), y)
            losses.append(float(loss.item()))
            loss.backward()
            opt.step()
    return W_.detach(), (b_.detach() if b_ is not None else None), losses
''',
    ),
    dict(
        assignment="07_custom_autograd",
        function="train_quantized",
        style="nn.Parameter shadow weights from clones, .type(W.dtype) kept; leftover unused numpy import; print every 50 steps behind a flag; enumerate",
        added="",
        code=r'''import numpy as np


def train_quantized(x, y, W, b, scale, lr, steps):
    """Train a linear layer whose weight is fake-quantized in the forward pass; return (W_trained, b_trained, losses).

    Float leaf copies of W and b (shadow weights), torch.optim.SGD(lr), MSE loss; losses are the floats before each step.
    """
    verbose = False
    W_ = nn.Parameter(W.detach().clone().type(W.dtype))
    b_ = nn.Parameter(b.detach().clone().type(b.dtype))
    sgd = torch.optim.SGD([W_, b_], lr=lr)
    losses = []
    for i, _ in enumerate(range(steps)):
        sgd.zero_grad()
        W_q = FakeQuantize.apply(W_, scale)
        loss = F.mse_loss(LinearFunction.apply(x, W_q, b_), y)
        losses.append(loss.item())
        if verbose and i % 50 == 0:
            print(f"step {i}: loss {losses[-1]:.5f}, distinct grid points {W_q.unique().numel()}")
        loss.backward()
        sgd.step()
    return W_.data, b_.data, losses
''',
    ),
    dict(
        assignment="07_custom_autograd",
        function="train_quantized",
        style="a NamedTuple result type (still a tuple) in an added cell; hasattr check on y; gradients cleared by hand (p.grad = None); list comprehension for the leaves",
        added=r'''from typing import List, NamedTuple


class QATResult(NamedTuple):
    W_trained: torch.Tensor
    b_trained: torch.Tensor
    losses: List[float]
''',
        code=r'''def train_quantized(x, y, W, b, scale, lr, steps):
    """Train a linear layer whose weight is fake-quantized in the forward pass; return (W_trained, b_trained, losses).

    Float leaf copies of W and b (shadow weights), torch.optim.SGD(lr), MSE loss; losses are the floats before each step.
    """
    if not hasattr(y, "shape"):
        raise TypeError(f"y must be a tensor, got {type(y).__name__}")
    W_, b_ = [t.detach().clone().requires_grad_(True) for t in (W, b)]
    optimizer = torch.optim.SGD([W_, b_], lr=lr)
    losses = []
    for _ in range(steps):
        for p in (W_, b_):
            p.grad = None                       # what zero_grad() does
        out = LinearFunction.apply(x, FakeQuantize.apply(W_, scale), b_)
        loss = F.mse_loss(out, y)
        losses.append(loss.item())
        loss.backward()
        optimizer.step()
    return QATResult(W_.detach(), b_.detach(), losses)
''',
    ),
    dict(
        assignment="07_custom_autograd",
        function="train_quantized",
        style="nested step() closure returning the loss float; copy.deepcopy for the shadow copies; functools.partial for the quantizer; itertools.repeat",
        added="",
        code=r'''import copy
import functools
import itertools


def train_quantized(x, y, W, b, scale, lr, steps):
    """Train a linear layer whose weight is fake-quantized in the forward pass; return (W_trained, b_trained, losses).

    Float leaf copies of W and b (shadow weights), torch.optim.SGD(lr), MSE loss; losses are the floats before each step.
    """
    W_ = copy.deepcopy(W.detach()).requires_grad_()
    b_ = copy.deepcopy(b.detach()).requires_grad_()
    quantize = functools.partial(FakeQuantize.apply, scale=scale)
    optimizer = torch.optim.SGD([W_, b_], lr=lr)

    def step():
        optimizer.zero_grad()
        loss = F.mse_loss(LinearFunction.apply(x, quantize(W_), b_), y)
        value = loss.item()
        loss.backward()
        optimizer.step()
        return value

    losses = [step() for _ in itertools.repeat(None, steps)]
    return W_.detach(), b_.detach(), losses
''',
    ),
]

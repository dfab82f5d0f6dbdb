"""Correct by-hand answers in the idioms a real learner writes, within what the rewritten
*What you may use* paragraph of each release notebook admits (issue 36 item 6).

Written from the release notebooks (exercise text, *What you may use*, def line and docstring)
and ../shared/CONTRACT.md alone, as a held-out probe of what the grader accepts: every answer
computes what its notebook asks and uses, inside the graded function, nothing the paragraph
refuses. Idioms covered: `from __future__ import annotations`, annotations and `typing` names,
`match` (value, sequence, capture, mapping and class patterns), `hasattr(x, "grad")`,
`getattr(p, "grad", None)`, `type(x).__name__` in messages, `type(x) is torch.Tensor`,
`isinstance`, `.type(dtype)` / `.to(dtype)`, functools decorators and partials on helpers,
lambdas, nested functions, comprehensions at the top level of an added cell, walrus,
try/except, generators, `@once_differentiable`, leftover unused imports (numpy too), demo
lines after the def, docstrings, asserts, f-strings, `with torch.no_grad()`, `@torch.no_grad()`.

Each entry: {"assignment", "function" (the answer cell's grade_id), "style", "code" (the whole
answer cell), "added" (a helper cell the learner added just above the answer cell, or "")}.
"""

VARIANTS = [
    # ------------------------------------------------------------------ 01 matmul
    dict(
        assignment="01_linear_algebra", function="matmul",
        style="__future__ annotations + tensor annotations; match on (A.shape, B.shape) with class patterns "
              "torch.Size([n, k]) and a guard; broadcast products summed; unused numpy import; demo lines after the def",
        added="",
        code=r'''from __future__ import annotations

import numpy as np   # used for a first try, no longer needed


def matmul(A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
    """Return the (n, m) matrix product of A (n, k) and B (k, m): C[i, j] = sum_t A[i, t] * B[t, j].

    Raise ValueError if A or B is not 2-D or if A.shape[1] != B.shape[0].
    """
    match A.shape, B.shape:
        case torch.Size([n, k]), torch.Size([k_b, m]) if k == k_b:
            products = A.reshape(n, k, 1) * B.reshape(1, k, m)   # products[i, t, j] = A[i, t] * B[t, j]
            return products.sum(dim=1)
        case torch.Size([_, k]), torch.Size([k_b, _]):
            raise ValueError(f"matmul: the inner sizes differ ({k} vs {k_b})")
        case _:
            raise ValueError(f"matmul needs two 2-D tensors, got shapes {tuple(A.shape)} and {tuple(B.shape)}")


A_demo = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
B_demo = torch.tensor([[0.5, -1.0], [2.0, 0.0]])
print(matmul(A_demo, B_demo))
print("same as torch:", torch.allclose(matmul(A_demo, B_demo), A_demo @ B_demo))
''',
    ),
    dict(
        assignment="01_linear_algebra", function="matmul",
        style="three loops over itertools.product with a preallocated result; hasattr checks and "
              "type(x).__name__ in the ValueError message; f-strings",
        added="",
        code=r'''import itertools


def matmul(A, B):
    """Return the (n, m) matrix product of A (n, k) and B (k, m): C[i, j] = sum_t A[i, t] * B[t, j].

    Raise ValueError if A or B is not 2-D or if A.shape[1] != B.shape[0].
    """
    if not (hasattr(A, "shape") and hasattr(B, "shape")):
        raise ValueError(f"matmul expects two tensors, got {type(A).__name__} and {type(B).__name__}")
    if A.dim() != 2 or B.dim() != 2:
        raise ValueError(f"matmul: A and B must be 2-D, got {A.dim()}-D and {B.dim()}-D")
    n, k = A.shape
    k_b, m = B.shape
    if k != k_b:
        raise ValueError(f"matmul: A is {n}x{k} and B is {k_b}x{m}: the inner sizes differ")
    C = torch.zeros(n, m, dtype=A.dtype)
    for i, j in itertools.product(range(n), range(m)):
        total = torch.zeros((), dtype=A.dtype)
        for t in range(k):
            total = total + A[i, t] * B[t, j]
        C[i, j] = total
    return C
''',
    ),
    dict(
        assignment="01_linear_algebra", function="matmul",
        style="added cell: a shape-checking decorator built with functools.wraps around a helper that sums "
              "outer products with functools.reduce(operator.add, generator); the answer calls the helper",
        added=r'''import functools
import operator


def checked_product(product):
    """Decorator: the shape rules of a matrix product, checked before computing it."""
    @functools.wraps(product)
    def checked(A, B):
        if A.dim() != 2 or B.dim() != 2:
            raise ValueError(f"expected two matrices, got a {A.dim()}-D and a {B.dim()}-D tensor")
        if A.shape[1] != B.shape[0]:
            raise ValueError(f"inner sizes differ: A has {A.shape[1]} columns, B has {B.shape[0]} rows")
        return product(A, B)
    return checked


@checked_product
def sum_of_outer_products(A, B):
    """A B as the sum over t of (column t of A) times (row t of B)."""
    start = torch.zeros(A.shape[0], B.shape[1], dtype=A.dtype)
    return functools.reduce(operator.add, (A[:, t:t + 1] * B[t:t + 1, :] for t in range(A.shape[1])), start)
''',
        code=r'''def matmul(A, B):
    """Return the (n, m) matrix product of A (n, k) and B (k, m): C[i, j] = sum_t A[i, t] * B[t, j].

    Raise ValueError if A or B is not 2-D or if A.shape[1] != B.shape[0].
    """
    return sum_of_outer_products(A, B)


print(matmul(torch.eye(2), torch.arange(4.0).reshape(2, 2)))
''',
    ),
    dict(
        assignment="01_linear_algebra", function="matmul",
        style="try/except ValueError around shape unpacking re-raised with a message; walrus on a list "
              "comprehension of rows; torch.stack, new_zeros for an empty result",
        added="",
        code=r'''def matmul(A, B):
    """Return the (n, m) matrix product of A (n, k) and B (k, m): C[i, j] = sum_t A[i, t] * B[t, j].

    Raise ValueError if A or B is not 2-D or if A.shape[1] != B.shape[0].
    """
    try:
        (n, k), (k_b, m) = A.shape, B.shape
    except ValueError:
        raise ValueError(f"matmul: both arguments must be 2-D, got shapes {list(A.shape)} and {list(B.shape)}") from None
    if k != k_b:
        raise ValueError(f"matmul: {n}x{k} times {k_b}x{m}: the inner sizes differ")
    if not (rows := [(A[i].unsqueeze(1) * B).sum(dim=0) for i in range(n)]):   # row i: sum_t A[i, t] * B[t, :]
        return A.new_zeros((0, m))
    return torch.stack(rows)
''',
    ),
    dict(
        assignment="01_linear_algebra", function="matmul",
        style="match on (A.dim(), B.dim()) with value and capture patterns; a lambda for the product; "
              "expand + sum; assert on the result's shape; .to(A.dtype); unused math import",
        added="",
        code=r'''import math  # left over from trying math.fsum


def matmul(A, B):
    """Return the (n, m) matrix product of A (n, k) and B (k, m): C[i, j] = sum_t A[i, t] * B[t, j].

    Raise ValueError if A or B is not 2-D or if A.shape[1] != B.shape[0].
    """
    match (A.dim(), B.dim()):
        case (2, 2):
            pass
        case (a_dims, b_dims):
            raise ValueError(f"matmul: A is {a_dims}-D and B is {b_dims}-D; both must be 2-D")
    n, k = A.shape
    if B.shape[0] != k:
        raise ValueError(f"matmul: A has {k} columns but B has {B.shape[0]} rows")
    m = B.shape[1]
    times = lambda left, right: left * right
    C = times(A.unsqueeze(2).expand(n, k, m), B.unsqueeze(0).expand(n, k, m)).sum(dim=1)
    assert C.shape == (n, m), f"expected ({n}, {m}), got {tuple(C.shape)}"
    return C.to(A.dtype)
''',
    ),
    # ------------------------------------------------------------------ 01 linear_forward
    dict(
        assignment="01_linear_algebra", function="linear_forward",
        style="__future__ annotations, typing.Optional; match x.dim() with value cases and a capture case "
              "raising ValueError; unsqueeze/squeeze around matmul",
        added="",
        code=r'''from __future__ import annotations

from typing import Optional


def linear_forward(x: torch.Tensor, W: torch.Tensor, b: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Return x Wᵀ + b, as nn.Linear does, using matmul.

    x: (N, in) or (in,); W: (out, in); b: (out,) or None. Result: (N, out), or (out,) for 1-D x.
    """
    match x.dim():
        case 1:
            y = matmul(x.unsqueeze(0), W.T).squeeze(0)
        case 2:
            y = matmul(x, W.T)
        case other:
            raise ValueError(f"linear_forward: x must be (N, in) or (in,), got a {other}-D tensor")
    if b is not None:
        y = y + b
    return y
''',
    ),
    dict(
        assignment="01_linear_algebra", function="linear_forward",
        style="match x.shape with class patterns torch.Size([n_in]) / torch.Size([_, _]); a 1-D sample handled "
              "by calling itself on a batch of one; unused numpy import; demo against nn.Linear under torch.no_grad()",
        added="",
        code=r'''import numpy as np


def linear_forward(x, W, b=None):
    """Return x Wᵀ + b, as nn.Linear does, using matmul.

    x: (N, in) or (in,); W: (out, in); b: (out,) or None. Result: (N, out), or (out,) for 1-D x.
    """
    match x.shape:
        case torch.Size([n_in]):
            return linear_forward(x.reshape(1, n_in), W, b).reshape(W.shape[0])
        case torch.Size([_, _]):
            out = matmul(x, W.transpose(0, 1))
            return out if b is None else out + b
        case _:
            raise ValueError(f"x has shape {tuple(x.shape)}; expected (N, in) or (in,)")


layer_demo = nn.Linear(4, 3)
x_demo = torch.randn(2, 4)
with torch.no_grad():
    print("matches nn.Linear:", torch.allclose(linear_forward(x_demo, layer_demo.weight, layer_demo.bias), layer_demo(x_demo)))
''',
    ),
    dict(
        assignment="01_linear_algebra", function="linear_forward",
        style="added cell: a functools.lru_cache helper computing the output shape from a tuple; any leading "
              "dims flattened with reshape(-1, in) and restored; W.t()",
        added=r'''import functools


@functools.lru_cache(maxsize=None)
def output_shape(leading: tuple, out_features: int) -> tuple:
    """The shape of x Wᵀ for x of shape (*leading, in): (*leading, out)."""
    return (*leading, out_features)
''',
        code=r'''def linear_forward(x, W, b=None):
    """Return x Wᵀ + b, as nn.Linear does, using matmul.

    x: (N, in) or (in,); W: (out, in); b: (out,) or None. Result: (N, out), or (out,) for 1-D x.
    """
    n_out, n_in = W.shape
    flat = x.reshape(-1, n_in)                  # (N, in); a single sample becomes a batch of one
    y = matmul(flat, W.t())
    if b is not None:
        y = y + b.reshape(1, n_out)
    return y.reshape(output_shape(tuple(x.shape[:-1]), n_out))
''',
    ),
    dict(
        assignment="01_linear_algebra", function="linear_forward",
        style="isinstance checks in a loop with type(t).__name__ in a TypeError; a nested add_bias function; "
              "conditional unsqueeze/squeeze",
        added="",
        code=r'''def linear_forward(x, W, b=None):
    """Return x Wᵀ + b, as nn.Linear does, using matmul.

    x: (N, in) or (in,); W: (out, in); b: (out,) or None. Result: (N, out), or (out,) for 1-D x.
    """
    for name, t in (("x", x), ("W", W)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"linear_forward: {name} must be a tensor, not {type(t).__name__}")

    def add_bias(y):
        return y if b is None else y + b

    single = x.dim() == 1
    batch = x.unsqueeze(0) if single else x
    y = add_bias(matmul(batch, W.T))
    return y.squeeze(0) if single else y
''',
    ),
    dict(
        assignment="01_linear_algebra", function="linear_forward",
        style="typing.Optional on b only; x[None, :] and y[0]; W.permute(1, 0); b.expand_as(y); "
              "re-import of torch.nn.functional for a demo loop comparing with F.linear",
        added="",
        code=r'''from typing import Optional

import torch.nn.functional as F   # only for the check below


def linear_forward(x, W, b: Optional[torch.Tensor] = None):
    """Return x Wᵀ + b, as nn.Linear does, using matmul.

    x: (N, in) or (in,); W: (out, in); b: (out,) or None. Result: (N, out), or (out,) for 1-D x.
    """
    is_sample = x.ndim == 1
    y = matmul(x[None, :] if is_sample else x, W.permute(1, 0))
    if b is not None:
        y = y + b.expand_as(y)
    return y[0] if is_sample else y


for shape in [(4,), (2, 4)]:
    x_demo, W_demo, b_demo = torch.randn(shape), torch.randn(3, 4), torch.randn(3)
    print(shape, "->", tuple(linear_forward(x_demo, W_demo, b_demo).shape),
          torch.allclose(linear_forward(x_demo, W_demo, b_demo), F.linear(x_demo, W_demo, b_demo), atol=1e-6))
''',
    ),
    # ------------------------------------------------------------------ 02 relu
    dict(
        assignment="02_activation_functions", function="relu",
        style="__future__ annotations; torch.where(z > 0, z, zeros_like); demo printing and comparing with torch.relu",
        added="",
        code=r'''from __future__ import annotations


def relu(z: torch.Tensor) -> torch.Tensor:
    """Return max(z, 0) for every entry of z (same shape and dtype as z)."""
    return torch.where(z > 0, z, torch.zeros_like(z))


z_demo = torch.tensor([-2.0, -0.5, 0.0, 0.5, 2.0])
print(relu(z_demo), torch.equal(relu(z_demo), torch.relu(z_demo)))
''',
    ),
    dict(
        assignment="02_activation_functions", function="relu",
        style="added cell: functools.partial(torch.clamp, min=0) bound to a global name; the answer calls it",
        added=r'''import functools

clamp_below_at_zero = functools.partial(torch.clamp, min=0)
''',
        code=r'''def relu(z):
    """Return max(z, 0) for every entry of z (same shape and dtype as z)."""
    return clamp_below_at_zero(z)
''',
    ),
    dict(
        assignment="02_activation_functions", function="relu",
        style="type(z) is torch.Tensor test (else torch.as_tensor); torch.maximum with zeros_like",
        added="",
        code=r'''def relu(z):
    """Return max(z, 0) for every entry of z (same shape and dtype as z)."""
    t = z if type(z) is torch.Tensor else torch.as_tensor(z)
    return torch.maximum(t, torch.zeros_like(t))
''',
    ),
    dict(
        assignment="02_activation_functions", function="relu",
        style="match z.dtype with dotted value patterns (torch.float32 | ...), a bool case raising TypeError with "
              "type(z).__name__, wildcard; torch.where with a Python scalar",
        added="",
        code=r'''def relu(z):
    """Return max(z, 0) for every entry of z (same shape and dtype as z)."""
    match z.dtype:
        case torch.float16 | torch.bfloat16 | torch.float32 | torch.float64:
            zero = 0.0
        case torch.bool:
            raise TypeError(f"relu of a bool tensor makes no sense (got a {type(z).__name__} of {z.dtype})")
        case _:
            zero = 0
    return torch.where(z > zero, z, zero)
''',
    ),
    dict(
        assignment="02_activation_functions", function="relu",
        style="try/except AttributeError around z.clone() re-raised as TypeError; masked assignment on the copy; "
              "unused numpy import",
        added="",
        code=r'''import numpy as np


def relu(z):
    """Return max(z, 0) for every entry of z (same shape and dtype as z)."""
    try:
        out = z.clone()                 # a copy: the caller's z stays as it is
    except AttributeError as error:
        raise TypeError(f"relu expects a tensor, got {type(z).__name__}") from error
    out[out < 0] = 0
    return out
''',
    ),
    # ------------------------------------------------------------------ 02 relu_derivative
    dict(
        assignment="02_activation_functions", function="relu_derivative",
        style="__future__ annotations; (z > 0).to(z.dtype); demo line",
        added="",
        code=r'''from __future__ import annotations


def relu_derivative(z: torch.Tensor) -> torch.Tensor:
    """Return 1.0 where z > 0 and 0.0 elsewhere (also at z == 0, like torch.relu); same shape and dtype as z."""
    return (z > 0).to(z.dtype)


print(relu_derivative(torch.tensor([-1.0, 0.0, 2.0])))
''',
    ),
    dict(
        assignment="02_activation_functions", function="relu_derivative",
        style="bool mask converted with .type(z.dtype); demo lines comparing with the notebook's "
              "autograd_derivative(torch.relu, ...) and an assert",
        added="",
        code=r'''def relu_derivative(z):
    """Return 1.0 where z > 0 and 0.0 elsewhere (also at z == 0, like torch.relu); same shape and dtype as z."""
    positive = z > 0                  # bool: True where the slope is 1
    return positive.type(z.dtype)


z_demo = torch.tensor([-1.5, 0.0, 0.3, 2.0], dtype=torch.float64)
print(relu_derivative(z_demo), autograd_derivative(torch.relu, z_demo))
assert torch.equal(relu_derivative(z_demo), autograd_derivative(torch.relu, z_demo))
''',
    ),
    dict(
        assignment="02_activation_functions", function="relu_derivative",
        style="added cell: a lambda `indicator(condition, like)` built on torch.where with ones_like/zeros_like",
        added=r'''# 1 where the condition holds, 0 elsewhere, in the dtype (and shape) of `like`
indicator = lambda condition, like: torch.where(condition, torch.ones_like(like), torch.zeros_like(like))
''',
        code=r'''def relu_derivative(z):
    """Return 1.0 where z > 0 and 0.0 elsewhere (also at z == 0, like torch.relu); same shape and dtype as z."""
    return indicator(z > 0, z)
''',
    ),
    dict(
        assignment="02_activation_functions", function="relu_derivative",
        style="isinstance check with type(z).__name__ in a TypeError; zeros_like then masked assignment of 1",
        added="",
        code=r'''def relu_derivative(z):
    """Return 1.0 where z > 0 and 0.0 elsewhere (also at z == 0, like torch.relu); same shape and dtype as z."""
    if not isinstance(z, torch.Tensor):
        raise TypeError(f"relu_derivative expects a tensor, got {type(z).__name__}")
    slope = torch.zeros_like(z)
    slope[z > 0] = 1
    return slope
''',
    ),
    dict(
        assignment="02_activation_functions", function="relu_derivative",
        style="torch.gt(z, 0).to(dtype=...); assert with an f-string message; unused functools import",
        added="",
        code=r'''import functools  # for functools.reduce, in an earlier attempt


def relu_derivative(z):
    """Return 1.0 where z > 0 and 0.0 elsewhere (also at z == 0, like torch.relu); same shape and dtype as z."""
    slope = torch.gt(z, 0).to(dtype=z.dtype)
    assert slope.dtype != torch.bool and slope.shape == z.shape, f"{slope.dtype}, {tuple(slope.shape)}"
    return slope
''',
    ),
    # ------------------------------------------------------------------ 02 sigmoid
    dict(
        assignment="02_activation_functions", function="sigmoid",
        style="__future__ annotations; 1 / (1 + torch.exp(-z)); unused math import; demo against torch.sigmoid",
        added="",
        code=r'''from __future__ import annotations

import math


def sigmoid(z: torch.Tensor) -> torch.Tensor:
    """Return 1 / (1 + exp(-z)) for every entry of z (same shape and dtype as z)."""
    return 1 / (1 + torch.exp(-z))


z_demo = torch.tensor([-100.0, -1.0, 0.0, 1.0, 100.0])
print(sigmoid(z_demo), torch.allclose(sigmoid(z_demo), torch.sigmoid(z_demo)))
''',
    ),
    dict(
        assignment="02_activation_functions", function="sigmoid",
        style='hasattr(z, "exp") guard with type(z).__name__ in a TypeError; torch.reciprocal and torch.neg',
        added="",
        code=r'''def sigmoid(z):
    """Return 1 / (1 + exp(-z)) for every entry of z (same shape and dtype as z)."""
    if not hasattr(z, "exp"):
        raise TypeError(f"sigmoid expects a tensor, got {type(z).__name__}")
    return torch.reciprocal(1 + torch.exp(torch.neg(z)))
''',
    ),
    dict(
        assignment="02_activation_functions", function="sigmoid",
        style="assert isinstance(...) with an f-string; (1 + (-z).exp()) ** -1",
        added="",
        code=r'''def sigmoid(z):
    """Return 1 / (1 + exp(-z)) for every entry of z (same shape and dtype as z)."""
    assert isinstance(z, torch.Tensor), f"sigmoid: expected a tensor, got {type(z).__name__}"
    return (1.0 + (-z).exp()) ** -1
''',
    ),
    dict(
        assignment="02_activation_functions", function="sigmoid",
        style="match z with a class pattern torch.Tensor() and a wildcard raising TypeError; method chain "
              "exp().add(1).reciprocal()",
        added="",
        code=r'''def sigmoid(z):
    """Return 1 / (1 + exp(-z)) for every entry of z (same shape and dtype as z)."""
    match z:
        case torch.Tensor():
            denominator = torch.exp(-z).add(1)
            return denominator.reciprocal()
        case _:
            raise TypeError(f"sigmoid: expected a torch.Tensor, not {type(z).__name__}")
''',
    ),
    dict(
        assignment="02_activation_functions", function="sigmoid",
        style="added cell: a lambda `one_over`; the answer has a nested denominator function and a walrus in the call",
        added=r'''one_over = lambda t: 1 / t
''',
        code=r'''def sigmoid(z):
    """Return 1 / (1 + exp(-z)) for every entry of z (same shape and dtype as z)."""
    def denominator(t):
        return 1 + torch.exp(-t)

    s = one_over(d := denominator(z))
    assert s.shape == d.shape == z.shape
    return s
''',
    ),
    # ------------------------------------------------------------------ 02 sigmoid_derivative
    dict(
        assignment="02_activation_functions", function="sigmoid_derivative",
        style="__future__ annotations; s = sigmoid(z); s * (1 - s)",
        added="",
        code=r'''from __future__ import annotations


def sigmoid_derivative(z: torch.Tensor) -> torch.Tensor:
    """Return σ(z) * (1 - σ(z)), the derivative of the sigmoid at every entry of z."""
    s = sigmoid(z)
    return s * (1 - s)
''',
    ),
    dict(
        assignment="02_activation_functions", function="sigmoid_derivative",
        style="one-line walrus (s := sigmoid(z)) * (1 - s); demo against autograd_derivative(torch.sigmoid, ...)",
        added="",
        code=r'''def sigmoid_derivative(z):
    """Return σ(z) * (1 - σ(z)), the derivative of the sigmoid at every entry of z."""
    return (s := sigmoid(z)) * (1 - s)


z_demo = torch.linspace(-6, 6, 13, dtype=torch.float64)
print("matches autograd:", torch.allclose(sigmoid_derivative(z_demo), autograd_derivative(torch.sigmoid, z_demo)))
''',
    ),
    dict(
        assignment="02_activation_functions", function="sigmoid_derivative",
        style="added cell: a decorator written with functools.wraps (isinstance check, keeps the dtype) on a "
              "helper times_one_minus(s); the answer composes it with sigmoid",
        added=r'''import functools


def elementwise(fn):
    """Decorator: check that the argument is a tensor, and keep its dtype in the result."""
    @functools.wraps(fn)
    def wrapper(t):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"expected a tensor, got {type(t).__name__}")
        return fn(t).to(t.dtype)
    return wrapper


@elementwise
def times_one_minus(s):
    """s * (1 - s): the sigmoid's slope, given its value s."""
    return s * (1 - s)
''',
        code=r'''def sigmoid_derivative(z):
    """Return σ(z) * (1 - σ(z)), the derivative of the sigmoid at every entry of z."""
    return times_one_minus(sigmoid(z))
''',
    ),
    dict(
        assignment="02_activation_functions", function="sigmoid_derivative",
        style="typing.Callable annotation on a local bound to sigmoid; s.mul(s.neg().add(1))",
        added="",
        code=r'''from typing import Callable


def sigmoid_derivative(z):
    """Return σ(z) * (1 - σ(z)), the derivative of the sigmoid at every entry of z."""
    squash: Callable[[torch.Tensor], torch.Tensor] = sigmoid
    s = squash(z)
    return s.mul(s.neg().add(1))
''',
    ),
    dict(
        assignment="02_activation_functions", function="sigmoid_derivative",
        style="match z.dtype: half precisions computed in float32 and converted back with .to(z.dtype), wildcard "
              "for the rest; demo against autograd",
        added="",
        code=r'''def sigmoid_derivative(z):
    """Return σ(z) * (1 - σ(z)), the derivative of the sigmoid at every entry of z."""
    match z.dtype:
        case torch.float16 | torch.bfloat16:
            s = sigmoid(z.float())          # half precision loses too much in 1 - s
            return (s * (1 - s)).to(z.dtype)
        case _:
            s = sigmoid(z)
            return s * (1 - s)


z_demo = torch.linspace(-4, 4, 9, dtype=torch.float64)
print(torch.allclose(sigmoid_derivative(z_demo), autograd_derivative(torch.sigmoid, z_demo)))
''',
    ),
    # ------------------------------------------------------------------ 02 collapse_linear
    dict(
        assignment="02_activation_functions", function="collapse_linear",
        style="__future__ annotations with typing.Tuple return annotation; W2 @ W1 and W2 @ b1 + b2 with shape comments",
        added="",
        code=r'''from __future__ import annotations

from typing import Tuple


def collapse_linear(W1: torch.Tensor, b1: torch.Tensor, W2: torch.Tensor, b2: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """Return (W, b) with linear(linear(x, W1, b1), W2, b2) == linear(x, W, b) for every x.

    W1: (hidden, in), b1: (hidden,), W2: (out, hidden), b2: (out,). Result: W (out, in), b (out,).
    """
    W = W2 @ W1            # (out, hidden) (hidden, in) = (out, in)
    b = W2 @ b1 + b2       # (out, hidden) (hidden,) + (out,) = (out,)
    return W, b
''',
    ),
    dict(
        assignment="02_activation_functions", function="collapse_linear",
        style="torch.mm and torch.mv; demo lines checking two F.linear calls against one",
        added="",
        code=r'''def collapse_linear(W1, b1, W2, b2):
    """Return (W, b) with linear(linear(x, W1, b1), W2, b2) == linear(x, W, b) for every x.

    W1: (hidden, in), b1: (hidden,), W2: (out, hidden), b2: (out,). Result: W (out, in), b (out,).
    """
    W = torch.mm(W2, W1)
    b = torch.mv(W2, b1) + b2
    return W, b


W1_demo, b1_demo, W2_demo, b2_demo = torch.randn(5, 3), torch.randn(5), torch.randn(2, 5), torch.randn(2)
x_demo = torch.randn(4, 3)
W_demo, b_demo = collapse_linear(W1_demo, b1_demo, W2_demo, b2_demo)
print(torch.allclose(F.linear(F.linear(x_demo, W1_demo, b1_demo), W2_demo, b2_demo), F.linear(x_demo, W_demo, b_demo), atol=1e-5))
''',
    ),
    dict(
        assignment="02_activation_functions", function="collapse_linear",
        style="builtin tuple[...] return annotation (evaluated); torch.matmul and torch.addmv(b2, W2, b1)",
        added="",
        code=r'''def collapse_linear(W1, b1, W2, b2) -> tuple[torch.Tensor, torch.Tensor]:
    """Return (W, b) with linear(linear(x, W1, b1), W2, b2) == linear(x, W, b) for every x.

    W1: (hidden, in), b1: (hidden,), W2: (out, hidden), b2: (out,). Result: W (out, in), b (out,).
    """
    return torch.matmul(W2, W1), torch.addmv(b2, W2, b1)
''',
    ),
    dict(
        assignment="02_activation_functions", function="collapse_linear",
        style="match (W1.shape, W2.shape) with torch.Size class patterns and a guard, wildcard raising ValueError; "
              "products by broadcasting and sums",
        added="",
        code=r'''def collapse_linear(W1, b1, W2, b2):
    """Return (W, b) with linear(linear(x, W1, b1), W2, b2) == linear(x, W, b) for every x.

    W1: (hidden, in), b1: (hidden,), W2: (out, hidden), b2: (out,). Result: W (out, in), b (out,).
    """
    match W1.shape, W2.shape:
        case torch.Size([hidden, n_in]), torch.Size([n_out, hidden_2]) if hidden == hidden_2:
            pass
        case _:
            raise ValueError(f"W2 {tuple(W2.shape)} cannot follow W1 {tuple(W1.shape)}")
    W = (W2[:, :, None] * W1[None, :, :]).sum(dim=1)     # (out, hidden, in) summed over hidden
    b = (W2 * b1).sum(dim=1) + b2
    return W, b
''',
    ),
    dict(
        assignment="02_activation_functions", function="collapse_linear",
        style="functools.partial(torch.matmul, W2) as a local 'apply the second layer'; unused numpy import",
        added="",
        code=r'''import functools

import numpy as np


def collapse_linear(W1, b1, W2, b2):
    """Return (W, b) with linear(linear(x, W1, b1), W2, b2) == linear(x, W, b) for every x.

    W1: (hidden, in), b1: (hidden,), W2: (out, hidden), b2: (out,). Result: W (out, in), b (out,).
    """
    second_layer = functools.partial(torch.matmul, W2)      # t -> W2 t
    W = second_layer(W1)
    b = second_layer(b1) + b2
    return (W, b)
''',
    ),
    # ------------------------------------------------------------------ 03 mse_loss
    dict(
        assignment="03_chain_rule", function="mse_loss",
        style="__future__ annotations; ((y_hat - y) ** 2).mean(); demo comparing with F.mse_loss",
        added="",
        code=r'''from __future__ import annotations


def mse_loss(y_hat: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Return the mean over all entries of (y_hat - y) ** 2, as a 0-dim tensor (like F.mse_loss)."""
    return ((y_hat - y) ** 2).mean()


y_hat_demo, y_demo = torch.randn(4, 3), torch.randn(4, 3)
print(mse_loss(y_hat_demo, y_demo).item(), F.mse_loss(y_hat_demo, y_demo).item())
''',
    ),
    dict(
        assignment="03_chain_rule", function="mse_loss",
        style="isinstance checks with type(...).__name__ in a TypeError; torch.mean(torch.square(...))",
        added="",
        code=r'''def mse_loss(y_hat, y):
    """Return the mean over all entries of (y_hat - y) ** 2, as a 0-dim tensor (like F.mse_loss)."""
    if not (isinstance(y_hat, torch.Tensor) and isinstance(y, torch.Tensor)):
        raise TypeError(f"mse_loss expects tensors, got {type(y_hat).__name__} and {type(y).__name__}")
    return torch.mean(torch.square(y_hat - y))
''',
    ),
    dict(
        assignment="03_chain_rule", function="mse_loss",
        style="walrus inside the expression: ((diff := y_hat - y) * diff).sum() / diff.numel()",
        added="",
        code=r'''def mse_loss(y_hat, y):
    """Return the mean over all entries of (y_hat - y) ** 2, as a 0-dim tensor (like F.mse_loss)."""
    return ((diff := y_hat - y) * diff).sum() / diff.numel()
''',
    ),
    dict(
        assignment="03_chain_rule", function="mse_loss",
        style='hasattr(y_hat, "numel") guard; .pow(2).sum().div(numel)',
        added="",
        code=r'''def mse_loss(y_hat, y):
    """Return the mean over all entries of (y_hat - y) ** 2, as a 0-dim tensor (like F.mse_loss)."""
    if not hasattr(y_hat, "numel"):
        raise TypeError(f"mse_loss: y_hat should be a tensor, got {type(y_hat).__name__}")
    squared = (y_hat - y).pow(2)
    return squared.sum().div(squared.numel())
''',
    ),
    dict(
        assignment="03_chain_rule", function="mse_loss",
        style="added cell: a lambda `square` next to an unused numpy import; assert that the loss is 0-dim",
        added=r'''import numpy as np

square = lambda t: t * t
''',
        code=r'''def mse_loss(y_hat, y):
    """Return the mean over all entries of (y_hat - y) ** 2, as a 0-dim tensor (like F.mse_loss)."""
    errors = square(y_hat - y)
    loss = errors.mean()
    assert loss.dim() == 0, f"the loss should be one number, got shape {tuple(loss.shape)}"
    return loss
''',
    ),
    # ------------------------------------------------------------------ 03 mse_loss_grad
    dict(
        assignment="03_chain_rule", function="mse_loss_grad",
        style="__future__ annotations; 2 * (y_hat - y) / y_hat.numel(); demo against autograd of F.mse_loss",
        added="",
        code=r'''from __future__ import annotations


def mse_loss_grad(y_hat: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Return dL/dy_hat for L = mse_loss(y_hat, y): 2 * (y_hat - y) / y_hat.numel()."""
    return 2 * (y_hat - y) / y_hat.numel()


y_hat_demo = torch.randn(4, 3, requires_grad=True)
y_demo = torch.randn(4, 3)
F.mse_loss(y_hat_demo, y_demo).backward()
print(torch.allclose(mse_loss_grad(y_hat_demo.detach(), y_demo), y_hat_demo.grad))
''',
    ),
    dict(
        assignment="03_chain_rule", function="mse_loss_grad",
        style="method chain (y_hat - y).mul(2).div(y_hat.numel())",
        added="",
        code=r'''def mse_loss_grad(y_hat, y):
    """Return dL/dy_hat for L = mse_loss(y_hat, y): 2 * (y_hat - y) / y_hat.numel()."""
    return (y_hat - y).mul(2).div(y_hat.numel())
''',
    ),
    dict(
        assignment="03_chain_rule", function="mse_loss_grad",
        style="walrus on M = y_hat.numel() in an if, with an empty-tensor branch; multiply by the Python number 2 / M",
        added="",
        code=r'''def mse_loss_grad(y_hat, y):
    """Return dL/dy_hat for L = mse_loss(y_hat, y): 2 * (y_hat - y) / y_hat.numel()."""
    if (M := y_hat.numel()) == 0:
        return torch.zeros_like(y_hat)
    return (y_hat - y) * (2.0 / M)
''',
    ),
    dict(
        assignment="03_chain_rule", function="mse_loss_grad",
        style="nested function local_gradient(residual) with a comment on the derivative",
        added="",
        code=r'''def mse_loss_grad(y_hat, y):
    """Return dL/dy_hat for L = mse_loss(y_hat, y): 2 * (y_hat - y) / y_hat.numel()."""
    def local_gradient(residual):
        # d/dr of r ** 2 is 2 r; the mean divides every term by the number of entries
        return 2 * residual / y_hat.numel()

    return local_gradient(y_hat - y)
''',
    ),
    dict(
        assignment="03_chain_rule", function="mse_loss_grad",
        style="added cell: a constant FACTOR and a top-level comprehension of test shapes; torch.true_divide",
        added=r'''FACTOR = 2                                       # d/dr of r ** 2 is 2 r
SHAPES_TO_TRY = [(2 ** i, 3) for i in range(3)]    # batches of 1, 2 and 4 for my own checks
''',
        code=r'''def mse_loss_grad(y_hat, y):
    """Return dL/dy_hat for L = mse_loss(y_hat, y): 2 * (y_hat - y) / y_hat.numel()."""
    return torch.true_divide(FACTOR * (y_hat - y), y_hat.numel())


for shape in SHAPES_TO_TRY:
    a_demo, b_demo = torch.randn(shape, requires_grad=True), torch.randn(shape)
    F.mse_loss(a_demo, b_demo).backward()
    print(shape, torch.allclose(mse_loss_grad(a_demo.detach(), b_demo), a_demo.grad))
''',
    ),
    # ------------------------------------------------------------------ 03 linear_backward
    dict(
        assignment="03_chain_rule", function="linear_backward",
        style="__future__ annotations with typing.Tuple; G W, Gᵀ x, G summed over the batch, with shape comments",
        added="",
        code=r'''from __future__ import annotations

from typing import Tuple


def linear_backward(grad_out: torch.Tensor, x: torch.Tensor, W: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """For y = x Wᵀ + b and grad_out = dL/dy (N, out), return (dL/dx, dL/dW, dL/db).

    x: (N, in), W: (out, in). Shapes of the results: (N, in), (out, in), (out,).
    """
    grad_x = grad_out @ W              # (N, out) (out, in) = (N, in)
    grad_W = grad_out.T @ x            # (out, N) (N, in)  = (out, in)
    grad_b = grad_out.sum(dim=0)       # summed over the batch: (out,)
    return grad_x, grad_W, grad_b
''',
    ),
    dict(
        assignment="03_chain_rule", function="linear_backward",
        style="torch.mm / .t() / torch.sum; asserts with f-string messages in a loop over (name, grad, tensor)",
        added="",
        code=r'''def linear_backward(grad_out, x, W):
    """For y = x Wᵀ + b and grad_out = dL/dy (N, out), return (dL/dx, dL/dW, dL/db).

    x: (N, in), W: (out, in). Shapes of the results: (N, in), (out, in), (out,).
    """
    grad_x = torch.mm(grad_out, W)
    grad_W = torch.mm(grad_out.t(), x)
    grad_b = torch.sum(grad_out, dim=0)
    for name, grad, t in (("x", grad_x, x), ("W", grad_W, W)):
        assert grad.shape == t.shape, f"grad_{name} has shape {tuple(grad.shape)}, {name} has {tuple(t.shape)}"
    return grad_x, grad_W, grad_b
''',
    ),
    dict(
        assignment="03_chain_rule", function="linear_backward",
        style="match (grad_out.dim(), x.dim()) with sequence value patterns (2, 2) / (1, 1) and a capture case; "
              "the one-sample case as an outer product",
        added="",
        code=r'''def linear_backward(grad_out, x, W):
    """For y = x Wᵀ + b and grad_out = dL/dy (N, out), return (dL/dx, dL/dW, dL/db).

    x: (N, in), W: (out, in). Shapes of the results: (N, in), (out, in), (out,).
    """
    match grad_out.dim(), x.dim():
        case 2, 2:
            return grad_out @ W, grad_out.T @ x, grad_out.sum(0)
        case 1, 1:                                   # one sample: x of shape (in,)
            return grad_out @ W, grad_out[:, None] * x[None, :], grad_out.clone()
        case dims:
            raise ValueError(f"linear_backward: grad_out and x should both be 2-D (or both 1-D), got {dims}")
''',
    ),
    dict(
        assignment="03_chain_rule", function="linear_backward",
        style="added cell: a functools.lru_cache helper mapping a shape tuple to its 2-D (-1, last) form; "
              "the answer flattens leading dims and reshapes grad_x back",
        added=r'''import functools


@functools.lru_cache(maxsize=None)
def as_rows(shape: tuple) -> tuple:
    """The 2-D shape (rows, last) a tensor of `shape` flattens to, one sample per row."""
    return (-1, shape[-1])
''',
        code=r'''def linear_backward(grad_out, x, W):
    """For y = x Wᵀ + b and grad_out = dL/dy (N, out), return (dL/dx, dL/dW, dL/db).

    x: (N, in), W: (out, in). Shapes of the results: (N, in), (out, in), (out,).
    """
    G = grad_out.reshape(as_rows(tuple(grad_out.shape)))     # (N, out)
    X = x.reshape(as_rows(tuple(x.shape)))                   # (N, in)
    grad_x = (G @ W).reshape(x.shape)
    grad_W = G.T @ X
    grad_b = G.sum(dim=0)
    return grad_x, grad_W, grad_b
''',
    ),
    dict(
        assignment="03_chain_rule", function="linear_backward",
        style="no @ at all: broadcast products summed over the right axis; unused numpy import; demo against "
              "y.backward(G) on leaves",
        added="",
        code=r'''import numpy as np


def linear_backward(grad_out, x, W):
    """For y = x Wᵀ + b and grad_out = dL/dy (N, out), return (dL/dx, dL/dW, dL/db).

    x: (N, in), W: (out, in). Shapes of the results: (N, in), (out, in), (out,).
    """
    G = grad_out
    grad_x = (G[:, :, None] * W[None, :, :]).sum(dim=1)     # summed over out: (N, in)
    grad_W = (G[:, :, None] * x[:, None, :]).sum(dim=0)     # summed over the batch: (out, in)
    grad_b = G.sum(dim=0)
    return grad_x, grad_W, grad_b


x_demo = torch.randn(4, 3, requires_grad=True)
W_demo = torch.randn(2, 3, requires_grad=True)
b_demo = torch.randn(2, requires_grad=True)
G_demo = torch.randn(4, 2)
(x_demo @ W_demo.T + b_demo).backward(G_demo)
mine = linear_backward(G_demo, x_demo.detach(), W_demo.detach())
print([torch.allclose(m, t.grad, atol=1e-6) for m, t in zip(mine, (x_demo, W_demo, b_demo))])
''',
    ),
    # ------------------------------------------------------------------ 03 relu_backward
    dict(
        assignment="03_chain_rule", function="relu_backward",
        style="__future__ annotations; torch.where(z > 0, grad_out, zeros_like(grad_out))",
        added="",
        code=r'''from __future__ import annotations


def relu_backward(grad_out: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """For a = relu(z) and grad_out = dL/da, return dL/dz: grad_out where z > 0, and 0 where z <= 0."""
    return torch.where(z > 0, grad_out, torch.zeros_like(grad_out))
''',
    ),
    dict(
        assignment="03_chain_rule", function="relu_backward",
        style="upstream times the local mask converted with .to(grad_out.dtype); demo against torch.relu's backward",
        added="",
        code=r'''def relu_backward(grad_out, z):
    """For a = relu(z) and grad_out = dL/da, return dL/dz: grad_out where z > 0, and 0 where z <= 0."""
    local = (z > 0).to(grad_out.dtype)       # relu'(z), 0 at z == 0 as torch.relu
    return grad_out * local


z_demo = torch.tensor([-1.0, 0.0, 0.5, 2.0], requires_grad=True)
g_demo = torch.tensor([1.0, 2.0, 3.0, 4.0])
torch.relu(z_demo).backward(g_demo)
print(relu_backward(g_demo, z_demo.detach()), z_demo.grad)
''',
    ),
    dict(
        assignment="03_chain_rule", function="relu_backward",
        style="grad_out.masked_fill(z <= 0, 0)",
        added="",
        code=r'''def relu_backward(grad_out, z):
    """For a = relu(z) and grad_out = dL/da, return dL/dz: grad_out where z > 0, and 0 where z <= 0."""
    return grad_out.masked_fill(z <= 0, 0)
''',
    ),
    dict(
        assignment="03_chain_rule", function="relu_backward",
        style="isinstance check with type(...).__name__; clone then masked assignment through ~(z > 0)",
        added="",
        code=r'''def relu_backward(grad_out, z):
    """For a = relu(z) and grad_out = dL/da, return dL/dz: grad_out where z > 0, and 0 where z <= 0."""
    if not isinstance(grad_out, torch.Tensor):
        raise TypeError(f"grad_out should be a tensor, got {type(grad_out).__name__}")
    grad_z = grad_out.clone()
    grad_z[~(z > 0)] = 0              # blocked where the ReLU was flat
    return grad_z
''',
    ),
    dict(
        assignment="03_chain_rule", function="relu_backward",
        style="match (grad_out, z) with keyword class patterns torch.Tensor(shape=...) and a guard, a positional-free "
              "class pattern case and a wildcard; torch.where with a Python 0.0",
        added="",
        code=r'''def relu_backward(grad_out, z):
    """For a = relu(z) and grad_out = dL/da, return dL/dz: grad_out where z > 0, and 0 where z <= 0."""
    match grad_out, z:
        case torch.Tensor(shape=g_shape), torch.Tensor(shape=z_shape) if g_shape == z_shape:
            return torch.where(z.gt(0), grad_out, 0.0)
        case torch.Tensor(), torch.Tensor():
            raise ValueError(f"grad_out {tuple(grad_out.shape)} and z {tuple(z.shape)} should have the same shape")
        case _:
            raise TypeError(f"relu_backward expects tensors, got {type(grad_out).__name__} and {type(z).__name__}")
''',
    ),
    # ------------------------------------------------------------------ 03 mlp_backward
    dict(
        assignment="03_chain_rule", function="mlp_backward",
        style="__future__ annotations with a typing.Dict return annotation; torch.relu forward; the table's steps "
              "with mse_loss_grad, linear_backward, relu_backward; `_` for the unused grad_x",
        added="",
        code=r'''from __future__ import annotations

from typing import Dict


def mlp_backward(x, y, W1, b1, W2, b2) -> Dict[str, torch.Tensor]:
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
''',
    ),
    dict(
        assignment="03_chain_rule", function="mlp_backward",
        style="added cell: a top-level list comprehension of the gradient names; the answer writes the formulas "
              "inline (clamp(min=0) forward) and returns a dict comprehension over zip",
        added=r'''GRAD_NAMES = [f"{kind}{layer}" for layer in (1, 2) for kind in ("W", "b")]   # W1, b1, W2, b2
''',
        code=r'''def mlp_backward(x, y, W1, b1, W2, b2):
    """Gradients of L = mse(relu(x W1ᵀ + b1) W2ᵀ + b2, y) by the chain rule.

    Return {"W1": dL/dW1, "b1": dL/db1, "W2": dL/dW2, "b2": dL/db2}, as L.backward() would fill .grad.
    """
    z1 = x @ W1.T + b1
    h = z1.clamp(min=0)
    y_hat = h @ W2.T + b2
    grad_y_hat = 2 * (y_hat - y) / y_hat.numel()
    grad_W2, grad_b2 = grad_y_hat.T @ h, grad_y_hat.sum(0)
    grad_h = grad_y_hat @ W2
    grad_z1 = grad_h * (z1 > 0).to(grad_h.dtype)
    grad_W1, grad_b1 = grad_z1.T @ x, grad_z1.sum(0)
    return {name: grad for name, grad in zip(GRAD_NAMES, (grad_W1, grad_b1, grad_W2, grad_b2))}
''',
    ),
    dict(
        assignment="03_chain_rule", function="mlp_backward",
        style="added cell: a forward helper returning (z1, h, y_hat) with a local ReLU lambda; the answer chains "
              "the earlier exercises' functions and returns dict(W1=..., ...)",
        added=r'''def mlp_forward(x, W1, b1, W2, b2):
    """The forward pass, keeping what the backward pass needs: (z1, h, y_hat)."""
    rectify = lambda t: torch.where(t > 0, t, torch.zeros_like(t))
    z1 = x @ W1.T + b1
    h = rectify(z1)
    return z1, h, h @ W2.T + b2
''',
        code=r'''def mlp_backward(x, y, W1, b1, W2, b2):
    """Gradients of L = mse(relu(x W1ᵀ + b1) W2ᵀ + b2, y) by the chain rule.

    Return {"W1": dL/dW1, "b1": dL/db1, "W2": dL/dW2, "b2": dL/db2}, as L.backward() would fill .grad.
    """
    z1, h, y_hat = mlp_forward(x, W1, b1, W2, b2)
    grad_h, grad_W2, grad_b2 = linear_backward(mse_loss_grad(y_hat, y), h, W2)
    grad_x, grad_W1, grad_b1 = linear_backward(relu_backward(grad_h, z1), x, W1)
    return dict(W1=grad_W1, b1=grad_b1, W2=grad_W2, b2=grad_b2)
''',
    ),
    dict(
        assignment="03_chain_rule", function="mlp_backward",
        style="match (x.shape, y.shape) with torch.Size class patterns and a guard on the batch size; gradients "
              "unpacked straight into subscripts of a local dict",
        added="",
        code=r'''def mlp_backward(x, y, W1, b1, W2, b2):
    """Gradients of L = mse(relu(x W1ᵀ + b1) W2ᵀ + b2, y) by the chain rule.

    Return {"W1": dL/dW1, "b1": dL/db1, "W2": dL/dW2, "b2": dL/db2}, as L.backward() would fill .grad.
    """
    match x.shape, y.shape:
        case torch.Size([n, _]), torch.Size([n_y, _]) if n == n_y:
            pass
        case _:
            raise ValueError(f"x {tuple(x.shape)} and y {tuple(y.shape)} must be batches of the same size")
    z1 = x @ W1.T + b1
    h = torch.relu(z1)
    y_hat = h @ W2.T + b2
    grads = {}
    grad_h, grads["W2"], grads["b2"] = linear_backward(mse_loss_grad(y_hat, y), h, W2)
    _, grads["W1"], grads["b1"] = linear_backward(relu_backward(grad_h, z1), x, W1)
    return grads
''',
    ),
    dict(
        assignment="03_chain_rule", function="mlp_backward",
        style="the whole pass inside `with torch.no_grad():`; torch.where forward; unused numpy import; demo lines "
              "comparing with L.backward() on an nn.Sequential",
        added="",
        code=r'''import numpy as np


def mlp_backward(x, y, W1, b1, W2, b2):
    """Gradients of L = mse(relu(x W1ᵀ + b1) W2ᵀ + b2, y) by the chain rule.

    Return {"W1": dL/dW1, "b1": dL/db1, "W2": dL/dW2, "b2": dL/db2}, as L.backward() would fill .grad.
    """
    with torch.no_grad():                       # plain arithmetic: nothing here needs a graph
        z1 = x @ W1.T + b1
        h = torch.where(z1 > 0, z1, 0.0)
        y_hat = h @ W2.T + b2
        grad_y_hat = mse_loss_grad(y_hat, y)
        grad_h, grad_W2, grad_b2 = linear_backward(grad_y_hat, h, W2)
        grad_z1 = relu_backward(grad_h, z1)
        grad_x, grad_W1, grad_b1 = linear_backward(grad_z1, x, W1)
    return {"W1": grad_W1, "b1": grad_b1, "W2": grad_W2, "b2": grad_b2}


gen_demo = torch.Generator().manual_seed(0)
x_demo, y_demo = torch.randn(5, 3, generator=gen_demo), torch.randn(5, 2, generator=gen_demo)
net_demo = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
F.mse_loss(net_demo(x_demo), y_demo).backward()
mine_demo = mlp_backward(x_demo, y_demo, *(p.detach() for p in net_demo.parameters()))
print({k: torch.allclose(mine_demo[k], p.grad, atol=1e-6) for k, p in zip(("W1", "b1", "W2", "b2"), net_demo.parameters())})
''',
    ),
    # ------------------------------------------------------------------ 05 sgd_step
    dict(
        assignment="05_gradient_descent", function="sgd_step",
        style="__future__ annotations with typing.List and -> None; `with torch.no_grad():`, continue on a "
              "missing grad, p.add_(p.grad, alpha=-lr)",
        added="",
        code=r'''from __future__ import annotations

from typing import List


def sgd_step(params: List[torch.Tensor], lr: float) -> None:
    """Update every tensor p in the list in place: p <- p - lr * p.grad, as torch.optim.SGD(params, lr).step().

    Skip tensors whose .grad is None; each p must stay the same leaf tensor (use torch.no_grad()).
    """
    with torch.no_grad():
        for p in params:
            if p.grad is None:
                continue                       # as torch.optim.SGD: no gradient, no update
            p.add_(p.grad, alpha=-lr)
''',
    ),
    dict(
        assignment="05_gradient_descent", function="sgd_step",
        style="@torch.no_grad() decorator on the graded function; p -= lr * p.grad in the loop",
        added="",
        code=r'''@torch.no_grad()
def sgd_step(params, lr):
    """Update every tensor p in the list in place: p <- p - lr * p.grad, as torch.optim.SGD(params, lr).step().

    Skip tensors whose .grad is None; each p must stay the same leaf tensor (use torch.no_grad()).
    """
    for p in params:
        if p.grad is not None:
            p -= lr * p.grad
''',
    ),
    dict(
        assignment="05_gradient_descent", function="sgd_step",
        style='getattr(p, "grad", None) with a literal name, inside a walrus; p.sub_(lr * grad)',
        added="",
        code=r'''def sgd_step(params, lr):
    """Update every tensor p in the list in place: p <- p - lr * p.grad, as torch.optim.SGD(params, lr).step().

    Skip tensors whose .grad is None; each p must stay the same leaf tensor (use torch.no_grad()).
    """
    with torch.no_grad():
        for p in params:
            if (grad := getattr(p, "grad", None)) is not None:
                p.sub_(lr * grad)
''',
    ),
    dict(
        assignment="05_gradient_descent", function="sgd_step",
        style='typing.Iterable annotation; type(lr) is torch.Tensor -> lr.item(); a generator expression filtered '
              'with hasattr(q, "grad"); explicit return None',
        added="",
        code=r'''from typing import Iterable


def sgd_step(params: Iterable[torch.Tensor], lr) -> None:
    """Update every tensor p in the list in place: p <- p - lr * p.grad, as torch.optim.SGD(params, lr).step().

    Skip tensors whose .grad is None; each p must stay the same leaf tensor (use torch.no_grad()).
    """
    if type(lr) is torch.Tensor:            # a learning rate given as a 0-dim tensor
        lr = lr.item()
    with torch.no_grad():
        for p in (q for q in params if hasattr(q, "grad") and q.grad is not None):
            p.add_(-lr * p.grad)
    return None
''',
    ),
    dict(
        assignment="05_gradient_descent", function="sgd_step",
        style="added cell: a helper decorated with @torch.no_grad() doing p.copy_(p - lr * grad); the answer "
              "accepts any iterable (isinstance on list/tuple) and calls the helper",
        added=r'''@torch.no_grad()
def move_against(p, grad, lr):
    """p <- p - lr * grad, in place: p stays the same tensor object."""
    p.copy_(p - lr * grad)
''',
        code=r'''def sgd_step(params, lr):
    """Update every tensor p in the list in place: p <- p - lr * p.grad, as torch.optim.SGD(params, lr).step().

    Skip tensors whose .grad is None; each p must stay the same leaf tensor (use torch.no_grad()).
    """
    if not isinstance(params, (list, tuple)):
        params = list(params)      # model.parameters() is a generator
    for p in params:
        if p.grad is None:
            continue
        move_against(p, p.grad, lr)
''',
    ),
    # ------------------------------------------------------------------ 05 sgd_momentum_update
    dict(
        assignment="05_gradient_descent", function="sgd_momentum_update",
        style="__future__ annotations; full typing (Optional, Tuple) on a def line split over three lines; "
              "plain if/else following the docstring",
        added="",
        code=r'''from __future__ import annotations

from typing import Optional, Tuple


def sgd_momentum_update(p: torch.Tensor, grad: torch.Tensor, buf: Optional[torch.Tensor], lr: float,
                        momentum: float = 0.0, dampening: float = 0.0, weight_decay: float = 0.0,
                        nesterov: bool = False) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
    """One step of torch.optim.SGD for one parameter; return (new_p, new_buf) and change no input.

    g = grad + weight_decay * p; buf = g.clone() on the first step (buf is None), else
    buf = momentum * buf + (1 - dampening) * g; step = g + momentum * buf if nesterov else buf
    (step = g and new_buf = None when momentum == 0); new_p = p - lr * step.
    """
    g = grad + weight_decay * p if weight_decay != 0 else grad
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
        assignment="05_gradient_descent", function="sgd_momentum_update",
        style="match (momentum, buf) with a literal case (0, _), a None case and a capture case; "
              "out-of-place .add(..., alpha=...) as torch.optim writes it",
        added="",
        code=r'''def sgd_momentum_update(p, grad, buf, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False):
    """One step of torch.optim.SGD for one parameter; return (new_p, new_buf) and change no input.

    g = grad + weight_decay * p; buf = g.clone() on the first step (buf is None), else
    buf = momentum * buf + (1 - dampening) * g; step = g + momentum * buf if nesterov else buf
    (step = g and new_buf = None when momentum == 0); new_p = p - lr * step.
    """
    g = grad.add(p, alpha=weight_decay) if weight_decay else grad
    match momentum, buf:
        case 0, _:
            return p.add(g, alpha=-lr), None
        case _, None:
            new_buf = g.clone()
        case _, previous:
            new_buf = previous.mul(momentum).add(g, alpha=1 - dampening)
    step = g.add(new_buf, alpha=momentum) if nesterov else new_buf
    return p.add(step, alpha=-lr), new_buf
''',
    ),
    dict(
        assignment="05_gradient_descent", function="sgd_momentum_update",
        style="two nested functions (decayed, next_buffer) closing over the arguments; `if not momentum`",
        added="",
        code=r'''def sgd_momentum_update(p, grad, buf, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False):
    """One step of torch.optim.SGD for one parameter; return (new_p, new_buf) and change no input.

    g = grad + weight_decay * p; buf = g.clone() on the first step (buf is None), else
    buf = momentum * buf + (1 - dampening) * g; step = g + momentum * buf if nesterov else buf
    (step = g and new_buf = None when momentum == 0); new_p = p - lr * step.
    """
    def decayed(gradient):
        return gradient + weight_decay * p if weight_decay else gradient

    def next_buffer(g):
        return g.clone() if buf is None else momentum * buf + (1 - dampening) * g

    g = decayed(grad)
    if not momentum:
        new_buf, step = None, g
    else:
        new_buf = next_buffer(g)
        step = g + momentum * new_buf if nesterov else new_buf
    new_p = p - lr * step
    return new_p, new_buf
''',
    ),
    dict(
        assignment="05_gradient_descent", function="sgd_momentum_update",
        style="`with torch.no_grad():` around pure arithmetic; torch.add(..., alpha=...); g.detach().clone(); "
              "unused copy import",
        added="",
        code=r'''import copy


def sgd_momentum_update(p, grad, buf, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False):
    """One step of torch.optim.SGD for one parameter; return (new_p, new_buf) and change no input.

    g = grad + weight_decay * p; buf = g.clone() on the first step (buf is None), else
    buf = momentum * buf + (1 - dampening) * g; step = g + momentum * buf if nesterov else buf
    (step = g and new_buf = None when momentum == 0); new_p = p - lr * step.
    """
    with torch.no_grad():
        g = grad if weight_decay == 0 else grad + weight_decay * p
        if momentum == 0:
            return p - lr * g, None
        new_buf = g.detach().clone() if buf is None else torch.add(momentum * buf, g, alpha=1.0 - dampening)
        step = torch.add(g, new_buf, alpha=momentum) if nesterov else new_buf
        return torch.add(p, step, alpha=-lr), new_buf
''',
    ),
    dict(
        assignment="05_gradient_descent", function="sgd_momentum_update",
        style="added cell: a lambda axpy(a, b, alpha) = torch.add(a, b, alpha=alpha) beside an unused functools "
              "import; demo loop against torch.optim.SGD with Nesterov momentum",
        added=r'''import functools

# a + alpha * b, the way torch.optim writes its updates (tensor.add(other, alpha=...))
axpy = lambda a, b, alpha: torch.add(a, b, alpha=alpha)
''',
        code=r'''def sgd_momentum_update(p, grad, buf, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False):
    """One step of torch.optim.SGD for one parameter; return (new_p, new_buf) and change no input.

    g = grad + weight_decay * p; buf = g.clone() on the first step (buf is None), else
    buf = momentum * buf + (1 - dampening) * g; step = g + momentum * buf if nesterov else buf
    (step = g and new_buf = None when momentum == 0); new_p = p - lr * step.
    """
    g = axpy(grad, p, weight_decay) if weight_decay != 0 else grad
    new_buf = None
    if momentum != 0:
        new_buf = g.clone() if buf is None else axpy(momentum * buf, g, 1 - dampening)
        g = axpy(g, new_buf, momentum) if nesterov else new_buf
    return axpy(p, g, -lr), new_buf


p_demo = torch.tensor([1.0, -2.0], requires_grad=True)
opt_demo = torch.optim.SGD([p_demo], lr=0.1, momentum=0.9, nesterov=True)
mine_p, mine_buf = p_demo.detach().clone(), None
for grad_demo in (torch.tensor([0.5, 0.5]), torch.tensor([-1.0, 2.0]), torch.tensor([0.1, 0.0])):
    p_demo.grad = grad_demo.clone()
    opt_demo.step()
    mine_p, mine_buf = sgd_momentum_update(mine_p, grad_demo, mine_buf, 0.1, momentum=0.9, nesterov=True)
    print(torch.allclose(mine_p, p_demo.detach()), torch.allclose(mine_buf, opt_demo.state[p_demo]["momentum_buffer"]))
''',
    ),
    # ------------------------------------------------------------------ 06 train_mlp
    dict(
        assignment="06_putting_it_together", function="train_mlp",
        style="__future__ annotations with Dict/List/Tuple; an annotated local `losses: List[float]`; the part-2 "
              "names (z1, h, y_hat, grad_y_hat, grad_h, grad_z1, ...); tuple-assignment updates",
        added="",
        code=r'''from __future__ import annotations

from typing import Dict, List, Tuple


def train_mlp(x: torch.Tensor, y: torch.Tensor, params: Dict[str, torch.Tensor], lr: float,
              steps: int) -> Tuple[Dict[str, torch.Tensor], List[float]]:
    """Run `steps` steps of gradient descent on mse(relu(x W1ᵀ + b1) W2ᵀ + b2, y), by hand.

    Return (new_params, losses): the trained {"W1", "b1", "W2", "b2"} and the loss before each update.
    """
    W1, b1, W2, b2 = (params[k].clone() for k in ("W1", "b1", "W2", "b2"))
    losses: List[float] = []
    for _ in range(steps):
        # forward
        z1 = x @ W1.T + b1
        h = torch.where(z1 > 0, z1, torch.zeros_like(z1))
        y_hat = h @ W2.T + b2
        loss = ((y_hat - y) ** 2).mean()
        losses.append(loss.item())
        # backward
        grad_y_hat = 2 * (y_hat - y) / y_hat.numel()
        grad_W2 = grad_y_hat.T @ h
        grad_b2 = grad_y_hat.sum(dim=0)
        grad_h = grad_y_hat @ W2
        grad_z1 = grad_h * (z1 > 0).to(z1.dtype)
        grad_W1 = grad_z1.T @ x
        grad_b1 = grad_z1.sum(dim=0)
        # step
        W1, b1 = W1 - lr * grad_W1, b1 - lr * grad_b1
        W2, b2 = W2 - lr * grad_W2, b2 - lr * grad_b2
    return {"W1": W1, "b1": b1, "W2": W2, "b2": b2}, losses
''',
    ),
    dict(
        assignment="06_putting_it_together", function="train_mlp",
        style="added cell: a top-level comprehension building the key list; the answer copies params with a dict "
              "comprehension and updates with another; clamp(min=0) forward",
        added=r'''PARAM_NAMES = [f"{kind}{layer}" for layer in (1, 2) for kind in ("W", "b")]   # ["W1", "b1", "W2", "b2"]
''',
        code=r'''def train_mlp(x, y, params, lr, steps):
    """Run `steps` steps of gradient descent on mse(relu(x W1ᵀ + b1) W2ᵀ + b2, y), by hand.

    Return (new_params, losses): the trained {"W1", "b1", "W2", "b2"} and the loss before each update.
    """
    p = {name: params[name].detach().clone() for name in PARAM_NAMES}
    losses = []
    for step in range(steps):
        z1 = x @ p["W1"].T + p["b1"]
        h = z1.clamp(min=0)
        y_hat = h @ p["W2"].T + p["b2"]
        losses.append(((y_hat - y) ** 2).mean().item())
        grad_y_hat = 2 * (y_hat - y) / y_hat.numel()
        grad_h = grad_y_hat @ p["W2"]
        grad_z1 = torch.where(z1 > 0, grad_h, torch.zeros_like(grad_h))
        grads = {"W1": grad_z1.T @ x, "b1": grad_z1.sum(0), "W2": grad_y_hat.T @ h, "b2": grad_y_hat.sum(0)}
        p = {name: p[name] - lr * grads[name] for name in PARAM_NAMES}
    return p, losses
''',
    ),
    dict(
        assignment="06_putting_it_together", function="train_mlp",
        style="added cell: forward and gradients helpers and an update helper decorated with @torch.no_grad(); "
              "the answer destructures params with a mapping pattern `case {\"W1\": W1, ...}`; float(loss)",
        added=r'''def forward(x, W1, b1, W2, b2):
    """z1, h, y_hat of the two-layer network (ReLU between)."""
    z1 = x @ W1.T + b1
    h = torch.where(z1 > 0, z1, torch.zeros_like(z1))
    return z1, h, h @ W2.T + b2


def gradients(x, y, z1, h, y_hat, W2):
    """dL/dθ by the chain rule (notebook 3's formulas), as a dict like params."""
    grad_y_hat = 2 * (y_hat - y) / y_hat.numel()
    grad_h = grad_y_hat @ W2
    grad_z1 = grad_h * (z1 > 0).to(grad_h.dtype)
    return {"W1": grad_z1.T @ x, "b1": grad_z1.sum(dim=0), "W2": grad_y_hat.T @ h, "b2": grad_y_hat.sum(dim=0)}


@torch.no_grad()
def sgd_update(params, grads, lr):
    """A new dict: every parameter moved against its gradient."""
    return {name: value - lr * grads[name] for name, value in params.items()}
''',
        code=r'''def train_mlp(x, y, params, lr, steps):
    """Run `steps` steps of gradient descent on mse(relu(x W1ᵀ + b1) W2ᵀ + b2, y), by hand.

    Return (new_params, losses): the trained {"W1", "b1", "W2", "b2"} and the loss before each update.
    """
    match params:
        case {"W1": W1, "b1": b1, "W2": W2, "b2": b2}:
            current = {"W1": W1.clone(), "b1": b1.clone(), "W2": W2.clone(), "b2": b2.clone()}
        case _:
            raise KeyError(f"params needs the keys W1, b1, W2, b2; got {sorted(params)}")
    losses = []
    for _ in range(steps):
        z1, h, y_hat = forward(x, current["W1"], current["b1"], current["W2"], current["b2"])
        losses.append(float(((y_hat - y) ** 2).mean()))
        current = sgd_update(current, gradients(x, y, z1, h, y_hat, current["W2"]), lr)
    return current, losses
''',
    ),
    dict(
        assignment="06_putting_it_together", function="train_mlp",
        style="added cell: an endless generator yielding (loss, W1, b1, W2, b2) before each update; the answer takes "
              "steps + 1 items with itertools.islice and star-unpacks them",
        added=r'''def descent(x, y, W1, b1, W2, b2, lr):
    """Gradient descent on the two-layer MSE network, forever: yields (loss, W1, b1, W2, b2) before each update."""
    while True:
        z1 = x @ W1.T + b1
        h = z1.clamp(min=0)
        y_hat = h @ W2.T + b2
        yield ((y_hat - y) ** 2).mean().item(), W1, b1, W2, b2
        grad_y_hat = 2 * (y_hat - y) / y_hat.numel()
        grad_h = grad_y_hat @ W2
        grad_z1 = grad_h * (z1 > 0)
        W1, b1 = W1 - lr * (grad_z1.T @ x), b1 - lr * grad_z1.sum(0)
        W2, b2 = W2 - lr * (grad_y_hat.T @ h), b2 - lr * grad_y_hat.sum(0)
''',
        code=r'''import itertools


def train_mlp(x, y, params, lr, steps):
    """Run `steps` steps of gradient descent on mse(relu(x W1ᵀ + b1) W2ᵀ + b2, y), by hand.

    Return (new_params, losses): the trained {"W1", "b1", "W2", "b2"} and the loss before each update.
    """
    start = [params[k].clone() for k in ("W1", "b1", "W2", "b2")]
    history = list(itertools.islice(descent(x, y, *start, lr), steps + 1))
    losses = [loss for loss, *_ in history[:-1]]
    _, W1, b1, W2, b2 = history[-1]          # the parameters after `steps` updates
    return {"W1": W1, "b1": b1, "W2": W2, "b2": b2}, losses
''',
    ),
    dict(
        assignment="06_putting_it_together", function="train_mlp",
        style="__future__ annotations; copy.copy of the dict then cloned values; in-place sub_ on the copies under "
              "`with torch.no_grad():`; clamp_min forward; a loop over (param, grad) pairs",
        added="",
        code=r'''from __future__ import annotations

import copy
from typing import Dict, List


def train_mlp(x, y, params: Dict[str, torch.Tensor], lr: float, steps: int):
    """Run `steps` steps of gradient descent on mse(relu(x W1ᵀ + b1) W2ᵀ + b2, y), by hand.

    Return (new_params, losses): the trained {"W1", "b1", "W2", "b2"} and the loss before each update.
    """
    new_params = copy.copy(params)                    # a new dict ...
    for key, value in new_params.items():
        new_params[key] = value.clone()               # ... holding new tensors: params stays as it is
    W1, b1, W2, b2 = (new_params[k] for k in ("W1", "b1", "W2", "b2"))
    losses: List[float] = []
    with torch.no_grad():
        for _ in range(steps):
            z1 = x @ W1.T + b1
            h = z1.clamp_min(0)
            y_hat = h @ W2.T + b2
            losses.append((y_hat - y).pow(2).mean().item())
            grad_y_hat = 2 * (y_hat - y) / y_hat.numel()
            grad_W2, grad_b2 = grad_y_hat.T @ h, grad_y_hat.sum(0)
            grad_z1 = (grad_y_hat @ W2) * (z1 > 0)
            grad_W1, grad_b1 = grad_z1.T @ x, grad_z1.sum(0)
            for p, grad in ((W1, grad_W1), (b1, grad_b1), (W2, grad_W2), (b2, grad_b2)):
                p.sub_(lr * grad)                     # in place, on our own copies
    return new_params, losses
''',
    ),
    # ------------------------------------------------------------------ 07 LinearFunction
    dict(
        assignment="07_custom_autograd", function="LinearFunction",
        style="@staticmethod over @once_differentiable (imported from torch.autograd.function in the answer cell); "
              "needs_input_grad unpacked into three flags; conditional expressions",
        added="",
        code=r'''from torch.autograd.function import once_differentiable


class LinearFunction(torch.autograd.Function):
    """y = x W^T + b for x (N, in), W (out, in), b (out,) or None, with a backward written by hand."""

    @staticmethod
    def forward(ctx, x, W, b):
        """Return x @ W.T + b (no bias when b is None); save what backward needs in ctx."""
        ctx.save_for_backward(x, W)
        y = x @ W.T
        return y if b is None else y + b

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out):
        """Return (grad_x, grad_W, grad_b) = (grad_out W, grad_out^T x, grad_out summed over the batch).

        None for each input with ctx.needs_input_grad False, and for b when it is None. No autograd here.
        """
        x, W = ctx.saved_tensors
        need_x, need_W, need_b = ctx.needs_input_grad
        grad_x = grad_out @ W if need_x else None
        grad_W = grad_out.T @ x if need_W else None
        grad_b = grad_out.sum(dim=0) if need_b else None
        return grad_x, grad_W, grad_b
''',
    ),
    dict(
        assignment="07_custom_autograd", function="LinearFunction",
        style="F.linear in forward and a plain flag ctx.has_bias; match ctx.needs_input_grad with a sequence "
              "capture pattern; torch.mm in backward",
        added="",
        code=r'''class LinearFunction(torch.autograd.Function):
    """y = x W^T + b for x (N, in), W (out, in), b (out,) or None, with a backward written by hand."""

    @staticmethod
    def forward(ctx, x, W, b):
        """Return x @ W.T + b (no bias when b is None); save what backward needs in ctx."""
        ctx.save_for_backward(x, W)
        ctx.has_bias = b is not None
        return F.linear(x, W, b)

    @staticmethod
    def backward(ctx, grad_out):
        """Return (grad_x, grad_W, grad_b) = (grad_out W, grad_out^T x, grad_out summed over the batch).

        None for each input with ctx.needs_input_grad False, and for b when it is None. No autograd here.
        """
        x, W = ctx.saved_tensors
        match ctx.needs_input_grad:
            case (need_x, need_W, need_b):
                pass
            case other:
                raise RuntimeError(f"expected three flags, got {other}")
        grad_x = torch.mm(grad_out, W) if need_x else None
        grad_W = torch.mm(grad_out.t(), x) if need_W else None
        grad_b = grad_out.sum(0) if (need_b and ctx.has_bias) else None
        return grad_x, grad_W, grad_b
''',
    ),
    dict(
        assignment="07_custom_autograd", function="LinearFunction",
        style="__future__ annotations with Optional/Tuple on the static methods; torch.matmul forward; backward "
              "flattens leading dims with reshape and indexes ctx.needs_input_grad[i]",
        added="",
        code=r'''from __future__ import annotations

from typing import Optional, Tuple


class LinearFunction(torch.autograd.Function):
    """y = x W^T + b for x (N, in), W (out, in), b (out,) or None, with a backward written by hand."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, W: torch.Tensor, b: Optional[torch.Tensor]) -> torch.Tensor:
        """Return x @ W.T + b (no bias when b is None); save what backward needs in ctx."""
        ctx.save_for_backward(x, W)
        out = torch.matmul(x, W.transpose(0, 1))
        if b is not None:
            out = out + b
        return out

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor) -> Tuple[Optional[torch.Tensor], ...]:
        """Return (grad_x, grad_W, grad_b) = (grad_out W, grad_out^T x, grad_out summed over the batch).

        None for each input with ctx.needs_input_grad False, and for b when it is None. No autograd here.
        """
        x, W = ctx.saved_tensors
        G = grad_out.reshape(-1, W.shape[0])          # (N, out), whatever x's leading dims
        X = x.reshape(-1, W.shape[1])                 # (N, in)
        grad_x = (G @ W).reshape(x.shape) if ctx.needs_input_grad[0] else None
        grad_W = G.T @ X if ctx.needs_input_grad[1] else None
        grad_b = G.sum(dim=0) if ctx.needs_input_grad[2] else None
        return grad_x, grad_W, grad_b
''',
    ),
    dict(
        assignment="07_custom_autograd", function="LinearFunction",
        style="added cell: functools.partial(torch.sum, dim=0) for the bias gradient; forward uses torch.addmm and "
              "saves b only when given; backward star-unpacks saved_tensors and uses a lambda over needs_input_grad",
        added=r'''import functools

sum_over_batch = functools.partial(torch.sum, dim=0)      # dL/db: the upstream gradient summed over the samples
''',
        code=r'''class LinearFunction(torch.autograd.Function):
    """y = x W^T + b for x (N, in), W (out, in), b (out,) or None, with a backward written by hand."""

    @staticmethod
    def forward(ctx, x, W, b):
        """Return x @ W.T + b (no bias when b is None); save what backward needs in ctx."""
        if b is None:
            ctx.save_for_backward(x, W)
            return x.mm(W.t())
        ctx.save_for_backward(x, W, b)
        return torch.addmm(b, x, W.t())

    @staticmethod
    def backward(ctx, grad_out):
        """Return (grad_x, grad_W, grad_b) = (grad_out W, grad_out^T x, grad_out summed over the batch).

        None for each input with ctx.needs_input_grad False, and for b when it is None. No autograd here.
        """
        x, W, *rest = ctx.saved_tensors            # rest is [b] when the layer has a bias
        wants = lambda i: ctx.needs_input_grad[i]
        grad_x = grad_out.mm(W) if wants(0) else None
        grad_W = grad_out.t().mm(x) if wants(1) else None
        grad_b = sum_over_batch(grad_out) if rest and wants(2) else None
        return grad_x, grad_W, grad_b
''',
    ),
    dict(
        assignment="07_custom_autograd", function="LinearFunction",
        style='torch.einsum in forward; @once_differentiable; getattr(ctx, "needs_input_grad", ...) with a literal '
              "name; a list of conditional gradients returned as a tuple; unused numpy import; demo lines running "
              "gradcheck and printing type(grad_fn).__name__",
        added="",
        code=r'''import numpy as np
from torch.autograd.function import once_differentiable


class LinearFunction(torch.autograd.Function):
    """y = x W^T + b for x (N, in), W (out, in), b (out,) or None, with a backward written by hand."""

    @staticmethod
    def forward(ctx, x, W, b):
        """Return x @ W.T + b (no bias when b is None); save what backward needs in ctx."""
        y = torch.einsum("ni,oi->no", x, W)
        if b is not None:
            y = y + b
        ctx.save_for_backward(x, W)
        ctx.bias_given = b is not None
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out):
        """Return (grad_x, grad_W, grad_b) = (grad_out W, grad_out^T x, grad_out summed over the batch).

        None for each input with ctx.needs_input_grad False, and for b when it is None. No autograd here.
        """
        x, W = ctx.saved_tensors
        needs = getattr(ctx, "needs_input_grad", (True, True, True))
        grads = [
            grad_out @ W if needs[0] else None,
            grad_out.T @ x if needs[1] else None,
            grad_out.sum(dim=0) if needs[2] and ctx.bias_given else None,
        ]
        return tuple(grads)


x_demo = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
W_demo = torch.randn(2, 3, dtype=torch.float64, requires_grad=True)
b_demo = torch.randn(2, dtype=torch.float64, requires_grad=True)
out_demo = LinearFunction.apply(x_demo, W_demo, b_demo)
print(type(out_demo.grad_fn).__name__)
print("gradcheck:", torch.autograd.gradcheck(LinearFunction.apply, (x_demo, W_demo, b_demo)))
print("gradcheck without bias:", torch.autograd.gradcheck(LinearFunction.apply, (x_demo, W_demo, None)))
''',
    ),
]

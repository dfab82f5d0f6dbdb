"""The allowlists of course.py, checked in this process (no sandbox): they hold real operators,
they let every by-hand style through and they stop the ways around a denylist (issue 20).

Whole notebooks are graded by tests/grade/test_scenarios.py: every sample that keeps full marks for a
function ran only what that function's allowlist holds, and every hostile sample loses its points.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.autograd.forward_ad as fwAD
import torch.nn.functional as F

from autograder.course import ASSIGNMENTS
from autograder.jail.inside.watch import _Recorder
from autograder.grade.student import banned_uses

BY_HAND_EXERCISES = {
    "01_linear_algebra": {"matmul", "linear_forward"},
    "02_activation_functions": {"relu", "relu_derivative", "sigmoid", "sigmoid_derivative",
                                "collapse_linear"},
    "03_chain_rule": {"mse_loss", "mse_loss_grad", "linear_backward", "relu_backward", "mlp_backward"},
    "05_gradient_descent": {"sgd_step", "sgd_momentum_update"},
    "06_putting_it_together": {"train_mlp"},
    "07_custom_autograd": {"LinearFunction"},
}
"""Where the exercise is the computation itself; everywhere else (04, layer_grad_norms,
FakeQuantize, train_quantized, record_ops) the exercise is autograd or torch itself: no allowlist."""


def test_the_functions_with_an_allowlist_are_the_by_hand_ones():
    assert {a.id: set(a.allowed) for a in ASSIGNMENTS.values() if a.allowed} == BY_HAND_EXERCISES


def test_every_allowlisted_name_is_an_aten_operator():
    for a in ASSIGNMENTS.values():
        for function, ops in a.allowed.items():
            unknown = sorted(op for op in ops if not hasattr(torch.ops.aten, op))
            assert not unknown, f"{a.id} {function}: no such ATen operator {unknown}"


def test_no_allowlist_holds_a_kernel_that_does_the_exercise():
    never = {"_slow_conv2d_forward", "slow_conv3d_forward", "thnn_conv2d", "mkldnn_convolution",
             "convolution", "_make_dual", "_unpack_dual", "_has_same_storage_numel", "_fw_primal",
             "threshold_backward", "sigmoid_backward", "mse_loss_backward", "_foreach_add_",
             "_record_function_enter_new", "_embedding_bag", "_sparse_addmm", "_trilinear"}
    for a in ASSIGNMENTS.values():
        for function, ops in a.allowed.items():
            assert not ops & never, (function, sorted(ops & never))
            assert not {op for op in ops if op.endswith("_backward")}, function
    for function in ("matmul", "linear_forward"):
        assert not ASSIGNMENTS["01_linear_algebra"].allowed[function] & {"mm", "addmm", "bmm", "dot", "mv"}
    for function in ("relu", "relu_derivative", "sigmoid", "sigmoid_derivative"):
        assert not ASSIGNMENTS["02_activation_functions"].allowed[function] & {"relu", "sigmoid", "_softmax"}


def recorded(fn, *args) -> list[str]:
    recorder = _Recorder()
    with recorder:
        fn(*args)
    return sorted(recorder.seen)


def verdict(assignment: str, function: str, fn, *args) -> str:
    a = ASSIGNMENTS[assignment]
    return banned_uses(recorded(fn, *args), a.banned.get(function, frozenset()),
                       a.allowed.get(function))


A = torch.randn(3, 4)
B = torch.randn(4, 2)


def _index_put(A, B):
    C = torch.zeros(A.shape[0], B.shape[1], dtype=A.dtype)
    for i in range(A.shape[0]):
        C[i, :] = (A[i, :, None] * B).sum(dim=0)
    return C


def _outer_products(A, B):
    C = A.new_zeros((A.shape[0], B.shape[1]))
    for t in range(A.shape[1]):
        C += A[:, t:t + 1] * B[t:t + 1, :]
    return C


def _python_sums(A, B):
    a, b = A.tolist(), B.tolist()
    rows = [[sum(x * y for x, y in zip(row, col)) for col in zip(*b)] for row in a]
    return torch.tensor(rows, dtype=A.dtype).reshape(A.shape[0], B.shape[1])


def _stacked_row_sums(A, B):
    return torch.stack([torch.stack([torch.sum(A[i] * B[:, j]) for j in range(B.shape[1])])
                        for i in range(A.shape[0])])


def _index_put_accumulate(A, B):
    C = torch.zeros(A.shape[0] * B.shape[1], dtype=A.dtype)
    rows = torch.arange(A.shape[0]).repeat_interleave(B.shape[1])
    cols = torch.arange(B.shape[1]).repeat(A.shape[0])
    for t in range(A.shape[1]):
        C.index_put_((torch.arange(C.numel()),), A[rows, t] * B[t, cols], accumulate=True)
    return C.view(A.shape[0], B.shape[1])


@pytest.mark.parametrize("style", [
    lambda A, B: (A[:, :, None] * B[None, :, :]).sum(dim=1),
    lambda A, B: (A.double().unsqueeze(2) * B.double().unsqueeze(0)).sum(1).to(A.dtype),
    lambda A, B: print(A, B, f"{A.sum():.3f}") or (A[:, :, None] * B).sum(1),
    _index_put, _outer_products, _python_sums, _stacked_row_sums, _index_put_accumulate,
    lambda A, B: torch.zeros(0, 3) + (A[:0, :, None] * B).sum(1).sum(),
    lambda A, B: [float(A[0, 0]), A[0, 0].item(), bool(A[0, 0] > 0), int(A.numel())],
], ids=["broadcast", "float64", "prints", "index_put", "outer_products", "python_sums",
        "stacked_row_sums", "index_put_accumulate", "empty", "python_numbers"])
def test_by_hand_matmuls_are_allowed(style):
    assert torch.allclose(_index_put(A, B), A @ B, atol=1e-6)
    assert verdict("01_linear_algebra", "matmul", style, A, B) == ""


def _slow_conv2d(A, B):
    n, k = A.shape
    image = A.t().reshape(1, k, n, 1).contiguous()
    kernel = B.t().reshape(B.shape[1], k, 1, 1).contiguous()
    return torch.ops.aten._slow_conv2d_forward(image, kernel, [1, 1], None, [1, 1], [0, 0])


def _dlpack(A, B):
    return torch.from_numpy(np.from_dlpack(A) @ np.from_dlpack(B))


def _storage(A, B):
    a = np.frombuffer(bytes(A.untyped_storage()), dtype=np.float32).reshape(A.shape)
    return torch.tensor((a @ B.tolist()).tolist())


@pytest.mark.parametrize("attack, named", [
    (_slow_conv2d, "_slow_conv2d_forward"),
    (lambda A, B: getattr(torch.ops.aten, "m" + "m").default(A, B), "matrix product"),
    (lambda A, B: torch.ops.aten.addmm(torch.zeros(3, 2), A, B), "matrix product"),
    (lambda A, B: torch.from_numpy(A.numpy() @ B.numpy()), "numpy"),
    (lambda A, B: torch.from_numpy(np.asarray(A) @ np.asarray(B)), "numpy"),
    (_dlpack, "leaving torch"),
    (_storage, "leaving torch"),
    (lambda A, B: torch.linalg.vecdot(A[:, None, :], B.t()[None, :, :]), "vecdot"),
    (lambda A, B: F.conv1d(A.t()[None], B.t()[:, :, None]), "convolution"),
], ids=["slow_conv2d", "mm_by_string", "addmm_by_ops", "numpy", "np_asarray", "dlpack",
        "storage_bytes", "vecdot", "conv1d"])
def test_matmul_attacks_are_refused_and_named(attack, named):
    message = verdict("01_linear_algebra", "matmul", attack, A, B)
    assert named in message, message


Z = torch.tensor([-2.0, -0.0, 0.0, 0.5, 3.0])


def _forward_mode(z):
    with fwAD.dual_level():
        dual = fwAD.make_dual(z, torch.ones_like(z))
        return fwAD.unpack_dual(1 / (1 + torch.exp(-dual))).tangent


def _make_dual_by_ops(z):
    with fwAD.dual_level():
        return torch.ops.aten._unpack_dual(torch.ops.aten._make_dual(z, torch.ones_like(z), 0) ** 2, 0)


def _graph_node(z):
    with torch.enable_grad():
        leaf = z.detach().requires_grad_()
        out = leaf * (leaf > 0).to(leaf.dtype)
        return out.grad_fn(torch.ones_like(out))[0]


@pytest.mark.parametrize("attack, named", [
    (_forward_mode, "forward-mode"),
    (_make_dual_by_ops, "forward-mode"),
    (lambda z: torch.func.jvp(torch.exp, (z,), (torch.ones_like(z),)), "forward-mode"),
    (lambda z: torch.func.vjp(torch.exp, z)[1](torch.ones_like(z)), "autograd"),
    (lambda z: torch.autograd.functional.jacobian(torch.exp, z), "autograd"),
    (_graph_node, "grad_fn"),
    (lambda z: torch.sigmoid(z), "sigmoid"),
    (lambda z: torch.ops.aten.threshold_backward(torch.ones_like(z), z, 0), "threshold_backward"),
], ids=["forward_ad", "make_dual_by_ops", "func_jvp", "func_vjp", "jacobian", "graph_node",
        "sigmoid", "threshold_backward"])
def test_derivative_attacks_are_refused_and_named(attack, named):
    message = verdict("02_activation_functions", "sigmoid_derivative", attack, Z)
    assert named in message, message


@pytest.mark.parametrize("style", [
    lambda z: (z > 0).to(z.dtype),
    lambda z: torch.where(z > 0, torch.ones_like(z), torch.zeros_like(z)),
    lambda z: (z > 0).float().type_as(z),
    lambda z: z.clamp(min=0),
    lambda z: z * (z > 0),
    lambda z: torch.maximum(z, z.new_zeros(())),
    lambda z: torch.heaviside(z, torch.zeros_like(z)),
    lambda z: 0.5 * (1 + torch.tanh(z / 2)),
    lambda z: torch.exp(-z.abs()) / (1 + torch.exp(-z.abs())) ** 2,
    lambda z: torch.where(z >= 0, 1 / (1 + torch.exp(-z)), torch.exp(z) / (1 + torch.exp(z))),
    lambda z: torch.tensor([max(v, 0.0) for v in z.tolist()], dtype=z.dtype),
    lambda z: z.masked_fill(z <= 0, 0.0),
    lambda z: torch.stack([v.clamp(min=0) for v in z]) if z.numel() else z.clone(),
], ids=["to_dtype", "where", "float_type_as", "clamp", "mul_mask", "maximum", "heaviside", "tanh",
        "exp_abs", "stable_where", "tolist", "masked_fill", "stack"])
def test_by_hand_activations_are_allowed(style):
    for function in ("relu", "relu_derivative", "sigmoid", "sigmoid_derivative"):
        assert verdict("02_activation_functions", function, style, Z) == "", function
        assert verdict("02_activation_functions", function, style, Z.double()) == "", function
        assert verdict("02_activation_functions", function, style, torch.zeros(0)) == "", function


def test_torch_optim_is_refused_in_sgd_step():
    p = torch.randn(3, requires_grad=True)
    p.grad = torch.ones(3)
    message = verdict("05_gradient_descent", "sgd_step", lambda: torch.optim.SGD([p], lr=0.1).step())
    assert "torch.optim" in message, message

    def by_hand(params):
        with torch.no_grad():
            for q in params:
                q.sub_(q.grad, alpha=0.1)
                q -= 0.1 * q.grad
                q.data.add_(q.grad, alpha=-0.1)
                q.copy_(q - 0.1 * q.grad)
    assert verdict("05_gradient_descent", "sgd_step", by_hand, [p]) == ""


def test_an_allowlist_with_a_section_checks_only_that_part():
    """07: LinearFunction's forward may run anything; its backward (recorded under "backward:")
    only what a by-hand backward needs."""
    a = ASSIGNMENTS["07_custom_autograd"]
    assert a.allowed_section == {"LinearFunction": "backward"}
    recorder = _Recorder()
    x, W = torch.randn(2, 3), torch.randn(4, 3)
    with recorder:
        y = torch.einsum("ni,oi->no", x, W)
        recorder.within("backward", lambda g: (g @ W, g.t() @ x, g.sum(0)))(torch.ones_like(y))
    used = sorted(recorder.seen)
    assert banned_uses(used, a.banned["LinearFunction"], a.allowed["LinearFunction"], "backward") == ""
    with recorder:
        recorder.within("backward", lambda: torch.func.jvp(torch.exp, (x,), (x,)))()
    used = sorted(recorder.seen)
    assert "forward-mode" in banned_uses(used, a.banned["LinearFunction"], a.allowed["LinearFunction"],
                                         "backward")

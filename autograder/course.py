"""The course's assignments: ids, notebook files and graded functions (CONTRACT.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Every spelling of a built-in matrix product, after `base_name` strips the namespace.
MATRIX_PRODUCTS = frozenset({
    "matmul", "__matmul__", "__rmatmul__", "mm", "bmm", "einsum", "tensordot", "addmm",
    "inner", "dot", "vdot", "linear", "mv", "addmv", "baddbmm", "addbmm", "chain_matmul",
    "multi_dot", "vecdot", "bilinear", "_trilinear", "_addmm_activation",
    # products in disguise: a convolution with a kernel of size 1, a bag of embeddings weighted by
    # a row of A, a sparse product each compute A @ B in one operator
    "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
    "convolution", "_convolution", "conv_tbc", "embedding_bag", "_embedding_bag",
    "_embedding_bag_forward_only", "_sparse_mm", "_sparse_addmm", "sspaddmm", "hspmm", "smm",
})
"""Python names and, caught at the dispatch level whatever the spelling, ATen operators."""
AUTOGRAD = frozenset({"backward", "grad", "vjp", "jacobian", "jvp", "hessian",
                      "autograd_engine", "functorch_transform"})
ACTIVATIONS = frozenset({
    "relu", "relu_", "relu6", "threshold", "threshold_", "sigmoid", "sigmoid_", "logsigmoid",
    "log_sigmoid_forward", "expit", "hardtanh", "leaky_relu", "elu", "gelu", "silu",
    "threshold_backward", "sigmoid_backward", "hardsigmoid",
    # the same activations in disguise: sigmoid(z) = softmax((z, 0))[0] = exp(-softplus(-z)),
    # relu(z) = rrelu(z, 0, 0) = prelu(z, 0); glu((1, z)) = sigmoid(z)
    "softmax", "_softmax", "log_softmax", "_log_softmax", "softmin", "softplus",
    "rrelu", "rrelu_with_noise", "prelu", "_prelu_kernel", "celu", "selu", "glu",
})
LEAVING_TORCH = frozenset({"numpy", "__array__"})
"""`t.numpy()`, `np.asarray(t)`, a numpy function given a tensor: what numpy then computes (its
own `@`) never reaches torch, so no check can see it. Pure-Python work on `.tolist()` stays allowed."""


@dataclass(frozen=True)
class Assignment:
    """One nbgrader assignment: a folder with one notebook."""

    id: str
    notebook: str
    functions: tuple[str, ...]
    banned: dict[str, frozenset[str]] = field(default_factory=dict)
    """function -> base names of torch functions it may not call."""
    in_place: frozenset[str] = frozenset()
    """functions that are meant to modify their arguments."""
    banned_reason: dict[str, str] = field(default_factory=dict)
    warm: tuple[str, ...] = ()
    """Modules that grading this assignment imports lazily (the learner's code run as the
    contract asks, the stand-ins, the hidden tests' own computation): the jailed server imports
    them once, at start-up when it knows the assignment, instead of every child, and the grader
    imports them before the tests run (plugin.run_tests)."""

    @property
    def source(self) -> Path:
        return ROOT / "source" / self.id / self.notebook


def _all(functions, names):
    return {f: frozenset(names) for f in functions}


ASSIGNMENTS: dict[str, Assignment] = {a.id: a for a in [
    Assignment(
        "01_linear_algebra", "linear_algebra.ipynb", ("matmul", "linear_forward"),
        banned=_all(("matmul", "linear_forward"), MATRIX_PRODUCTS | LEAVING_TORCH),
        banned_reason=dict.fromkeys(("matmul", "linear_forward"),
                                    "build the product from elementwise products and sums"),
    ),
    Assignment(
        "02_activation_functions", "activation_functions.ipynb",
        ("relu", "relu_derivative", "sigmoid", "sigmoid_derivative", "collapse_linear"),
        banned=_all(("relu", "relu_derivative", "sigmoid", "sigmoid_derivative", "collapse_linear"),
                    AUTOGRAD | ACTIVATIONS),
    ),
    Assignment(
        "03_chain_rule", "chain_rule.ipynb",
        ("mse_loss", "mse_loss_grad", "linear_backward", "relu_backward", "mlp_backward"),
        banned=_all(("mse_loss", "mse_loss_grad", "linear_backward", "relu_backward", "mlp_backward"),
                    AUTOGRAD),
        # autograd with a given output gradient (backward(grad_out), autograd.grad(y, x, g), as
        # the stand-ins and the hidden tests run) imports torch's symbolic shapes and sympy on
        # first use: 0.4 s in each such child otherwise
        warm=("torch.fx.experimental.symbolic_shapes",),
    ),
    Assignment(
        "04_computational_graph", "computational_graph.ipynb",
        ("graph_nodes", "leaf_tensors", "hidden_grad"),
    ),
    Assignment(
        "05_gradient_descent", "gradient_descent.ipynb", ("sgd_step", "sgd_momentum_update"),
        in_place=frozenset({"sgd_step"}),
    ),
    Assignment(
        "06_putting_it_together", "putting_it_together.ipynb", ("train_mlp", "layer_grad_norms"),
        banned={"train_mlp": AUTOGRAD | {"optimizer_step"}},
        banned_reason={"train_mlp": "compute the gradients by the chain rule and update the "
                                    "parameters yourself (p - lr * grad_p), with no optimizer"},
    ),
    Assignment(
        "07_custom_autograd", "custom_autograd.ipynb",
        ("LinearFunction", "FakeQuantize", "train_quantized", "record_ops"),
        banned={"LinearFunction": AUTOGRAD},
        banned_reason={"LinearFunction": "write backward's gradients by hand from the formulas"},
        # train_quantized and record_ops's reference build torch.optim optimizers, whose first
        # one imports it (1.2 s)
        warm=("torch._dynamo",),
    ),
]}


def base_name(qualified: str) -> str:
    """`torch.Tensor.__matmul__` -> `__matmul__`; `torch.nn.functional.linear` -> `linear`."""
    name = qualified.rsplit(".", 1)[-1]
    return name


def graded_functions() -> dict[str, str]:
    """function name -> assignment id."""
    return {f: a.id for a in ASSIGNMENTS.values() for f in a.functions}

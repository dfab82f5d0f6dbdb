"""The course's assignments: ids, notebook files and graded functions (CONTRACT.md)."""

from __future__ import annotations

import ast
import functools
import json
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# ----------------------------------------------------------------------------------------------
# Names refused at the Python level (the torch function's name, `base_name`), next to the allowlists
# below: the library functions an exercise's text forbids, for messages in the learner's words, and
# those whose work the operator level cannot see.

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
"""By name, so that the message says what the learner wrote; torch.linalg.vecdot also needs it, as
it reaches the operators only as the elementwise products and sums it is made of."""
AUTOGRAD = frozenset({"backward", "grad", "vjp", "jacobian", "jvp", "hessian",
                      # forward-mode AD: torch.autograd.forward_ad's dual tensors (torch.func.jvp too)
                      "_make_dual", "_unpack_dual",
                      # a tensor's autograd node, called by hand (`out.grad_fn(g)`), runs the
                      # library's own gradient formula outside autograd's engine: no marker sees it
                      "grad_fn.__get__"})
ACTIVATIONS = frozenset({
    "relu", "relu_", "relu6", "threshold", "threshold_", "sigmoid", "sigmoid_", "logsigmoid",
    "log_sigmoid_forward", "expit", "hardtanh", "leaky_relu", "elu", "gelu", "silu",
    "threshold_backward", "sigmoid_backward", "hardsigmoid",
    # the same activations in disguise: sigmoid(z) = softmax((z, 0))[0] = exp(-softplus(-z)),
    # relu(z) = rrelu(z, 0, 0) = prelu(z, 0); glu((1, z)) = sigmoid(z);
    # softplus(-z) = logsumexp((0, -z)) = logaddexp(0, -z), so sigmoid(z) = exp(-logaddexp(0, -z))
    "softmax", "_softmax", "log_softmax", "_log_softmax", "softmin", "softplus",
    "logsumexp", "logcumsumexp", "logaddexp", "logaddexp2",
    "rrelu", "rrelu_with_noise", "prelu", "_prelu_kernel", "celu", "selu", "glu",
})
LEAVING_TORCH = frozenset({"numpy", "__array__", "__dlpack__", "data_ptr", "untyped_storage",
                           "storage", "_typed_storage", "__reduce_ex__", "_cdata"})
"""How a tensor's numbers leave torch: `t.numpy()`, `np.asarray(t)` (`__array__`), DLPack
(`np.from_dlpack`), the raw memory (`untyped_storage`, `data_ptr` with ctypes, pickling). What is
then computed outside (numpy's own `@`) never reaches torch's dispatcher, so no allowlist of
operators can see it: these names are refused where what could be computed outside is what the
exercise forbids (01's product, 02's activations: numpy and scipy have both), and allowed where it
is not (numpy has no autograd and no optimizer). `.tolist()` and `.item()` stay allowed everywhere:
they give plain Python numbers, on which every operation is written out by hand."""

# ----------------------------------------------------------------------------------------------
# Allowlists: what a "by hand" answer may run.
#
# A denylist names what is forbidden, and is always one spelling short (issue 20: a 1x1 convolution
# through aten._slow_conv2d_forward, forward-mode AD, torch.optim's step). So each by-hand function
# instead declares the ATen operators a by-hand answer needs, by category; the learner's child records
# every operator its code dispatches (`aten.<overload packet>`, whatever the Python spelling:
# torch.ops by string, a private kernel, a tensor method), and any operator outside the function's set
# fails it, named, with what to use instead (student.banned_uses). The categories are generous on
# purpose: a correct answer a teacher accepts must never fail, so each holds the whole family (every
# view, every elementwise function, every reduction), not only what the reference solution uses; they
# were derived from the worked solutions and every correct sample (tests/grade/test_scenarios.py grades them
# all; tests/rules/test_allowlists.py checks the names), and they are the same in the visible checks (each
# setup cell's ALLOWED; tests/nbgrader/test_validate.py). What is left out is what no by-hand answer needs: the
# library's products and convolutions, the activations' own kernels, loss and backward kernels,
# autograd (the markers below and forward-mode's dual tensors), optimizers and the profiler, sparse,
# quantized and other backends' kernels.

SHAPES = frozenset({
    # views and shape changes; indexing, reading and writing (t[i] = v is select + copy_, or index_put_)
    "view", "_unsafe_view", "view_as", "reshape", "flatten", "unflatten", "squeeze", "squeeze_",
    "unsqueeze", "unsqueeze_", "t", "t_", "transpose", "transpose_", "permute", "movedim", "expand",
    "expand_as", "broadcast_to", "alias", "as_strided", "select", "slice", "narrow", "diagonal",
    "unbind", "split", "split_with_sizes", "chunk", "unfold", "contiguous", "repeat", "tile",
    "repeat_interleave", "flip", "roll", "rot90", "cat", "stack", "diag", "diag_embed", "tril", "triu",
    "index", "index_select", "gather", "take", "masked_select", "nonzero", "index_put", "index_put_",
    "_index_put_impl_", "index_fill", "index_copy", "index_add", "index_add_", "scatter", "scatter_",
    "scatter_add", "scatter_add_", "masked_scatter", "masked_scatter_", "select_scatter",
    "slice_scatter", "resize_", "sym_size", "sym_numel", "sym_stride", "sym_storage_offset",
    "is_same_size",
})
CREATION = frozenset({
    # new tensors, copies and dtype changes; Python numbers out of a tensor (.item(), float(t), if t: ...)
    "zeros", "zeros_like", "ones", "ones_like", "empty", "empty_like", "empty_strided", "full",
    "full_like", "new_zeros", "new_ones", "new_empty", "new_empty_strided", "new_full", "scalar_tensor",
    "arange", "linspace", "eye", "lift_fresh", "lift_fresh_copy", "_to_copy", "clone", "copy_", "fill_",
    "zero_", "detach", "detach_", "set_", "_local_scalar_dense", "is_nonzero", "equal", "allclose", "isclose",
    "rand", "rand_like", "randn", "randn_like", "randint", "randint_like", "randperm", "normal",
    "normal_", "uniform_", "bernoulli", "bernoulli_", "random_",
})
ARITHMETIC = frozenset({
    # elementwise arithmetic and math functions, out of place and in place
    "add", "add_", "sub", "sub_", "rsub", "mul", "mul_", "div", "div_", "true_divide", "floor_divide",
    "floor_divide_", "remainder", "remainder_", "fmod", "fmod_", "neg", "neg_", "abs", "abs_", "sign",
    "sign_", "sgn", "signbit", "copysign", "pow", "pow_", "float_power", "square", "sqrt", "sqrt_",
    "rsqrt", "reciprocal", "reciprocal_", "exp", "exp_", "exp2", "exp2_", "expm1", "expm1_", "log",
    "log_", "log2", "log10", "log1p", "log1p_", "logaddexp", "xlogy", "floor", "floor_", "ceil", "ceil_",
    "round", "round_", "trunc", "trunc_", "fix", "frac", "addcmul", "addcmul_", "addcdiv", "addcdiv_",
    "lerp", "lerp_", "hypot", "sin", "cos", "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh",
    "tanh", "tanh_", "asinh", "acosh", "atanh", "erf", "erfc", "erfinv", "sinc", "deg2rad", "rad2deg",
    "nan_to_num",
})
COMPARISONS = frozenset({
    # comparisons and masks, logic, choosing: where, clamp, maximum / minimum of two tensors
    "eq", "ne", "lt", "le", "gt", "ge", "isnan", "isinf", "isfinite", "isposinf", "isneginf",
    "logical_and", "logical_or", "logical_xor", "logical_not", "bitwise_and", "bitwise_and_",
    "bitwise_or", "bitwise_or_", "bitwise_xor", "bitwise_not", "where", "clamp", "clamp_", "clamp_min",
    "clamp_min_", "clamp_max", "clamp_max_", "clip", "clip_", "maximum", "minimum", "fmax", "fmin",
    "heaviside", "masked_fill", "masked_fill_",
})
REDUCTIONS = frozenset({
    "sum", "nansum", "mean", "nanmean", "prod", "cumsum", "cumsum_", "cumprod", "cumprod_", "max", "min",
    "amax", "amin", "aminmax", "argmax", "argmin", "all", "any", "count_nonzero", "norm",
    "linalg_vector_norm", "std", "var", "std_mean", "var_mean", "median", "nanmedian", "mode",
    "kthvalue", "sort", "argsort", "topk", "cummax", "cummin", "logsumexp", "logcumsumexp", "diff",
    "unique_consecutive", "_unique2",
})
BY_HAND = SHAPES | CREATION | ARITHMETIC | COMPARISONS | REDUCTIONS
"""What every by-hand answer may run: no operator here computes a product of matrices, an
activation, a gradient or an optimizer's update in one step."""
PRODUCTS = frozenset({"mm", "addmm", "bmm", "baddbmm", "addbmm", "mv", "addmv", "dot", "vdot",
                      "matmul", "outer", "ger"})
"""The library's matrix products: allowed wherever the exercise is not the product itself."""
FORWARD_KERNELS = frozenset({
    "relu", "relu_", "sigmoid", "sigmoid_", "hardtanh", "hardtanh_", "threshold", "threshold_",
    "leaky_relu", "leaky_relu_", "elu", "elu_", "gelu", "silu", "softplus", "log_sigmoid_forward",
    "_softmax", "_log_softmax", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
})
"""The library's activations and losses, forward only (never a `*_backward` kernel): allowed where the
exercise is the gradient or the update, not the activation (02)."""
LOSSES = frozenset({"mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss"})
"""The library's losses among them (their Python names are their operators' names)."""


@dataclass(frozen=True)
class Assignment:
    """One nbgrader assignment: a folder with one notebook."""

    id: str
    notebook: str
    functions: tuple[str, ...]
    banned: dict[str, frozenset[str]] = field(default_factory=dict)
    """function -> base names of torch functions it may not call (the Python level)."""
    allowed: dict[str, frozenset[str]] = field(default_factory=dict)
    """function -> the ATen operators it may run, all others refused; a function not listed may
    run any (its exercise is autograd or torch itself)."""
    allowed_section: dict[str, str] = field(default_factory=dict)
    """function -> the part of a class's run that `allowed` and `banned` apply to, as the trusted
    driver marks it (07: "backward"; LinearFunction's forward may use any op)."""
    in_place: frozenset[str] = frozenset()
    """functions that are meant to modify their arguments."""
    new_tensor: frozenset[str] = frozenset()
    """functions whose exercise says they return a new tensor: returning an argument itself, or
    a view sharing its memory, fails (tests/course/test_notebook_text.py: the text says so)."""
    banned_reason: dict[str, str] = field(default_factory=dict)
    """function -> what to use instead, the end of the message when it runs what it may not."""
    warm: tuple[str, ...] = ()
    """Modules that grading this assignment imports lazily (the learner's code run as the
    contract asks, the stand-ins, the hidden tests' own computation): the jailed server imports
    them once, at start-up when it knows the assignment, instead of every child, and the grader
    imports them before the tests run (plugin.run_tests)."""
    notebook_warm: tuple[str, ...] = ()
    """Modules the notebook's own cells import lazily (its first torch.optim optimizer imports
    torch._dynamo, 1.2-1.4 s): the jailed server that forks nbgrader's feedback kernels imports
    them once, before its first kernel for this assignment, instead of every notebook."""

    @property
    def source(self) -> Path:
        return ROOT / "source" / self.id / self.notebook


IMPORTS_DYNAMO = ("torch._dynamo",)
"""`notebook_warm` of a notebook whose cells build torch.optim optimizers (its figures, its
comparisons with PyTorch), call torch.func, or enter a TorchDispatchMode that keeps torch's dynamo
wrapper: the first of these imports torch._dynamo (the checks' RecordOps opts out of the wrapper)."""


def _all(functions, names):
    return {f: frozenset(names) for f in functions}


ASSIGNMENTS: dict[str, Assignment] = {a.id: a for a in [
    Assignment(
        "01_linear_algebra", "linear_algebra.ipynb", ("matmul", "linear_forward"),
        banned=_all(("matmul", "linear_forward"), MATRIX_PRODUCTS | LEAVING_TORCH),
        # the product is the exercise: no product, no convolution, nothing but BY_HAND
        allowed=_all(("matmul", "linear_forward"), BY_HAND),
        banned_reason=dict.fromkeys(("matmul", "linear_forward"),
                                    "build the product from elementwise products and sums"),
    ),
    Assignment(
        "02_activation_functions", "activation_functions.ipynb",
        ("relu", "relu_derivative", "sigmoid", "sigmoid_derivative", "collapse_linear"),
        new_tensor=frozenset({"relu"}),
        banned=_all(("relu", "relu_derivative", "sigmoid", "sigmoid_derivative", "collapse_linear"),
                    AUTOGRAD | ACTIVATIONS | LEAVING_TORCH),
        # the activations and their derivatives are the exercise: no activation kernel
        # (FORWARD_KERNELS), no autograd; collapse_linear multiplies the two weights (@ is fine)
        allowed=_all(("relu", "relu_derivative", "sigmoid", "sigmoid_derivative"), BY_HAND - ACTIVATIONS)
        | {"collapse_linear": BY_HAND - ACTIVATIONS | PRODUCTS},
        banned_reason=dict.fromkeys(
            ("relu", "relu_derivative", "sigmoid", "sigmoid_derivative", "collapse_linear"),
            "write the formula yourself, with elementwise tensor operations (torch.exp, "
            "torch.where, comparisons such as z > 0)"),
        notebook_warm=IMPORTS_DYNAMO,
    ),
    Assignment(
        "03_chain_rule", "chain_rule.ipynb",
        ("mse_loss", "mse_loss_grad", "linear_backward", "relu_backward", "mlp_backward"),
        banned=_all(("mse_loss_grad", "linear_backward", "relu_backward", "mlp_backward"), AUTOGRAD)
        | {"mse_loss": AUTOGRAD | LOSSES},
        # the gradients are the exercise: products and the library's forward kernels (torch.relu,
        # F.mse_loss in a forward pass) are fine, autograd and every *_backward kernel are not;
        # in mse_loss, the loss itself, neither are the library's losses (huber and smooth L1 with
        # a large threshold are half the squared error)
        allowed=_all(("mse_loss_grad", "linear_backward", "relu_backward", "mlp_backward"),
                     BY_HAND | PRODUCTS | FORWARD_KERNELS)
        | {"mse_loss": BY_HAND | PRODUCTS | (FORWARD_KERNELS - LOSSES)},
        banned_reason=dict.fromkeys(
            ("mse_loss_grad", "linear_backward", "relu_backward", "mlp_backward"),
            "write the formula yourself (the chain rule, by hand: no autograd)")
        | {"mse_loss": "write the formula yourself (the mean of the squared differences, by hand: "
                       "not the library's losses, no autograd)"},
        # autograd with a given output gradient (backward(grad_out), autograd.grad(y, x, g), as
        # the stand-ins and the hidden tests run) imports torch's symbolic shapes and sympy on
        # first use: 0.4 s in each such child otherwise
        warm=("torch.fx.experimental.symbolic_shapes",),
        notebook_warm=IMPORTS_DYNAMO,
    ),
    Assignment(
        "04_computational_graph", "computational_graph.ipynb",
        ("graph_nodes", "leaf_tensors", "hidden_grad"),
    ),
    Assignment(
        "05_gradient_descent", "gradient_descent.ipynb", ("sgd_step", "sgd_momentum_update"),
        in_place=frozenset({"sgd_step"}),
        # the update is the exercise: no optimizer (its step() announces itself to the profiler,
        # and its kernels, _foreach_*, are on no list), no autograd
        allowed=_all(("sgd_step", "sgd_momentum_update"), BY_HAND | PRODUCTS),
        banned_reason=dict.fromkeys(("sgd_step", "sgd_momentum_update"),
                                    "update the tensors yourself (p - lr * grad, with torch "
                                    "arithmetic), with no optimizer"),
        notebook_warm=IMPORTS_DYNAMO,
    ),
    Assignment(
        "06_putting_it_together", "putting_it_together.ipynb", ("train_mlp", "layer_grad_norms"),
        banned={"train_mlp": AUTOGRAD},
        # forward (products, F.relu, F.mse_loss), backward by hand, update by hand
        allowed={"train_mlp": BY_HAND | PRODUCTS | FORWARD_KERNELS},
        banned_reason={"train_mlp": "compute the gradients by the chain rule and update the "
                                    "parameters yourself (p - lr * grad_p), with no optimizer"},
        notebook_warm=IMPORTS_DYNAMO,
    ),
    Assignment(
        "07_custom_autograd", "custom_autograd.ipynb",
        ("LinearFunction", "FakeQuantize", "train_quantized", "record_ops"),
        # backward by hand: products and sums, no autograd; forward: any op (CONTRACT.md)
        banned={"LinearFunction": AUTOGRAD},
        allowed={"LinearFunction": BY_HAND | PRODUCTS},
        allowed_section={"LinearFunction": "backward"},
        banned_reason={"LinearFunction": "write backward's gradients by hand from the formulas"},
        # train_quantized and record_ops's reference build torch.optim optimizers, whose first
        # one imports it (1.2 s)
        warm=("torch._dynamo",),
        notebook_warm=IMPORTS_DYNAMO,
    ),
]}


def base_name(qualified: str) -> str:
    """`torch.Tensor.__matmul__` -> `__matmul__`; `torch.nn.functional.linear` -> `linear`;
    a property's getter keeps its accessor: `torch.Tensor.grad_fn.__get__` -> `grad_fn.__get__`
    (reading `p.grad` is not calling torch.autograd.grad)."""
    parts = qualified.split(".")
    return ".".join(parts[-2:]) if parts[-1] in ("__get__", "__set__") else parts[-1]


def graded_functions() -> dict[str, str]:
    """function name -> assignment id."""
    return {f: a.id for a in ASSIGNMENTS.values() for f in a.functions}


def subset_rules(assignment: Assignment, function: str):
    """The subset of Python `function`'s answer is written in (autograder/rules/subset/), or None
    for a function whose exercise is autograd or torch itself (no by-hand rule). Built from the
    same lists, in the same shape, as the notebooks' checks build it (subset.rules_from_lists)."""
    from autograder.rules.subset import rules_from_lists
    key = lambda f: f"{f}.{assignment.allowed_section[f]}" if f in assignment.allowed_section else f
    order = [f for f in _source(assignment.id).order if f in assignment.functions]
    return rules_from_lists(function, order,
                            {key(f): ops for f, ops in assignment.allowed.items()},
                            {key(f): names for f, names in assignment.banned.items()},
                            {key(f): why for f, why in assignment.banned_reason.items()},
                            stand_ins(assignment.id))


# ----------------------------------------------------------------------------------------------
# What grading needs from the source notebooks (instructor code, trusted)

def answer_id(cell) -> str | None:
    """The grade_id of a code answer cell (nbgrader `solution: true`); None for other cells."""
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return meta.get("grade_id") if cell.get("cell_type") == "code" and meta.get("solution") else None


@dataclass(frozen=True)
class _Source:
    setup: tuple[str, ...]
    setup_ids: frozenset[str]
    answers: frozenset[str]
    known: frozenset[str]
    """Stripped sources of the source notebook's code cells but answers (instructor code)."""
    manual: tuple[tuple[str, float], ...]
    order: tuple[str, ...] = ()
    """The answer cells' grade_ids in notebook order (the exercises' numbers)."""
    ids: dict = None
    """cell id -> (cell type, grade_id, solution, grade) of the source's nbgrader cells."""
    metadata: dict = None
    """cell id -> the source cell's whole nbgrader metadata (for nbgrader's own steps)."""
    solutions: dict = None
    """grade_id -> the answer cell's source, the worked solution (the error model's reference)."""


@functools.lru_cache(maxsize=None)
def _source(assignment_id: str) -> _Source:
    """What grading needs from the source notebook, read once per assignment. Read as JSON: the
    file is the course's own (its format is checked where it is built and released), and every
    cold grade would otherwise import and run nbformat's schema validation (about 0.13 s)."""
    with open(ASSIGNMENTS[assignment_id].source, encoding="utf-8") as f:
        cells = json.load(f)["cells"]
    setup, setup_ids, answers, known, manual, order = [], set(), set(), set(), [], []
    ids, metadata, solutions = {}, {}, {}
    for cell in cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        kind, text = cell["cell_type"], cell["source"]
        text = text if isinstance(text, str) else "".join(text)  # nbformat's multiline strings
        if meta.get("grade_id") and cell.get("id"):
            ids[cell["id"]] = (kind, meta["grade_id"], meta.get("solution") is True,
                               meta.get("grade") is True)
            metadata[cell["id"]] = dict(meta)
        if kind == "code":
            if meta.get("grade_id", "").startswith("setup"):
                setup.append(text)
                setup_ids.add(meta["grade_id"])
            if answer_id(cell):
                answers.add(answer_id(cell))
                order.append(answer_id(cell))
                solutions[answer_id(cell)] = text
            else:
                known.add(text.strip())
        elif kind == "markdown" and meta.get("grade") and meta.get("solution"):
            manual.append((meta["grade_id"], float(meta["points"])))
    return _Source(tuple(setup), frozenset(setup_ids), frozenset(answers), frozenset(known),
                   tuple(manual), tuple(order), ids, metadata, solutions)


def _segment(lines: list[str], node: ast.stmt) -> str:
    """A top-level statement's text, as ast.get_source_segment gives it, from the source's lines
    (split once: get_source_segment splits the whole source again, character by character, on
    every call). A notebook cell's line breaks are "\n"."""
    first, last = node.lineno - 1, node.end_lineno - 1
    cut = lambda line, start, end=None: line.encode()[start:end].decode()  # offsets are bytes
    if first == last:
        return cut(lines[first], node.col_offset, node.end_col_offset)
    return "\n".join([cut(lines[first], node.col_offset), *lines[first + 1:last],
                      cut(lines[last], 0, node.end_col_offset)])


@functools.lru_cache(maxsize=None)
def stand_ins(assignment_id: str) -> dict[str, str]:
    """Trusted code for the graded functions others call (the hidden tests' REFERENCES): the
    source notebook's setup-cell stand-ins, each built from PyTorch's own operations, so they
    give the right values without spelling out an exercise's answer (the learner's process
    holds this code while it runs, and a learner can read anything there).

    `STAND_INS = {"matmul": matmul_stand_in}` gives {"matmul": "def matmul_stand_in...\n
    matmul = matmul_stand_in\n"}: the definition (a function or class of the setup cell)
    and the name the learner's code calls."""
    setup = "\n\n".join(_source(assignment_id).setup)
    tree = ast.parse(setup)
    lines = setup.split("\n")
    definitions = {node.name: node for node in tree.body
                   if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
    table = next((node.value for node in tree.body if isinstance(node, ast.Assign)
                  and any(isinstance(t, ast.Name) and t.id == "STAND_INS" for t in node.targets)),
                 None)
    if not isinstance(table, ast.Dict):
        return {}
    out = {}
    for key, value in zip(table.keys, table.values):
        if not (isinstance(key, ast.Constant) and isinstance(value, ast.Name)
                and value.id in definitions):
            raise ValueError(f"{assignment_id}: STAND_INS must map names to functions or "
                             "classes defined in the setup cell")
        out[key.value] = f"{_segment(lines, definitions[value.id])}\n\n{key.value} = {value.id}\n"
    return out

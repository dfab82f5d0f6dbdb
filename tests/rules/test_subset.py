"""By hand, decided from the code (issue 28): a by-hand function's reach is read with `ast` in the
grader, before anything runs, and the notebook's checks read it with the very same file."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from autograder.instructor.build import BY_HAND_CELL, by_hand_cell_source
from autograder.course import ASSIGNMENTS, subset_rules
from autograder.grade.submission import answer_id
from autograder.rules.subset import SETUP, kernel_cells, refusals, rules_from_lists

BY_HAND = [a for a in ASSIGNMENTS if ASSIGNMENTS[a].allowed]
SETUP_CELL = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\nimport sys\n" \
             "def matmul_stand_in(A, B):\n    return torch.mm(A, B)\n"


def refused(answer: str, function: str = "matmul", assignment: str = "01_linear_algebra",
            added: str = "") -> list[str]:
    """`construct (line N)` of every refusal of `answer` (with a cell `added` above it)."""
    cells = [{"source": SETUP_CELL, "label": SETUP, "answer": None}]
    if added:
        cells.append({"source": added, "label": "a cell you added", "answer": None})
    cells.append({"source": answer, "label": f"cell {function}", "answer": function})
    rules = subset_rules(ASSIGNMENTS[assignment], function)
    found = refusals(cells, function, rules)
    refused.last = [r.what for r in found]
    return [f"{r.construct} ({r.cell}, line {r.line})" for r in found]


@pytest.mark.parametrize("answer, construct", [
    ("def matmul(A, B):\n    return getattr(torch, 'mm')(A, B)", "torch.mm"),
    ("def matmul(A, B):\n    return getattr(torch, 'm' + 'm')(A, B)", "getattr"),
    ("def matmul(A, B):\n    return A.__matmul__(B)", ".__matmul__"),
    ("def matmul(A, B):\n    return torch.ops.aten.mm(A, B)", "torch.ops"),
    ("def matmul(A, B):\n    return torch._C._nn.linear(A, B.T)", "torch._C"),
    ("import numpy as np\ndef matmul(A, B):\n    return np.array(A.tolist())", "import numpy"),
    ("from torch import *\ndef matmul(A, B):\n    return mm(A, B)", "from torch import *"),
    ("class M(torch.Tensor):\n    pass\ndef matmul(A, B):\n    return M(A)", "class M"),
    ("def matmul(A, B):\n    return torch.einsum('ik,kj->ij', A, B)", "torch.einsum"),
    ("def matmul(A, B):\n    return sys.modules['torch'].mm(A, B)", "sys"),
    ("def matmul(A, B):\n    return matmul_stand_in(A, B)", "matmul_stand_in"),
    ("import torch as T\ndef matmul(A, B):\n    T.relu = T.sigmoid\n    return A", "assigns torch.relu"),
    ("def matmul(A, B):\n    return eval('A @ B')", "eval"),
    ("def matmul(A, B):\n    return (lambda f: f(A, B))(torch.mm)", "torch.mm"),
    ("import torch.library\ndef matmul(A, B):\n    return torch.library.custom_op(A)", "import torch.library"),
    ("def matmul(A, B):\n    return A.numpy()", ".numpy"),
    ("def matmul(A, B):\n    return A @ B", "@"),
    ("def matmul(A, B):\n    C = A.clone()\n    C @= B\n    return C", "@="),
])
def test_a_construct_outside_the_subset_is_refused_with_its_line(answer, construct):
    found = refused(answer)
    assert any(f.startswith(construct + " ") for f in found), found


def test_a_helper_in_an_added_cell_is_read_transitively():
    added = "T = torch\nPRODUCT = T.mm\n\ndef helper(A, B):\n    return PRODUCT(A, B)\n" \
            "print('a demo line the answer does not use', sys.version)\n"
    found = refused("def matmul(A, B):\n    return helper(A, B)", added=added)
    assert found == ["torch.mm (a cell you added, line 2)"]


@pytest.mark.parametrize("answer, construct", [
    # issue 36: refused by capability
    ("def matmul(A, B):\n    match A:\n        case torch.Tensor(mm=f):\n            return f(B)", ".mm"),
    ("def matmul(A, B):\n    return getattr(A, 'm' + 'm')(B)", "getattr"),
    ("def matmul(A, B):\n    return type(A).mm(A, B)", "type"),
    ("def matmul(A, B):\n    return A.__class__.__dict__", ".__dict__"),
    ("def matmul(A, B):\n    return hasattr(A, '__class__')", ".__class__"),
    ("def matmul(A, B):\n    return " + " + ".join(["A"] * 2500), "a statement nested more than 200 levels deep"),
])
def test_reaching_by_name_or_type_is_refused(answer, construct):
    found = refused(answer)
    assert any(f.startswith(construct + " ") for f in found), found


PATCH = "def matmul(A, B):\n    {}\n    return A"


@pytest.mark.parametrize("statements, added", [
    ("torch.Tensor.data = 1", ""),
    ("nn.Parameter.requires_grad = True", ""),
    ("T = torch.Tensor\n    T.grad = None", ""),
    ("T.grad = None", "T = torch.Tensor\n"),
    ("T.grad = None", "T = U = torch.Tensor\n"),
    ("for T in [torch.Tensor]:\n        T.grad = None", ""),
    ("(T := torch.Tensor).grad = None", ""),
    ("[torch.Tensor][0].grad = None", ""),
    ("getattr(torch, 'Tensor').data = None", ""),
    ("T, n = torch.Tensor, 1\n    T.requires_grad = False", ""),
    ("T.grad = None", "T = torch.nn.Parameter\nU = T\nT = U\n"),
    ("kind().grad = None", "def kind():\n    return torch.Tensor\n"),
    ("kind().data = None", "kind = lambda: [torch.Tensor][0]\n"),
    ("def kind():\n        return torch.Tensor\n    kind().grad = None", ""),
])
def test_a_store_into_what_a_module_holds_is_refused(statements, added):
    """`.data`, `.grad` and `.requires_grad` may be assigned on a value, not on torch's classes:
    `torch.Tensor.grad = None` would change every tensor of the process (patching), reached by
    attribute, item, a name bound to one, a loop, a walrus or getattr with a literal name."""
    found = refused(PATCH.format(statements), added=added)
    assert any("patching" in f for f in refused.last) and found, found


@pytest.mark.parametrize("statements, added", [
    ("C = A.clone()\n    C.requires_grad = True\n    C.grad = None", ""),
    ("for p in [A, B]:\n        p.grad = None", ""),
    ("P = [A][0]\n    P.data = A.clone()", ""),
    ("D[0].data = A", "D = [torch.zeros(2, 2)]\n"),
    ("(w := A.clone()).requires_grad = True", ""),
    ("T = torch.Tensor\n    assert isinstance(A, T)\n    A.grad = None", ""),
    ("first().grad = None", "def first():\n    return torch.zeros(2, 2)\n"),
    ("first().grad = None", "def first():\n    return first()\n"),
    ("DT = {}\n    DT[A] = torch.float32\n    A.grad = None", ""),   # d[A] = ... does not bind A
])
def test_a_store_into_a_value_is_allowed(statements, added):
    assert refused(PATCH.format(statements), added=added) == []


ALIAS = "import math as T\n"
VIA = "def matmul(A, B):\n    return T.matmul(A, B)"


@pytest.mark.parametrize("answer, added", [
    # a comprehension's loop names are its own: `exec` after it is Python's
    ("def matmul(A, B):\n    [exec for exec in ()]\n    return exec('A.mm(B)')", ""),
    ("def matmul(A, B):\n    (exec for exec in ())\n    return exec('A.mm(B)')", ""),
    ("def matmul(A, B):\n    f = lambda: [exec for exec in ()]\n    def g():\n        return exec('1')\n"
     "    return g()", ""),
    # a name that is a module only for some of the statements that bind it is a value
    (VIA, ALIAS + "T = torch\n"),
    (VIA, "import math as T, torch as T\n"),
    (VIA, ALIAS + "for T in [torch]:\n    pass\n"),
    (VIA, ALIAS + "match torch:\n    case T:\n        pass\n"),
    (VIA, ALIAS + "@(lambda f: torch)\ndef T():\n    pass\n"),
    (VIA, ALIAS + "[(T := torch) for _ in range(1)]\n"),
    ("def matmul(A, B):\n    _rebind()\n    return T.matmul(A, B)",
     ALIAS + "def _rebind():\n    global T\n    T = torch\n"),
    # Python's own names rebound where `del` hands them back
    ("def matmul(A, B):\n    return run('A.mm(B)')", "exec = None\ndel exec\nrun = exec\n"),
    # the setup's names read before a learner's binding runs, or when it never runs
    ("def matmul(A, B):\n    return S.modules['torch'].mm(A, B)", "S = sys\nsys = None\n"),
    ("def matmul(A, B):\n    return sys.modules['torch'].mm(A, B)", "if False:\n    sys = None\n"),
    ("def matmul(A, B):\n    return sys.modules['torch'].mm(A, B)",
     "def _never():\n    global sys\n    sys = None\n"),
    ("def matmul(A, B):\n    return sys.modules['torch'].mm(A, B)", "for sys in ():\n    pass\n"),
])
def test_names_rebound_outside_a_function_are_read_as_what_python_runs(answer, added):
    """Issue 36's held-out attacks: scoping and aliases read as Python reads them."""
    assert refused(answer, added=added), (answer, added)


@pytest.mark.parametrize("body", [
    "    S_ = sys\n    sys = None\n",                             # read before the class binds it
    "    backward = staticmethod(lambda ctx, g: torch.autograd.grad(g, g))\n",  # aliased section
    "    @staticmethod\n    def grads(ctx, g):\n        return torch.autograd.functional.vjp(g, g)\n"
    "    backward = grads\n",
])
def test_a_class_exercise_reads_its_body_as_python_runs_it(body):
    answer = ("class LinearFunction(torch.autograd.Function):\n" + body +
              "\n    @staticmethod\n    def forward(ctx, x, W, b=None):\n        match x:\n"
              "            case torch.Tensor(grad_fn=n):\n                ctx.n = n\n"
              "        return x.mm(W.t())\n")
    assert refused(answer, "LinearFunction", "07_custom_autograd")


def test_a_module_imported_from_its_package_or_aliased_is_that_module():
    for answer in ("from torch import autograd\ndef relu_backward(g, z):\n    ag = autograd\n"
                   "    return ag.grad(z, z, g)[0]",
                   "import torch.autograd\nAG = torch.autograd\ndef relu_backward(g, z):\n"
                   "    return AG.grad(z, z, g)[0]"):
        assert refused(answer, "relu_backward", "03_chain_rule"), answer


def test_a_class_body_cannot_hand_back_pythons_own_names():
    answer = ("class LinearFunction(torch.autograd.Function):\n    exec = None\n    del exec\n"
              "    run = exec\n\n    @staticmethod\n    def forward(ctx, x, W, b=None):\n"
              "        return x.mm(W.t())\n\n    @staticmethod\n    def backward(ctx, g):\n"
              "        return None, None, None")
    assert refused(answer, "LinearFunction", "07_custom_autograd")


def test_a_class_exercise_may_not_reach_autograds_graph():
    answer = ("class LinearFunction(torch.autograd.Function):\n    @staticmethod\n"
              "    def forward(ctx, x, W, b=None):\n        with torch.enable_grad():\n"
              "            out = F.linear(x.detach().requires_grad_(), W, b)\n"
              "        ctx.node = out.grad_fn\n        return out.detach()\n\n"
              "    @staticmethod\n    def backward(ctx, g):\n        return ctx.node(g)")
    found = refused(answer, "LinearFunction", "07_custom_autograd")
    assert {f.split(" (")[0] for f in found} >= {".enable_grad", ".grad_fn"}, found


def test_a_form_feed_does_not_shift_the_line_quoted():
    found = refused("# a comment \x0c with a form feed\n\ndef matmul(A, B):\n    return A.mm(B)\n")
    assert found == [".mm (cell matmul, line 4)"]


@pytest.mark.parametrize("function, assignment, answer, added", [
    ("matmul", "01_linear_algebra",
     "def matmul(A, B):\n    _shapes(A, B)\n    return (A[:, :, None] * B[None]).sum(dim=AXIS)",
     "import math\nAXIS = int(math.log(math.e))\n\ndef _shapes(A, B):\n"
     "    if A.dim() != 2 or B.dim() != 2 or A.shape[1] != B.shape[0]:\n"
     "        raise ValueError(f'{A.shape} {B.shape}')\n"),
    ("matmul", "01_linear_algebra",
     "import itertools, functools, operator\ndef matmul(A, B):\n    n, k = A.shape\n"
     "    C = A.new_zeros(n, B.shape[1])\n    for i, j in itertools.product(range(n), range(B.shape[1])):\n"
     "        C[i, j] = functools.reduce(operator.add, [A[i, t] * B[t, j] for t in range(k)], 0)\n"
     "    return C", ""),
    ("relu", "02_activation_functions",
     "import copy\ndef relu(z):\n    out = copy.deepcopy(z)\n    out[out < 0] = 0\n    return out", ""),
    ("sigmoid_derivative", "02_activation_functions",
     "def sigmoid_derivative(z):\n    s = sigmoid(z)\n    return s * (1 - s)", ""),
    ("sgd_step", "05_gradient_descent",
     "def sgd_step(params, lr):\n    with torch.no_grad():\n        live = [p for p in params if p.grad is not None]\n"
     "        torch._foreach_add_(live, [p.grad for p in live], alpha=-lr)\n"
     "    for p in params:\n        if isinstance(p, nn.Parameter) and p.grad is not None:\n"
     "            p.data = p.data\n", ""),
    ("LinearFunction", "07_custom_autograd",
     "class LinearFunction(torch.autograd.Function):\n    @staticmethod\n"
     "    def forward(ctx, x, W, b=None):\n        ctx.x, ctx.W = x, W\n        ctx.save_for_backward(x, W)\n"
     "        print(x.numpy().shape)\n        return F.linear(x, W, b)\n\n    @staticmethod\n"
     "    def backward(ctx, g):\n        x, W = ctx.saved_tensors\n        need = ctx.needs_input_grad\n"
     "        return (g @ W if need[0] else None, g.T @ ctx.x if need[1] else None, g.sum(0))", ""),
    # issue 36: admitted by capability
    ("relu", "02_activation_functions",
     "import numpy as np\n\ndef relu(z):\n    try:\n        out = z.clone()\n"
     "    except AttributeError as error:\n        raise TypeError(type(z).__name__) from error\n"
     "    out[out < 0] = 0\n    return out\n\nprint(relu(torch.tensor([-1.0, 2.0])))", ""),
    ("matmul", "01_linear_algebra",
     "from __future__ import annotations\nfrom typing import Optional\n\n"
     "def matmul(A: torch.Tensor, B: torch.Tensor) -> Optional[torch.Tensor]:\n"
     "    match A.shape, B.shape:\n        case (n, k), (k2, m) if k == k2:\n"
     "            return sum(A[:, t, None] * B[None, t, :] for t in range(k))\n"
     "        case torch.Size([_, _]), other:\n            raise ValueError(f'{other}')\n"
     "    raise ValueError(type(A).__name__)", ""),
    ("relu_derivative", "02_activation_functions",
     "def relu_derivative(z):\n    assert type(z) is torch.Tensor and hasattr(z, 'dtype')\n"
     "    return (z > 0).type(z.dtype)", "SIZES = [2 ** i for i in range(3)]\n"),
    ("sgd_step", "05_gradient_descent",
     "def sgd_step(params, lr):\n    for p in params:\n        if (g := getattr(p, 'grad', None)) is not None:\n"
     "            with torch.no_grad():\n                p -= lr * g", ""),
    ("LinearFunction", "07_custom_autograd",
     "from torch.autograd.function import once_differentiable\n\n"
     "class LinearFunction(torch.autograd.Function):\n    @staticmethod\n"
     "    def forward(ctx, x, W, b=None):\n        ctx.save_for_backward(x, W)\n        return F.linear(x, W, b)\n\n"
     "    @staticmethod\n    @once_differentiable\n    def backward(ctx, g):\n        x, W = ctx.saved_tensors\n"
     "        return g @ W, g.T @ x, g.sum(0)", ""),
])
def test_honest_variants_are_inside_their_subset(function, assignment, answer, added):
    assert refused(answer, function, assignment, added) == []


def test_a_later_exercise_may_not_be_called_an_earlier_one_may():
    assert refused("def relu(z):\n    return z * sigmoid(1e4 * z)", "relu", "02_activation_functions") \
        == ["sigmoid (cell relu, line 2)"]
    assert refused("def linear_forward(x, W, b=None):\n    return matmul(x, W.T)", "linear_forward") == []


def test_backward_is_by_hand_forward_is_not_but_autograd_is_refused_in_both():
    head = "class LinearFunction(torch.autograd.Function):\n    @staticmethod\n"
    ok = head + "    def forward(ctx, x, W, b):\n        return torch.addmm(b, x, W.T)\n"
    assert refused(ok, "LinearFunction", "07_custom_autograd") == []
    bad = head + "    def backward(ctx, g):\n        return torch.autograd.grad(g, g)\n"
    assert refused(bad, "LinearFunction", "07_custom_autograd") == \
        ["torch.autograd.grad (cell LinearFunction, line 4)"]


HEAD = "class LinearFunction(torch.autograd.Function):\n    @staticmethod\n"


@pytest.mark.parametrize("forward, construct", [
    # torch re-exports Python's modules: one reaches the interpreter, and from it everything
    ("        m = torch.sys.modules\n        return F.linear(x, W, b)\n", "torch.sys"),
    ("        m = torch.nn.modules.module.inspect.sys\n        return F.linear(x, W, b)\n", ".inspect"),
    ("        os = F.importlib.import_module('os')\n        return F.linear(x, W, b)\n", "F.importlib"),
    ("        return torch.nn.modules.module.sys\n", ".sys"),   # not there: a typo, or loaded later
    ("        T = torch\n        return T.sys.modules['builtins'].getattr(T, 'mm')(x, W.t())\n", ".sys"),
    ("        nn_ = torch.nn\n        return nn_.modules.module.sys\n", ".modules"),
    # a value's attribute that is no name of torch's tensors: reflection on what it holds
    ("        o = ctx.saved_tensors\n        return o.getattr(x, 'mm')(W.t())\n", ".getattr"),
    ("        return x.get_objects()\n", ".get_objects"),
    # torch's own functions that run code a file holds (unpickling) or reach files
    ("        state = torch.load('/tmp/w.pt', weights_only=False)\n        return x\n", "torch.load"),
    ("        return torch.serialization.pickle.loads(b'')\n", "torch.serialization"),
])
def test_a_class_method_not_done_by_hand_still_reaches_only_torch(forward, construct):
    """A class's methods other than the by-hand one may use any public torch function, not what
    torch imported from Python (a module object reaches everything its module imported: the
    recorder of the learner's own process, the interpreter) nor torch's code runners."""
    answer = HEAD + "    def forward(ctx, x, W, b=None):\n" + forward
    found = refused(answer, "LinearFunction", "07_custom_autograd")
    assert any(f.startswith(construct + " (") for f in found), found


@pytest.mark.parametrize("method, rebinding", [
    ("backward", "        ctx = torch\n        ctx = ctx.sys\n"),
    ("forward", "        ctx = torch\n        ctx = ctx.sys\n"),
    ("backward", "        for ctx in [torch]:\n            m = ctx.sys\n"),
    ("backward", "        with torch.no_grad() as ctx:\n            pass\n        m = ctx.sys\n"),
    ("backward", "        (ctx := torch)\n        m = ctx.sys\n"),
])
def test_ctx_rebound_is_an_ordinary_name(method, rebinding):
    """Any attribute of autograd's ctx may be read or set (ctx.saved_tensors, ctx.scale = s): once
    the method rebinds the name, it is no ctx, and its attributes are checked as any value's (a
    held-out attack made it torch, then torch.sys.modules['builtins'].exec)."""
    other = "backward" if method == "forward" else "forward"
    answer = (HEAD + f"    def {other}(ctx, g):\n        return ctx.saved_tensors\n\n"
              f"    @staticmethod\n    def {method}(ctx, g):\n" + rebinding + "        return g\n")
    found = refused(answer, "LinearFunction", "07_custom_autograd")
    assert any(f.startswith(".sys (") for f in found), found


@pytest.mark.parametrize("forward", [
    "        return F.linear(x, W, b)\n",
    "        y = x.mm(W.t())\n        return y if b is None else y + b.unsqueeze(0).expand_as(y)\n",
    "        return torch.addmm(b, x, W.T) if b is not None else torch.matmul(x, W.mT)\n",
    "        return torch.nn.functional.linear(x, W, b)\n",
    "        return torch.special.expit(x) * 0 + torch.einsum('ni,oi->no', x, W)\n",
    "        eps = torch.finfo(x.dtype).eps\n        return (x @ W.T).clamp(min=-1 / eps)\n",
    "        out = x.new_zeros(x.shape[0], W.shape[0])\n        out.addmm_(x, W.t())\n        return out\n",
])
def test_a_class_method_not_done_by_hand_may_use_any_public_torch_function(forward):
    answer = HEAD + "    def forward(ctx, x, W, b=None):\n        ctx.save_for_backward(x, W)\n" + forward
    assert refused(answer, "LinearFunction", "07_custom_autograd") == []


def test_a_statement_that_fills_a_reached_global_is_read_and_checked():
    """`T["f"] = torch.mm` binds nothing, but the kernel ran it and the answer reads what it put
    there: it runs in grading, so it is checked (a changed global that nothing reads, and a
    module's `torch.manual_seed(0)`, are neither)."""
    answer = "def matmul(A, B):\n    return T['f'](A, B)"
    assert refused(answer, added="T = {}\nT['f'] = torch.mm\n") == ["torch.mm (a cell you added, line 2)"]
    honest = "def matmul(A, B):\n    return (A[:, :, None] * B[None] * T['scale']).sum(1)"
    added = "T = {}\nT['scale'] = 1.0\nU = []\nU.append(torch.mm)\ntorch.manual_seed(0)\n"
    assert refused(honest, added=added) == []


@pytest.mark.parametrize("added", [
    "T = {}\ndef fill():\n    T['f'] = torch.mm\nfill()\n",               # a function called for it
    "T = {}\n[T.setdefault(k, torch.mm) for k in ('f',)]\n",            # a comprehension's calls
    "T = {}\nALIAS = T\nALIAS['f'] = torch.mm\n",                       # through an alias
    "T = {}\ndef fill(table):\n    table['f'] = torch.mm\nfill(T)\n",     # passed to a function
    "T = {}\nfor k in ('f',):\n    T.setdefault(k, torch.mm)\n",          # in a loop's body
])
def test_a_global_filled_another_way_is_read_and_checked(added):
    """The kernel ran these and the answer reads what they put in T: they run in grading (a
    held-out probe found the visible checks passing where grading raised KeyError), so they are
    checked: here, the library's product is refused where it is written."""
    found = refused("def matmul(A, B):\n    return T['f'](A, B)", added=added)
    assert any(f.startswith("torch.mm (a cell you added") for f in found), found


def test_the_kernel_reads_the_last_run_of_each_cell():
    old = "def matmul(A, B):\n    return A @ B\n"
    new = "def matmul(A, B):\n    return (A[:, :, None] * B[None]).sum(1)\n"
    code = compile(new, "<cell 3>", "exec")
    import linecache
    linecache.cache["<cell 3>"] = (len(new), None, new.splitlines(True), "<cell 3>")
    cells = kernel_cells("matmul", code, ["", SETUP_CELL.replace("import sys", "STAND_IN_CODE = 1"), old, new])
    assert [c["label"] for c in cells] == [SETUP, "a cell you added", "cell matmul"]
    rules = subset_rules(ASSIGNMENTS["01_linear_algebra"], "matmul")
    assert refusals(cells, "matmul", rules) == []


def test_the_parts_joined_define_what_each_part_does():
    """The notebook's one text holds every name each part of the package defines, bound to the
    same code (a part dropped or a relative import left behind would break the notebook's checks
    and nothing in the grader's own process)."""
    import ast
    import importlib
    from autograder.rules import subset
    text = subset.one_text()
    assert "from ." not in text
    namespace = {"__name__": "one_text"}
    exec(compile(text, "one_text", "exec"), namespace)
    for part in subset.PARTS:
        module = importlib.import_module(f"autograder.rules.subset.{part}")
        tree = ast.parse(Path(module.__file__).read_text())
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                assert namespace[node.name].__qualname__ == getattr(module, node.name).__qualname__
                assert namespace[node.name].__doc__ == getattr(module, node.name).__doc__
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    assert namespace[target.id] == getattr(module, target.id), target.id


@pytest.mark.parametrize("assignment", BY_HAND)
def test_the_notebook_holds_this_checker_and_builds_the_same_rules(assignment):
    """One implementation, one list: the notebook's locked cell is autograder/rules/subset/ (its
    parts joined), and the Rules its checks build from the setup cell's lists are the grader's."""
    import matplotlib
    matplotlib.use("Agg")
    nb = nbformat.read(ASSIGNMENTS[assignment].source, as_version=4)
    cells = {c.metadata.get("nbgrader", {}).get("grade_id"): c for c in nb.cells}
    assert cells[BY_HAND_CELL].source == by_hand_cell_source(), \
        "run `python -m autograder build` after changing autograder/rules/subset/"
    namespace = {"__name__": "setup"}
    for grade_id in ("setup", BY_HAND_CELL):
        exec(compile(cells[grade_id].source, grade_id, "exec"), namespace)
    a = ASSIGNMENTS[assignment]
    for function in a.functions:
        shown = rules_from_lists(function, namespace["EXERCISES"], namespace["ALLOWED"],
                                 namespace["NOT_ALLOWED"], namespace["INSTEAD"],
                                 namespace.get("STAND_INS", {}))
        assert shown == subset_rules(a, function), function


@pytest.mark.parametrize("assignment", BY_HAND)
def test_the_worked_solutions_are_inside_their_subset(assignment):
    from autograder.instructor.samples import load_scenarios, submission_notebook
    from autograder.grade.submission import load_submission
    solution = next(s for s in load_scenarios(assignment) if s.student == "solution")
    import tempfile
    from pathlib import Path
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "nb.ipynb"
        nbformat.write(submission_notebook(solution), path)
        assert load_submission(path).refused == ()
    assert any(answer_id(c) for c in nbformat.read(a_path(assignment), 4).cells)


def a_path(assignment):
    return ASSIGNMENTS[assignment].source


@pytest.mark.parametrize("answer, added", [
    # attributes named by strings: `assigned=`/`updated=` reach any attribute (a function's
    # __code__ or __dict__, torch's namespace), as setattr and getattr with a computed name do
    ("def matmul(A, B):\n    functools.wraps(torch.mm, assigned=('__code__',), updated=())(helper)\n"
     "    return A", "import functools\ndef helper():\n    pass\n"),
    ("def matmul(A, B):\n    wraps(helper, ('__dict__',))(torch.is_tensor)\n    return A",
     "from functools import wraps\ndef helper():\n    pass\n"),
    # called on a value, not as the decorator of a function it defines, it writes that value's
    # attributes (torch's own function, here)
    ("def matmul(A, B):\n    functools.wraps(helper)(torch.is_tensor)\n    return A",
     "import functools\ndef helper():\n    pass\n"),
    ("def matmul(A, B):\n    w = functools.wraps\n    w(helper)(torch.is_tensor)\n    return A",
     "import functools\ndef helper():\n    pass\n"),
])
def test_wraps_other_than_as_a_decorator_of_ones_own_function_is_refused(answer, added):
    assert refused(answer, added=added), answer


def test_wraps_as_the_decorator_of_ones_own_function_is_allowed():
    added = ("import functools\ndef logged(f):\n    @functools.wraps(f)\n    def inner(*a):\n"
             "        return f(*a)\n    return inner\n")
    assert refused("@logged\ndef matmul(A, B):\n    return (A[:, :, None] * B[None]).sum(1)",
                   added=added) == []


@pytest.mark.parametrize("step", [
    "v{i} = v{j} if v{j} is None else v{j}\n",                           # a name bound from two
    "v{i} = v{j}\nv{i} = v{j}\n",                                         # two statements bind it
    "def v{i}():\n    return v{j}() if v{j} else v{j}()\n",               # what functions return
])
def test_reading_what_a_name_may_hold_takes_time_linear_in_the_code(step):
    """A chain of 60 names each read twice: a walk that forgets what it read is 2**60 steps,
    the grader's own process hung before any time limit applies (red-team probe f)."""
    import time
    added = "v0 = None\n" + "".join(step.format(i=i, j=i - 1) for i in range(1, 61))
    call = "v60()" if step.startswith("def") else "v60"
    if step.startswith("def"):
        added = "def v0():\n    return None\n" + added[len("v0 = None\n"):]
    started = time.monotonic()
    refused(f"def matmul(A, B):\n    {call}.data = A\n    return A", added=added)
    assert time.monotonic() - started < 20


def test_code_the_check_cannot_read_in_bounded_steps_is_refused_named(monkeypatch):
    """Whatever the code, the check's time is bounded (MAX_STEPS): past it, the function is
    refused with a message saying so, not read on for ever."""
    import autograder.rules.subset.checker as checker
    monkeypatch.setattr(checker, "MAX_STEPS", 50)
    added = "".join(f"v{i} = v{i - 1}\n" for i in range(1, 40))
    assert refused("def matmul(A, B):\n    v39.data = A\n    return A", added="v0 = None\n" + added)
    assert any("cannot read in 50 steps" in w for w in refused.last), refused.last


def test_many_stores_into_one_name_check_in_linear_time():
    """3,000 `X.data = A` in one function: each store asks what X may hold, which read the whole
    function again (quadratic: 2,000 stores took 107 s in the grader's own process)."""
    import time
    body = "".join("    X.data = A\n" for _ in range(3000))
    started = time.monotonic()
    refused(f"def matmul(A, B):\n    X = A.clone()\n{body}    return X")
    assert time.monotonic() - started < 20


def test_a_statement_binding_many_names_is_read_once():
    """`a0 = a1 = ... = a6000 = 0` in an answer cell: `reached` walked the statement once per name
    it binds (8,000 names: 75 s)."""
    import time
    from autograder.rules.subset import reached
    chain = " = ".join(f"a{i}" for i in range(6000)) + " = 0\n"
    cells = [{"source": SETUP_CELL, "label": SETUP, "answer": None},
             {"source": chain + "def matmul(A, B):\n    return a0\n", "label": "cell matmul",
              "answer": "matmul"}]
    started = time.monotonic()
    assert reached(cells, ["matmul"])
    assert time.monotonic() - started < 20


def test_softplus_spelled_as_logsumexp_is_refused_in_the_activations():
    """σ(z) = exp(-softplus(-z)) and softplus(-z) = logsumexp((0, -z)): the library's sigmoid in
    disguise (red-team probe g), refused as softplus is."""
    answer = ("def sigmoid(z):\n    pair = torch.stack([torch.zeros_like(z), -z])\n"
              "    return torch.exp(-torch.logsumexp(pair, 0))")
    found = refused(answer, function="sigmoid", assignment="02_activation_functions")
    assert any("torch.logsumexp" in f for f in found), found


def test_many_stores_into_what_a_function_returns_check_in_linear_time():
    import time
    body = "".join("    first().data = A\n" for _ in range(3000))
    started = time.monotonic()
    refused(f"def matmul(A, B):\n{body}    return A",
            added="def first():\n    return torch.zeros(2, 2)\n" + "x = 1\n" * 2000)
    assert time.monotonic() - started < 20


@pytest.mark.parametrize("body", [
    "return torch.exp(-torch.logaddexp(torch.zeros_like(z), -z))",
    "return (-(-z).logaddexp(z * 0)).exp()",
])
def test_softplus_spelled_as_logaddexp_is_refused_in_the_activations(body):
    """logaddexp(0, -z) is softplus(-z) in one kernel (red-team probe h)."""
    found = refused(f"def sigmoid(z):\n    {body}", function="sigmoid",
                    assignment="02_activation_functions")
    assert any("logaddexp" in f for f in found), found


def test_many_binding_statements_and_stores_stay_bounded():
    """300 statements binding g, each read for every one of 400 stores `g.data = 0`: an index
    kept in a cache smaller than the number of trees was made again on every read (59 s in the
    grader's own process); now each tree is read once per check and every read is a step."""
    import time
    added = "".join(f"g = x.y({', '.join(['0'] * 200)})\n" for _ in range(300))
    body = "".join("    g.data = 0\n" for _ in range(400))
    started = time.monotonic()
    refused(f"def matmul(A, B):\n{body}    return A", added="x = None\n" + added)
    assert time.monotonic() - started < 20


CLASS_HEAD = "import math\n\nclass LinearFunction(torch.autograd.Function):\n"
CLASS_TAIL = ("\n    @staticmethod\n    def forward(ctx, x, W, b=None):\n        return x.mm(W.t())\n"
              "\n    @staticmethod\n    def backward(ctx, g):\n        return None, None, None\n")


@pytest.mark.parametrize("binding", [
    "    math: object = torch\n",
    "    for math in (torch,):\n        pass\n",
    "    math, _unused = torch, 0\n",
    "    (math := torch)\n",
    "    import torch as math\n",
    "    match torch:\n        case math:\n            pass\n",
    "    with open(__file__) as math:\n        pass\n",
    "    try:\n        pass\n    except Exception as math:\n        pass\n",
])
def test_a_name_a_class_body_binds_in_any_way_is_the_class_bodys_own(binding):
    """A class body's name bound by any binding (an annotated assignment, a loop, unpacking, `:=`,
    an import, a pattern, `with`, `except`) holds that value there, not the module of the same
    name imported above: read as the module, `math.builtins.exec` passed as `math`'s any public
    attribute (held-out red-team probe, 2026-12-08)."""
    answer = CLASS_HEAD + binding + "    run = math.builtins\n" + CLASS_TAIL
    assert refused(answer, "LinearFunction", "07_custom_autograd")


@pytest.mark.parametrize("answer, added", [
    ("def matmul(A, B):\n    return helper(torch)", "def helper(m):\n    return m\n"),
    ("def matmul(A, B):\n    box = [torch]\n    return A", ""),
    ("def matmul(A, B):\n    return torch", ""),
    ("def matmul(A, B, m=torch.nn):\n    return A", ""),
    ("def matmul(A, B):\n    T = torch\n    return helper(T)", "def helper(m):\n    return m\n"),
    ("def matmul(A, B):\n    return helper(T)", "T = torch\ndef helper(m):\n    return m\n"),
    ("def matmul(A, B):\n    return helper(F if A is None else None)", "def helper(m):\n    return m\n"),
    ("def matmul(A, B):\n    return {'m': math}['m']", "import math\n"),
])
def test_a_module_is_used_only_through_its_attributes(answer, added):
    """A module passed, stored, returned or defaulted is a value that reaches any of its public
    attributes wherever it lands (a method's first parameter may read any attribute: autograd's
    ctx): refused, naming the module; `torch.zeros`, `T = torch; T.zeros` stay allowed."""
    found = refused(answer, added=added)
    assert any("a module used as a value" in w for w in refused.last), (found, refused.last)


def test_a_helper_method_given_a_module_is_refused_where_the_module_is_passed():
    answer = CLASS_HEAD + ("    def fetch(m):\n        return m.builtins\n\n"
                           "    run = fetch(torch)\n") + CLASS_TAIL
    found = refused(answer, "LinearFunction", "07_custom_autograd")
    assert any(f.startswith("torch (") for f in found), found


def test_module_aliases_used_through_their_attributes_stay_allowed():
    assert refused("def relu(z):\n    return T.maximum(z, T.zeros_like(z))", "relu",
                   "02_activation_functions", added="T = torch\n") == []
    assert refused("def linear_forward(x, W, b=None):\n    nnf = torch.nn.functional\n"
                   "    return matmul(x, W.T) if b is None else matmul(x, W.T) + b",
                   "linear_forward") == []


def test_many_statements_that_change_a_name_check_in_linear_time():
    """5,000 `len(g)` in an added cell: each counted as a change of g, and each looked through
    all the ones before it (quadratic: 31 s in the grader's own process, 46 s when the answer
    reads g; red-team probe, 2026-12-08)."""
    import time
    added = "g = [0]\n" + "len(g)\n" * 5000
    started = time.monotonic()
    assert refused("def matmul(A, B):\n    g\n    return (A[:, :, None] * B[None]).sum(1)",
                   added=added) == []
    assert time.monotonic() - started < 5


def test_a_function_called_many_times_in_the_cells_is_read_once():
    """A 1,000-line function called by 1,000 top-level statements: each call read the whole body
    again for what it changes (calls x body: 62 s in the grader's own process; red-team probe,
    2026-12-08)."""
    import time
    added = "def f():\n" + " x = 1\n" * 1000 + "f()\n" * 1000
    started = time.monotonic()
    assert refused("def matmul(A, B):\n    return (A[:, :, None] * B[None]).sum(1)", added=added) == []
    assert time.monotonic() - started < 5


def test_a_chain_of_aliases_deeper_than_python_recurses_is_refused_not_a_crash():
    """3,000 names each bound to the next and the last to torch: reading what the first holds
    recursed once per name (RecursionError: the grader could not grade the notebook, score 0
    with an internal error, instead of a refusal)."""
    added = "".join(f"a{i} = a{i + 1}\n" for i in range(3000)) + "a3000 = torch\n"
    found = refused("def matmul(A, B):\n    C = a0.zeros(A.shape[0], B.shape[1])\n    return C",
                    added=added)
    assert any("cannot read" in w for w in refused.last), (found, refused.last)


@pytest.mark.parametrize("pattern", [
    "case Reader(value):\n            return value",
    "case Reader(value, other):\n            return value",
    "case Alias(value):\n            return value",
])
def test_a_positional_class_pattern_of_a_class_not_pythons_own_is_refused(pattern):
    """`case C(v)` reads the attribute `C.__match_args__[0]` names: for a class of one's own, any
    name, a dunder too (with `__subclasshook__`, of any object): getattr by a string. Keyword
    patterns (`case C(x=v)`) name the attribute read, and are checked as that read."""
    added = ("class Reader:\n    __match_args__ = ('__class__',)\n\nAlias = Reader\n\n"
             "def attr(obj):\n    match obj:\n        " + pattern + "\n    return None\n")
    found = refused("def matmul(A, B):\n    attr(A)\n    return (A[:, :, None] * B[None]).sum(1)",
                    added=added)
    assert any("positional" in w for w in refused.last), (found, refused.last)


def test_a_positional_pattern_of_pythons_own_types_or_torchs_matches_as_they_define():
    answer = ("def matmul(A, B):\n    match A.shape:\n        case torch.Size([int(n), int(k)]):\n"
              "            pass\n    return (A[:, :, None] * B[None]).sum(1)")
    assert refused(answer) == []


@pytest.mark.parametrize("loss", ["F.mse_loss(y_hat, y)", "2 * F.huber_loss(y_hat, y, delta=1e9)",
                                  "torch.nn.functional.smooth_l1_loss(y_hat, y, beta=1e9) * 2"])
def test_the_loss_exercise_may_not_call_the_librarys_losses(loss):
    """03's mse_loss is the loss itself: the library's losses (F.mse_loss, and huber and smooth L1
    with a large threshold, which are half the squared error) compute it (red-team probe,
    2026-12-08); its other functions may use them in a forward pass."""
    found = refused(f"def mse_loss(y_hat, y):\n    return {loss}", "mse_loss", "03_chain_rule")
    assert found, loss
    assert refused("def mlp_backward(x, y, W1, b1, W2, b2):\n    L = F.mse_loss(x, y)\n    return {}",
                   "mlp_backward", "03_chain_rule") == []


def test_many_star_imports_and_unbound_names_check_in_linear_time():
    """13,000 `from a import *` and 20,000 reads of a name no cell binds: each read listed and
    queued every star import again (35 s in the grader's own process; red-team probe,
    2026-12-08). They are listed once per check, and queued at the first such read."""
    import time
    added = ";".join(["from a import*"] * 13000)
    started = time.monotonic()
    assert refused("def matmul(A, B):\n    return (" + "q," * 20000 + ")", added=added)
    assert time.monotonic() - started < 5

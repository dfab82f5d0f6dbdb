"""Hidden tests: 07_custom_autograd (teaching autograd a new operation).

`LinearFunction` and `FakeQuantize` are classes, so the sandbox runs them through trusted
drivers (`student.drive`): the driver calls `cls.apply(...)` and then the learner's backward
*directly* on the output's node (`out.grad_fn.apply(grad_out)`, outside autograd's engine), so
the test sees exactly what backward returns (order, shapes, None) and what the learner ran
inside it (marked `SECTION("backward", ...)`: LinearFunction's allowlist applies there only).
Tests of what the engine makes of it (`.grad`, gradcheck) run the engine under `TRUSTED`. Every
expected value is computed here by PyTorch.

Hints. The common mistakes these tests name, each by its value on the test's input (a hint is
given only when the learner's value *is* that mistake's value there, all matches named as
alternatives; never as a default), with a sample in samples/07_custom_autograd.toml:
- LinearFunction forward: W not transposed (x @ W), the bias left out, the output transposed
  (W @ x.T). backward: grad_x = grad_out @ W.T; grad_W transposed (x.T @ grad_out); grad_x or
  grad_W divided by the batch size; the gradients out of order; grad_b not summed, its mean,
  summed over dim 1 or over everything; a gradient for an input that needs none, or for b=None;
  tensors kept as ctx attributes (ctx_tensors) or on the class (two calls in flight:
  run_interleaved); two save_for_backward calls; a wrong number of gradients.
- FakeQuantize forward: floor, trunc, ties rounded up or away from zero instead of to even; the
  range -127..127, -128..128, 0..255 (uint8) or none; a zero point added and not subtracted; w
  clamped instead of round(w / scale); scale multiplied in (round(w * scale)), left out
  (round(w)), or divided out at the end; the integer returned. backward: no straight-through
  estimator (zeros); no mask (grad_out everywhere, also a mask built after the clamp); the mask on
  w / scale itself (clamp's derivative, <= or <) or on w; strict ends; the range -127..127 or
  -128..128; grad_out times scale, over scale, or times the quantized weight; a gradient for
  scale; the mask kept on the class (two calls in flight).
- train_quantized (TRAIN_MISTAKES, matched on (W, b, losses) as a whole): no zero_grad; zero_grad
  between backward and step; step before backward; losses recorded after the step, or reversed;
  float forward; W_ without a gradient (no STE, a detach, no requires_grad); the shadow weight
  re-quantized; a frozen bias; the optimizer on the inputs; its default lr; a summed loss; the
  bias quantized; the quantized weight returned; losses as tensors; a non-leaf shadow weight.
- record_ops: repeats dropped (all, or consecutive ones); fn run twice; a set; other namespaces
  kept; the overload or the namespace left out; func.name()'s spelling; reversed; every operator
  twice in a row; aten.detach.default left out; nothing recorded.
State: each function is called twice on the same inputs in one learner process (repeat.again)
and then on other values of the same shapes (`earlier`: a result equal to the earlier call's is
named as kept), and the two classes with two calls in flight, so a mutable default, a global
cache or a class attribute that remembers loses points.
"""

import functools
import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from autograder.grade.compare import (STALE, TOLERANCE, alternatives, described_list, expect_tensor, fail,
                                misplaced, raised_mistakes, stale)
from autograder.grade.submission import stand_ins
from autograder.tests.data import rand
from autograder.tests.optim import SGD
from autograder.jail.inside.wire import Recipe, Unsupported
from autograder.tests.repeat import again

ASSIGNMENT = "07_custom_autograd"
graded = pytest.mark.graded

F32, F64 = torch.float32, torch.float64

# Trusted versions, standing in for the learner's while another function's tests run.
REFERENCES = stand_ins(ASSIGNMENT)  # PyTorch-built: they spell out no answer

# Drivers: trusted code run in the sandbox with the learner's class as first argument.
DRIVERS = '''
def run_function(cls, inputs, grad_out):
    """forward through cls.apply, then backward called directly on the node: what it returns."""
    out = cls.apply(*inputs)
    node = out.grad_fn if isinstance(out, torch.Tensor) else None
    report = {"out": out, "node": type(node).__name__ if node is not None else None}
    if isinstance(node, torch.autograd.function.BackwardCFunction) and grad_out is not None:
        with torch.no_grad():
            report["grads"] = SECTION("backward", node.apply)(grad_out)
    return report


def ctx_tensors(cls, inputs):
    """The output's node and the attributes of ctx (that node) holding tensors, at any depth."""
    out = cls.apply(*inputs)
    node = out.grad_fn if isinstance(out, torch.Tensor) else None

    def holds_tensor(value, depth=0):
        if isinstance(value, torch.Tensor):
            return True
        if depth > 3:
            return False
        if isinstance(value, dict):
            value = list(value.values())
        return isinstance(value, (list, tuple, set)) and any(holds_tensor(v, depth + 1) for v in value)
    attributes = getattr(node, "__dict__", None)
    found = sorted(k for k, v in attributes.items() if holds_tensor(v)) if isinstance(attributes, dict) else []
    return {"node": type(node).__name__ if node is not None else None, "attributes": found}


def _untrusted_backward(cls, inputs):
    """Forward and a direct backward outside TRUSTED, so that what they run is seen (bans)."""
    out = cls.apply(*inputs)
    node = out.grad_fn if isinstance(out, torch.Tensor) else None
    if isinstance(node, torch.autograd.function.BackwardCFunction):
        with torch.no_grad():
            SECTION("backward", node.apply)(torch.ones_like(out))
    return type(node).__name__ if node is not None else None


def run_engine(cls, inputs, grad_out):
    """The gradients autograd's engine gets through cls for the inputs that require grad."""
    node = _untrusted_backward(cls, inputs)
    if node != cls.__name__ + "Backward":
        return {"grads": None, "error": f"the output's grad_fn is {node}, not {cls.__name__}Backward"}

    def engine():
        out = cls.apply(*inputs)
        leaves = [t for t in inputs if isinstance(t, torch.Tensor) and t.requires_grad]
        try:
            return {"grads": torch.autograd.grad(out, leaves, grad_out, allow_unused=True),
                    "error": ""}
        except NotImplementedError:
            raise
        except RuntimeError as error:
            return {"grads": None, "error": str(error)[:600]}
    return TRUSTED(engine)()


def run_interleaved(cls, first, second, grad_first, grad_second):
    """Two calls in flight, as in a network that uses the layer twice: forward of `first`, forward
    of `second`, then backward of each (called directly): what the two backwards return."""
    outs = [cls.apply(*first), cls.apply(*second)]
    grads = []
    for out, grad_out in zip(outs, (grad_first, grad_second)):
        node = out.grad_fn if isinstance(out, torch.Tensor) else None
        if not isinstance(node, torch.autograd.function.BackwardCFunction):
            return {"grads": None, "node": type(node).__name__ if node is not None else None}
        with torch.no_grad():
            grads.append(SECTION("backward", node.apply)(grad_out))
    return {"grads": grads}


def run_gradcheck(cls, inputs):
    """"" when torch.autograd.gradcheck passes, else its message."""
    node = _untrusted_backward(cls, inputs)
    if node != cls.__name__ + "Backward":
        return f"the output's grad_fn is {node}, not {cls.__name__}Backward"

    def check():
        try:
            torch.autograd.gradcheck(cls.apply, tuple(inputs))
            return ""
        except NotImplementedError:
            raise
        except RuntimeError as error:
            return f"{type(error).__name__}: {error}"[:600]
    return TRUSTED(check)()
'''


def driver(name):
    return Recipe(DRIVERS, name)


def shape(t):
    return "(" + ", ".join(map(str, t.shape)) + ("," if t.dim() == 1 else "") + ")"


# Hints for exceptions raised inside the learner's code (matched on the message), each for the
# functions whose error it explains: a phrase as common as "NoneType" means "b is None" only for
# LinearFunction called with b=None, never for train_quantized or FakeQuantize.
RAISED_HINTS = [
    ("values to unpack (expected", ("LinearFunction", "FakeQuantize"),
     "ctx.saved_tensors holds what forward saved, in the order saved, from its last "
     "ctx.save_for_backward call only: save everything in one call, e.g. "
     "ctx.save_for_backward(x, W)."),
    ("save_for_backward can only save", ("LinearFunction", "FakeQuantize"),
     "ctx.save_for_backward takes tensors only; keep a Python number as an attribute: "
     "ctx.scale = scale."),
    ("NoneType", ("LinearFunction/b=None",),
     "b may be None: then there is no bias to add (and backward returns None for it)."),
    ("incorrect number of gradients", ("LinearFunction", "FakeQuantize"),
     "backward returns one value per input of forward, in order."),
    ("can't optimize a non-leaf Tensor", ("train_quantized",),
     "the optimizer needs leaf tensors: make the shadow weights W_ = W.detach().clone()"
     ".requires_grad_() (and b_ alike), and quantize W_ inside the loop, on every forward pass."),
]


def raised_hint(reply, name, args=()) -> str:
    """The hint for a call of `name` that raised, when its message is one RAISED_HINTS explains
    for that function (and, for "LinearFunction/b=None", only when this input's b is None)."""
    if reply.status != "exception" or reply.exception is None:
        return ""
    if name in ("LinearFunction", "FakeQuantize") and "got 0)" in reply.exception.message \
            and "values to unpack" in reply.exception.message:
        return ("ctx.saved_tensors is empty: forward must save what backward needs with "
                "ctx.save_for_backward(...).")
    keys = {name}
    inputs = args[0] if name == "LinearFunction" and args else ()
    if name == "LinearFunction" and len(inputs) == 3 and inputs[2] is None:
        keys.add("LinearFunction/b=None")
    return next((h for phrase, where, h in RAISED_HINTS
                 if phrase in reply.exception.message and keys & set(where)), "")


def run(student, name, what, *args):
    """The driver's report for the learner's class, or a failed test for anything but a clean run."""
    reply = student.drive(name, driver(what), *args)
    student.result(name, reply, args, hint=raised_hint(reply, name, args))
    if not isinstance(reply.value, dict if what != "run_gradcheck" else str):
        fail(f"{name}: the grader could not read what your class returned.")
    return reply.value


IN_FLIGHT = ("backward of the first call used what the second call's forward left behind (that "
             "forward ran before the first backward, as when a network uses the layer twice): keep "
             "what backward needs on ctx, with ctx.save_for_backward(...), one ctx per call; not on "
             "the class or in a global, which every call shares.")


def check_in_flight(student, name, calls, labels):
    """Two calls of the learner's class in flight (both forwards, then both backwards).
    `calls`: for each call (inputs, grad_out, expected grads, crossed), `crossed` being the grads
    a backward gives that reads the *other* call's saved tensors (None where it cannot tell)."""
    (first, g1, _, _), (second, g2, _, _) = calls
    report = run(student, name, "run_interleaved", first, second, g1, g2)
    grads = report.get("grads")
    if not isinstance(grads, (tuple, list)) or len(grads) != 2:
        fail(f"the output of {name}.apply has grad_fn {report.get('node')}; expected {name}Backward.")
    for which, got, (_, _, expected, crossed) in zip(("first", "second"), grads, calls):
        if not isinstance(got, (tuple, list)) or len(got) != len(expected):
            fail(f"{name}.backward returned {type(got).__name__} for the {which} of two calls in "
                 f"flight; it must return {len(expected)} values, one per input of forward.")
        for i, (value, want, label) in enumerate(zip(got, expected, labels)):
            if want is None:
                continue
            wrong = crossed[i] if crossed is not None else None
            expect_tensor(value, want, f"{label} from the backward of the {which} of two calls in "
                                       "flight (forward, forward, then backward, backward)",
                          mistakes={IN_FLIGHT: lambda wrong=wrong: wrong} if wrong is not None else {})


# ---------------------------------------------------------------------------
# LinearFunction

LINEAR_INPUTS = ("x", "W", "b")
LINEAR_GRADS = ("grad_x", "grad_W", "grad_b")


def linear_inputs(n, n_in, n_out, seed, dtype=F32, grad=(True, True, True), bias=True):
    x = rand(n, n_in, seed=seed, dtype=dtype)
    W = rand(n_out, n_in, seed=seed + 1, dtype=dtype)
    b = rand(n_out, seed=seed + 2, dtype=dtype) if bias else None
    tensors = [x, W, b]
    for t, g in zip(tensors, grad):
        if t is not None and g:
            t.requires_grad_()
    return tensors, rand(n, n_out, seed=seed + 3, dtype=dtype)


def linear_expected(inputs, grad_out):
    """F.linear's gradients, from autograd here; None where an input needs none."""
    x, W, b = (t.detach().clone().requires_grad_(t.requires_grad) if t is not None else None
               for t in inputs)
    out = F.linear(x, W, b)
    leaves = [t for t in (x, W, b) if t is not None and t.requires_grad]
    got = iter(torch.autograd.grad(out, leaves, grad_out))
    return out.detach(), [next(got) if t is not None and t.requires_grad else None for t in (x, W, b)]


def linear_mistakes(inputs, grad_out, i):
    """What backward's i-th gradient is for each common mistake (the module docstring lists them)."""
    x, W, b = (t.detach() if t is not None else None for t in inputs)
    g = grad_out
    n = g.shape[0]
    if i == 0:
        return {"grad_x = grad_out @ W, of shape (N, in); grad_out @ W.T (W transposed) is not it (it only has the "
                "right shape when W is square).": lambda: g @ W.T,
                "that is grad_W: backward returns (grad_x, grad_W, grad_b) in the order of forward's "
                "inputs.": lambda: g.T @ x,
                "grad_x has x's shape (N, in): grad_out @ W; W.T @ grad_out.T is its transpose.":
                    lambda: W.T @ g.T,
                "do not divide by the batch size: grad_out already holds dL/dy, any 1/N of the loss "
                "included; grad_x = grad_out @ W.": lambda: g @ W / n}
    if i == 1:
        return {"grad_W = grad_out.T @ x has W's shape (out, in); x.T @ grad_out is its "
                "transpose.": lambda: x.T @ g,
                "that is grad_x: backward returns (grad_x, grad_W, grad_b) in the order of forward's "
                "inputs.": lambda: g @ W,
                "grad_W is the sum over the batch, grad_out.T @ x, not the mean: grad_out already "
                "holds dL/dy, any 1/N of the loss included.": lambda: g.T @ x / n}
    return {"grad_b has b's shape (out,): sum grad_out over the batch, grad_out.sum(0).": lambda: g,
            "grad_b is the sum over the batch, not the mean: grad_out.sum(0).": lambda: g.mean(0),
            "sum over dim 0, the batch: grad_out.sum(0) has b's shape (out,); grad_out.sum(1) sums "
            "each sample's outputs.": lambda: g.sum(1),
            "grad_b has one entry per output, grad_out.sum(0); grad_out.sum() adds everything into "
            "one number.": lambda: g.sum()}


def forward_linear_mistakes(x, W, b):
    """What forward returns for each common mistake."""
    return {
        "y = x @ W.T + b: W is (out, in), so it must be transposed.":
            lambda: x @ W + (0 if b is None else b),
        "add the bias: y = x @ W.T + b (when b is not None).": lambda: x @ W.T,
        "y = x @ W.T has shape (N, out); W @ x.T is its transpose.":
            lambda: W @ x.T + (0 if b is None else b[:, None]),
    }


def check_linear(student, inputs, grad_out, what, earlier=None):
    """Forward and backward of the learner's LinearFunction on `inputs`; returns (out, grads).
    `earlier`: what an earlier call with other values of the same shapes returned: a result equal
    to it was kept from that call."""
    expected_out, expected = linear_expected(inputs, grad_out)
    report = run(student, "LinearFunction", "run_function", inputs, grad_out)
    x, W = inputs[0].detach(), inputs[1].detach()
    b = inputs[2].detach() if inputs[2] is not None else None
    before = earlier or (None, (None,) * 3)
    expect_tensor(report.get("out"), expected_out, f"LinearFunction.apply(x, W, b) ({what})",
                  mistakes=stale(forward_linear_mistakes(x, W, b), "LinearFunction", before[0]))
    if report.get("node") != "LinearFunctionBackward":
        fail(f"the output of LinearFunction.apply has grad_fn {report.get('node')}; expected "
             "LinearFunctionBackward. Return the result of forward as a tensor.")
    grads = report.get("grads")
    if not isinstance(grads, (tuple, list)):
        kind = grads.type_name if isinstance(grads, Unsupported) else type(grads).__name__
        fail(f"LinearFunction.backward returned a {kind} ({what}); it must return a tuple "
             "(grad_x, grad_W, grad_b), one value per input of forward.")
    if len(grads) != 3:
        fail(f"LinearFunction.backward returned {len(grads)} values ({what}); it must return 3, "
             "(grad_x, grad_W, grad_b): one per input of forward, in that order, None for an input "
             "that needs no gradient.")
    for i, (got, want, name) in enumerate(zip(grads, expected, LINEAR_INPUTS)):
        label = f"grad_{name} from LinearFunction.backward ({what})"
        if want is None:
            if got is not None:
                why = ("b is None: there is no bias, so grad_b is None" if inputs[i] is None
                       else f"{name} does not require grad (ctx.needs_input_grad[{i}] is False): "
                            "return None for it instead of computing a gradient nobody uses")
                fail(f"{label} is a {type(got).__name__}; expected None. {why}.")
            continue
        if got is None:
            fail(f"{label} is None, but {name} requires grad (ctx.needs_input_grad[{i}] is True).")
        expect_tensor(got, want, label, mistakes=stale(linear_mistakes(inputs, grad_out, i),
                                                       "LinearFunction.backward", before[1][i])
                      | misplaced({f"grad_{n}": w for n, w in zip(LINEAR_INPUTS, expected)}, f"grad_{name}"))
    return report.get("out"), grads


@graded("LinearFunction", points=1, visible=True)
def test_LinearFunction_forward(student):
    """forward equals F.linear (square W) and the output's grad_fn is LinearFunctionBackward"""
    inputs, g = linear_inputs(5, 4, 4, seed=700)
    check_linear(student, inputs, g, "square W, float32")


@graded("LinearFunction", points=1, visible=True)
def test_LinearFunction_backward_float32(student):
    """backward returns (grad_x, grad_W, grad_b) equal to autograd's for F.linear (float32)"""
    inputs, g = linear_inputs(6, 3, 2, seed=710)
    first = again(check_linear, student, inputs, g, "x (6, 3), W (2, 3), float32",
                  name="LinearFunction")   # twice: the same inputs, one process
    inputs, g = linear_inputs(6, 3, 2, seed=715)   # the same shapes, other values
    check_linear(student, inputs, g, "x (6, 3), W (2, 3), float32, other values", earlier=first)


@graded("LinearFunction", points=1)
def test_LinearFunction_backward_float64(student):
    """float64, a batch of one and a wide layer"""
    inputs, g = linear_inputs(1, 7, 5, seed=720, dtype=F64)
    check_linear(student, inputs, g, "x (1, 7), W (5, 7), float64")
    inputs, g = linear_inputs(9, 2, 6, seed=725, dtype=F64)
    check_linear(student, inputs, g, "x (9, 2), W (6, 2), float64")


@graded("LinearFunction", points=1, visible=True)
def test_LinearFunction_without_bias(student):
    """b=None: forward is x Wᵀ and backward returns None for b"""
    inputs, g = linear_inputs(4, 3, 5, seed=730, bias=False)
    check_linear(student, inputs, g, "b=None")
    inputs, g = linear_inputs(3, 2, 2, seed=735, dtype=F64, bias=False, grad=(False, True, False))
    check_linear(student, inputs, g, "b=None, only W requires grad, float64")


@graded("LinearFunction", points=1, visible=True)
def test_LinearFunction_needs_input_grad(student):
    """None for every input that does not require grad (ctx.needs_input_grad)"""
    for grad, what in [((False, True, True), "x does not require grad"),
                       ((True, False, True), "W does not require grad"),
                       ((True, True, False), "b does not require grad"),
                       ((True, False, False), "only x requires grad")]:
        inputs, g = linear_inputs(4, 3, 2, seed=740, grad=grad)
        check_linear(student, inputs, g, what)


@graded("LinearFunction", points=1, visible=True)
def test_LinearFunction_through_autograd(student):
    """loss.backward() through LinearFunction leaves F.linear's gradients in .grad"""
    for seed, grad, bias in [(750, (True, True, True), True), (755, (False, True, True), True),
                             (758, (True, True, False), False)]:
        inputs, g = linear_inputs(5, 3, 4, seed=seed, grad=grad, bias=bias)
        _, expected = linear_expected(inputs, g)
        report = run(student, "LinearFunction", "run_engine", inputs, g)
        if report.get("error"):
            fail(f"autograd could not use what LinearFunction.backward returned: {report['error']}")
        got = iter(report.get("grads") or ())
        for i, (name, want) in enumerate(zip(LINEAR_INPUTS, expected)):
            if want is not None:
                value = next(got, None)
                if value is None:
                    fail(f"{name}.grad is None after backward through LinearFunction: grad_{name} is "
                         f"None, but {name} requires grad (ctx.needs_input_grad[{i}] is True), so "
                         f"backward must return its gradient there.")
                expect_tensor(value, want, f"{name}.grad after backward through LinearFunction",
                              mistakes={})


@graded("LinearFunction", points=1, visible=True)
def test_LinearFunction_gradcheck(student):
    """torch.autograd.gradcheck passes in float64 (with and without bias)"""
    for seed, bias in [(760, True), (765, False)]:
        inputs, _ = linear_inputs(3, 4, 2, seed=seed, dtype=F64, bias=bias)
        message = run(student, "LinearFunction", "run_gradcheck", inputs)
        if not isinstance(message, str) or message:
            fail(f"torch.autograd.gradcheck(LinearFunction.apply, (x, W, {'b' if bias else 'None'})) "
                 f"in float64 fails: {message}")


CTX_ATTRIBUTES = (
    "keep the tensors backward needs with ctx.save_for_backward(x, W) and read them back with "
    "ctx.saved_tensors, not as attributes of ctx (only plain Python values such as a flag go "
    "there). save_for_backward lets PyTorch detect an input changed in place between forward and "
    "backward (an attribute silently gives a wrong gradient then), and frees the tensors once "
    "backward has run.")


@graded("LinearFunction", points=1, visible=True)
def test_LinearFunction_save_for_backward(student):
    """forward keeps its tensors with ctx.save_for_backward, not on ctx or the class (two calls in flight)"""
    inputs, g = linear_inputs(4, 3, 5, seed=770)
    check_linear(student, inputs, g, "x (4, 3), W (5, 3)")
    report = run(student, "LinearFunction", "ctx_tensors", inputs)
    if report.get("node") != "LinearFunctionBackward":
        fail(f"the output of LinearFunction.apply has grad_fn {report.get('node')}; expected "
             "LinearFunctionBackward.")
    attributes = report.get("attributes") or []
    if attributes:
        fail(f"LinearFunction.forward stores tensors on ctx as "
             f"{', '.join('ctx.' + a for a in attributes)}: {CTX_ATTRIBUTES}")
    # two calls in flight: a backward reading tensors kept on the class reads the second call's
    second, g2 = linear_inputs(4, 3, 5, seed=775)
    x1, W1 = (t.detach() for t in inputs[:2])
    x2, W2 = (t.detach() for t in second[:2])
    check_in_flight(student, "LinearFunction", [
        (inputs, g, linear_expected(inputs, g)[1], (g @ W2, g.T @ x2, None)),
        (second, g2, linear_expected(second, g2)[1], (g2 @ W1, g2.T @ x1, None))], LINEAR_GRADS)


# ---------------------------------------------------------------------------
# FakeQuantize

def quantize(w, scale, low=-128, high=127, rounding=torch.round):
    return scale * torch.clamp(rounding(w / scale), low, high)


def ste(w, scale, g):
    """The gradient of torch.fake_quantize_per_tensor_affine (zero point 0, -128..127) for g: g where
    -128 <= round(w / scale) <= 127 (ties to even), 0 elsewhere. PyTorch's own op gives it."""
    w = w.detach().clone().requires_grad_()
    torch.fake_quantize_per_tensor_affine(w, scale, 0, -128, 127).backward(g)
    return w.grad


def nonzero(value):
    """`value`, unless it is 0 everywhere: many mistakes give zeros, so zeros name none of them."""
    return value if bool(value.any()) else None


def forward_mistakes(w, scale):
    return {
        "round to the nearest integer with torch.round, not floor.":
            lambda: quantize(w, scale, rounding=torch.floor),
        "torch.round sends a tie to the even integer (0.5 -> 0, 1.5 -> 2, -2.5 -> -2); "
        "floor(v + 0.5) rounds ties up.": lambda: quantize(w, scale, rounding=lambda v: torch.floor(v + 0.5)),
        "ties go to the even integer with torch.round (0.5 -> 0, 1.5 -> 2, -2.5 -> -2), not away "
        "from zero.": lambda: quantize(w, scale, rounding=lambda v: torch.sign(v) * torch.floor(v.abs() + 0.5)),
        "round to the nearest integer, do not truncate toward 0.":
            lambda: quantize(w, scale, rounding=torch.trunc),
        "the int8 range is -128 to 127: clamp(..., -128, 127).": lambda: quantize(w, scale, -127, 127),
        "the int8 range is -128 to 127 (127 is the largest int8 value).":
            lambda: quantize(w, scale, -128, 128),
        "clamp to the int8 range -128 to 127 after rounding.":
            lambda: scale * torch.round(w / scale),
        "multiply the integer back by scale: forward returns a weight on the grid, not the integer.":
            lambda: torch.clamp(torch.round(w / scale), -128, 127),
        "divide w by scale to count grid steps, k = round(w / scale) (then multiply back: scale * k); "
        "round(w * scale) multiplies.": lambda: nonzero(quantize(w * scale * scale, scale)),
        "divide w by scale before rounding: k = round(w / scale) counts grid steps; round(w) rounds "
        "to whole units of w.": lambda: scale * torch.clamp(torch.round(w), -128, 127),
        "multiply the integer back by scale, scale * k: dividing by scale moves it off the grid.":
            lambda: torch.clamp(torch.round(w / scale), -128, 127) / scale,
        "clamp the integer k = round(w / scale) to -128..127, not w itself (in units of w the range "
        "is -128 * scale to 127 * scale).":
            lambda: scale * torch.round(torch.clamp(w, -128, 127) / scale),
        "int8 is signed: its range is -128 to 127 (0 to 255 is uint8's).":
            lambda: quantize(w, scale, 0, 255),
        "with a zero point z the value is scale * (clamp(round(w / scale) + z, ...) - z): subtract z "
        "again. Here the zero point is 0: scale * clamp(round(w / scale), -128, 127).":
            lambda: scale * torch.clamp(torch.round(w / scale) + 128, 0, 255),
    }


def backward_mistakes(w, scale, g):
    ratio = w / scale
    k = torch.round(ratio)

    def where(inside):
        return torch.where(inside, g, torch.zeros_like(g))
    return {
        "grad_w is 0 everywhere, which is the true derivative of round (0 almost everywhere): "
        "nothing could train through it. Use the straight-through estimator: grad_out where "
        "-128 <= round(w / scale) <= 127.":
            lambda: torch.zeros_like(g),
        "outside the range clamp cuts w off: pass 0 where round(w / scale) < -128 or > 127 (a mask "
        "built from the clamped value is true everywhere).": lambda: g,
        "that is clamp's derivative, the LSQ/PACT convention (and torch.clamp's own backward up to "
        "torch 2.13): it tests w / scale itself. This exercise follows PyTorch's "
        "torch.fake_quantize_per_tensor_affine, which tests the rounded value: grad_out where "
        "-128 <= round(w / scale) <= 127 (w / scale = -128.25 rounds to -128 and passes; 127.5 "
        "rounds to 128 and does not).": lambda: where((ratio >= -128) & (ratio <= 127)),
        "that tests w / scale itself with <, as torch.clamp's own backward does from torch 2.14 on: "
        "build the mask from the rounded value, -128 <= round(w / scale) <= 127 (<=, not <).":
            lambda: where((ratio > -128) & (ratio < 127)),
        "the ends are inside the range: pass the gradient where -128 <= round(w / scale) <= 127 "
        "(<=, not <).": lambda: where((k > -128) & (k < 127)),
        "the upper end round(w / scale) = 127 is inside the range: pass the gradient where "
        "round(w / scale) <= 127 (<=, not <).": lambda: where((k >= -128) & (k < 127)),
        "the lower end round(w / scale) = -128 is inside the range: pass the gradient where "
        "-128 <= round(w / scale) (<=, not <).": lambda: where((k > -128) & (k <= 127)),
        "the range is -128 <= round(w / scale) <= 127, not -127 to 127.":
            lambda: where((k >= -127) & (k <= 127)),
        "the range is -128 <= round(w / scale) <= 127, not -128 to 128.":
            lambda: where((k >= -128) & (k <= 128)),
        "backward passes grad_out itself, not grad_out times the quantized weight.":
            lambda: g * quantize(w, scale),
        "the range is for the integer round(w / scale), not for w: pass the gradient where "
        "-128 <= round(w / scale) <= 127.": lambda: where((w >= -128) & (w <= 127)),
        "the straight-through estimator passes grad_out itself inside the range, with no factor of "
        "scale: it takes d(scale * round(w / scale))/dw as 1 (the / scale and the * scale cancel).":
            lambda: where((k >= -128) & (k <= 127)) / scale,
        "the straight-through estimator passes grad_out itself inside the range, with no factor of "
        "scale (grad_out * scale is not it): it takes d(scale * round(w / scale))/dw as 1.":
            lambda: where((k >= -128) & (k <= 127)) * scale,
    }


def check_fake_quantize(student, w, scale, what, grad_out=None, earlier=None):
    """Forward (and, given grad_out, backward) of the learner's FakeQuantize; returns (out, grad_w).
    `earlier`: what a call with other values of the same shape returned (a result kept from it)."""
    w = w.detach().requires_grad_()
    report = run(student, "FakeQuantize", "run_function", (w, scale), grad_out)
    wd = w.detach()
    before = earlier or (None, None)
    expect_tensor(report.get("out"), quantize(wd, scale),
                  f"FakeQuantize.apply(w, scale={scale}) ({what})",
                  mistakes=stale(forward_mistakes(wd, scale), "FakeQuantize", before[0]))
    if grad_out is None:
        return report.get("out"), None
    if report.get("node") != "FakeQuantizeBackward":
        fail(f"the output of FakeQuantize.apply has grad_fn {report.get('node')}; expected "
             "FakeQuantizeBackward.")
    grads = report.get("grads")
    if not isinstance(grads, (tuple, list)) or len(grads) != 2:
        n = f"{len(grads)} values" if isinstance(grads, (tuple, list)) else "a single value"
        fail(f"FakeQuantize.backward returned {n} ({what}); it must return 2, (grad_w, None): "
             "one per input of forward, None for scale.")
    expect_tensor(grads[0], ste(wd, scale, grad_out), f"grad_w from FakeQuantize.backward ({what})",
                  mistakes=stale(backward_mistakes(wd, scale, grad_out), "FakeQuantize.backward",
                                 before[1]))
    if grads[1] is not None:
        fail(f"FakeQuantize.backward returned a {type(grads[1]).__name__} for scale; return None: "
             "scale is a Python float, not a tensor, and autograd has no gradient to give it.")
    return report.get("out"), grads[0]


# power-of-two scales: w / scale is exact, so the edges and ties are exactly where they should be.
# EDGES holds the half-open zones [-128.5, -128) and (127, 127.5) where PyTorch's STE (the rounded
# value inside) and clamp's derivative (w / scale inside) differ, and their ends -128.5 (rounds to
# -128: passes) and 127.5 (rounds to 128: does not). Its only ties are those two, whose forward is
# the same for every rounding of ties (clamped): a wrong rounding of ties fails the tests of ties.
EDGES = torch.tensor([-200.0, -129.0, -128.75, -128.5, -128.25, -128.0, -127.75, -1.25, 0.0, 2.75,
                      126.0, 126.25, 127.0, 127.25, 127.5, 127.75, 128.0, 300.0])
TIES = torch.tensor([-4.5, -3.5, -2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 10.5, 11.5, -127.5, 126.5])


@graded("FakeQuantize", points=1, visible=True)
def test_FakeQuantize_forward(student):
    """forward rounds to the int8 grid: scale · clamp(round(w / scale), -128, 127)"""
    first = again(check_fake_quantize, student, rand(6, 5, seed=800, low=-3, high=3), 0.03,
                  "2-D w, float32", name="FakeQuantize")   # twice: the same inputs, one process
    check_fake_quantize(student, rand(6, 5, seed=805, low=-3, high=3), 0.03,
                        "2-D w, float32, other values", earlier=first)


@graded("FakeQuantize", points=1, visible=True)
def test_FakeQuantize_rounding_ties(student):
    """ties w / scale = k + 0.5 go to the even integer, as torch.round does"""
    check_fake_quantize(student, TIES * 0.125, 0.125, "w / scale = k + 0.5")


@graded("FakeQuantize", points=1, visible=True)
def test_FakeQuantize_clipping_edges(student):
    """w / scale exactly -128, 127, and beyond: clipped to the int8 range"""
    check_fake_quantize(student, EDGES * 0.25, 0.25, "w / scale on and beyond -128 and 127")


@graded("FakeQuantize", points=1, visible=True)
def test_FakeQuantize_straight_through(student):
    """backward passes grad_out where -128 <= round(w / scale) <= 127, as PyTorch's fake_quantize"""
    g = rand(len(EDGES), seed=810, low=0.5, high=2.0)
    check_fake_quantize(student, EDGES * 0.5, 0.5, "w / scale on and beyond the edges", g)
    # two calls in flight: a mask kept on the class would be the second call's for both
    w1, w2, g2 = EDGES * 0.5, EDGES.flip(0) * 0.5, rand(len(EDGES), seed=815, low=0.5, high=2.0)
    inside = [(torch.round(w / 0.5) >= -128) & (torch.round(w / 0.5) <= 127) for w in (w1, w2)]
    check_in_flight(student, "FakeQuantize", [
        ((w1.clone().requires_grad_(), 0.5), g, (ste(w1, 0.5, g), None), (g * inside[1], None)),
        ((w2.clone().requires_grad_(), 0.5), g2, (ste(w2, 0.5, g2), None), (g2 * inside[0], None))],
        ("grad_w", "grad_scale"))


@graded("FakeQuantize", points=1, visible=True)
def test_FakeQuantize_none_for_scale(student):
    """backward returns None for scale; autograd fills w.grad with the straight-through gradient"""
    w = rand(4, 3, seed=820, low=-8, high=8)
    g = rand(4, 3, seed=821)
    check_fake_quantize(student, w, 0.04, "w (4, 3), some beyond the range", g)
    report = run(student, "FakeQuantize", "run_engine", (w.clone().requires_grad_(), 0.04), g)
    if report.get("error"):
        fail(f"autograd could not use what FakeQuantize.backward returned: {report['error']}")
    expect_tensor((report.get("grads") or (None,))[0], ste(w, 0.04, g),
                  "w.grad after backward through FakeQuantize", mistakes=backward_mistakes(w, 0.04, g))


@graded("FakeQuantize", points=1)
def test_FakeQuantize_float64(student):
    """float64 w and gradients, a scale that is not a power of two, ties and edges"""
    w = torch.cat([rand(20, seed=830, dtype=F64, low=-2, high=2), TIES.double() * 0.0625,
                   EDGES.double() * 0.0625])
    check_fake_quantize(student, w, 0.0625, "float64, scale 1/16", rand(len(w), seed=831, dtype=F64))
    check_fake_quantize(student, rand(3, 4, seed=835, dtype=F64), 0.007, "float64, scale 0.007",
                        rand(3, 4, seed=836, dtype=F64))


# ---------------------------------------------------------------------------
# train_quantized

def reference_training(x, y, W, b, scale, lr, steps, mistake=None):
    """The loop with PyTorch's own ops (the STE spelled with detach and a mask), or a known mistake."""
    W_ = W.detach().clone().requires_grad_()
    b_ = b.detach().clone().requires_grad_(mistake != "frozen_bias")
    # "inputs": the optimizer holds copies standing for W and b, which nothing differentiates
    optimizer = SGD([W_, b_] if mistake != "inputs" else [W.detach().clone(), b.detach().clone()],
                    lr=lr if mistake != "default_lr" else 1e-3)

    def fake_quantize(t):
        k = torch.round(t.detach() / scale)
        inside = ((k >= -128) & (k <= 127)).to(t.dtype)
        return quantize(t.detach(), scale) + (t - t.detach()) * inside

    def forward():
        if mistake == "float":
            return F.linear(x, W_, b_)
        if mistake == "frozen_weight":   # no gradient reaches W_ (its value is the grid's)
            return F.linear(x, quantize(W_.detach(), scale), b_)
        return F.linear(x, fake_quantize(W_), fake_quantize(b_) if mistake == "bias" else b_)

    losses = []
    for _ in range(steps):
        if mistake not in ("no_zero_grad", "zero_between"):
            optimizer.zero_grad()
        loss = F.mse_loss(forward(), y, reduction="sum" if mistake == "sum" else "mean")
        if mistake != "after":
            losses.append(loss.item())
        if mistake == "step_first":
            optimizer.step()
        loss.backward()
        if mistake == "zero_between":
            optimizer.zero_grad()
        if mistake != "step_first":
            optimizer.step()
        if mistake == "requantize":
            with torch.no_grad():
                W_.copy_(quantize(W_, scale))
        if mistake == "after":
            with torch.no_grad():
                losses.append(F.mse_loss(forward(), y).item())
    return W_.detach(), b_.detach(), losses[::-1] if mistake == "reversed" else losses


# What each common mistake of train_quantized does to (W_trained, b_trained, losses) as a whole: a
# hint is given only when all three equal that mistake's (check_training), so that a mistake is
# never named for a result that only shares one part with it (W untouched is also what training
# nothing at all gives, and what an optimizer on the inputs gives).
NOTHING_TRAINED = (
    "nothing trained: W_trained and b_trained are W and b as given, and every loss is the first. "
    "Each step runs optimizer.zero_grad(), the forward pass, loss.backward() and optimizer.step(), "
    "in that order, none left out, with the optimizer on the shadow weights, "
    "torch.optim.SGD([W_, b_], lr=lr) (W and b themselves get no gradient): call loss.backward() "
    "before optimizer.step(), since a step before backward, or right after zero_grad(), finds no "
    "gradient.")
TRAIN_MISTAKES = {
    "no_zero_grad": "zero the gradients before every backward (optimizer.zero_grad()): backward "
                    "adds into .grad, so the steps used the sum of all gradients so far.",
    "after": "record each loss before the step that follows it (losses[0] is the loss of the "
             "starting weights).",
    "reversed": "losses in the order of the steps: append each loss (losses[0] is the loss of the "
                "starting weights).",
    "float": "the forward pass must use the quantized weight, FakeQuantize.apply(W_, scale), not "
             "the float shadow weight.",
    "frozen_weight": "W_ never changed, so only the bias trained: W_ must be a leaf that requires "
                     "grad, W_ = W.detach().clone().requires_grad_(), handed to the optimizer, and "
                     "the forward must reach it through FakeQuantize.apply(W_, scale), whose backward "
                     "is the straight-through estimator (torch.round's own derivative is 0, and "
                     ".detach() cuts the graph).",
    "requantize": "keep the shadow weight in floats: rounding it back to the grid after every step "
                  "throws away every update smaller than half a grid step.",
    "frozen_bias": "b_trained is b as given, while W trained: the bias trains too. It must be a "
                   "leaf that requires grad, b_ = b.detach().clone().requires_grad_(), and be in "
                   "the optimizer's list, torch.optim.SGD([W_, b_], lr=lr): either one missing "
                   "leaves it as it was.",
    "inputs": NOTHING_TRAINED,
    "step_first": NOTHING_TRAINED,
    "zero_between": NOTHING_TRAINED,
    "default_lr": "give the optimizer the learning rate: torch.optim.SGD([W_, b_], lr=lr) "
                  "(without lr it steps with its default, 0.001).",
    "sum": "the loss is the mean squared error, F.mse_loss(prediction, y): the mean of the squared "
           "errors over all entries, not their sum.",
    "bias": "quantize only the weight: LinearFunction.apply(x, FakeQuantize.apply(W_, scale), b_), "
            "with the bias b_ in floats.",
}
QUANTIZED_RESULT = "return the shadow weight W_ itself, not its quantized value."


def _same(got, want) -> bool:
    """Two tensors of one shape whose values agree to the expected dtype's tolerance."""
    if not isinstance(got, torch.Tensor) or not isinstance(want, torch.Tensor) \
            or got.shape != want.shape:
        return False
    rtol, atol = TOLERANCE.get(want.dtype, (0.0, 0.0))
    return bool(torch.allclose(got.double(), want.double(), rtol=rtol, atol=atol, equal_nan=True))


def check_training(student, x, y, W, b, scale, lr, steps, what, earlier=None):
    """The learner's train_quantized against the reference; returns its (W, b, losses) as tensors.
    `earlier`: what a call with other values of the same shapes returned (a result kept from it)."""
    reply = student.call("train_quantized", x, y, W, b, scale, lr, steps)
    value = student.result("train_quantized", reply, (x, y, W, b, scale, lr, steps),
                           hint=raised_hint(reply, "train_quantized"))
    call = f"train_quantized(x, y, W, b, scale={scale}, lr={lr}, steps={steps}) ({what})"
    if not isinstance(value, (tuple, list)) or len(value) != 3:
        kind = value.type_name if isinstance(value, Unsupported) else type(value).__name__
        fail(f"{call} returned a {kind}; expected (W_trained, b_trained, losses).")
    W_got, b_got, losses = value
    W_want, b_want, losses_want = reference_training(x, y, W, b, scale, lr, steps)
    if not isinstance(losses, (list, tuple)) or len(losses) != steps:
        fail(f"losses from {call} should be a list of {steps} floats, one per step; got "
             f"{len(losses) if isinstance(losses, (list, tuple)) else type(losses).__name__}"
             f"{' items' if isinstance(losses, (list, tuple)) else ''}.")
    if not all(type(v) is float for v in losses):
        kinds = sorted({type(v).__name__ for v in losses if type(v) is not float})
        fail(f"losses from {call} should be Python floats; some are {', '.join(kinds)}: append "
             "loss.item().")
    got = (torch.tensor(losses, dtype=F64), W_got, b_got)
    want = (torch.tensor(losses_want, dtype=F64), W_want, b_want)
    stale_hints = stale({}, "train_quantized", earlier)

    @functools.cache
    def made() -> dict:
        """The mistakes whose whole result (losses, W, b) is the learner's: computed only when a
        comparison below fails."""
        results = {hint: reference_training(x, y, W, b, scale, lr, steps, mistake=m)
                   for m, hint in TRAIN_MISTAKES.items()}
        results = {h: (torch.tensor(v[2], dtype=F64), v[0], v[1]) for h, v in results.items()}
        results[QUANTIZED_RESULT] = (want[0], quantize(W_want, scale), b_want)
        results.update({h: f() for h, f in stale_hints.items()})
        return {h: v for h, v in results.items()
                if all(map(_same, got, v)) and not all(map(_same, v, want))}

    hints = [*TRAIN_MISTAKES.values(), QUANTIZED_RESULT, *stale_hints]
    for k, label in enumerate(("losses", "W_trained", "b_trained")):
        expect_tensor(got[k], want[k], f"{label} from {call}",
                      mistakes={h: (lambda h=h, k=k: made()[h][k] if h in made() else None)
                                for h in hints})
    return got


def training_data(n, n_in, n_out, seed, dtype=F32, spread=1.0):
    x = rand(n, n_in, seed=seed, dtype=dtype)
    y = rand(n, n_out, seed=seed + 1, dtype=dtype)
    W = rand(n_out, n_in, seed=seed + 2, dtype=dtype, low=-spread, high=spread)
    b = rand(n_out, seed=seed + 3, dtype=dtype)
    return x, y, W, b


@graded("train_quantized", points=1, visible=True)
def test_train_quantized_matches_pytorch(student):
    """the trained shadow weights and bias equal the same loop written with PyTorch's ops"""
    first = again(check_training, student, *training_data(16, 3, 2, seed=900), 0.05, 0.1, 6,
                  "float32", name="train_quantized")   # twice: the same inputs, one process
    check_training(student, *training_data(16, 3, 2, seed=905), 0.05, 0.1, 6,
                   "float32, the same shapes, other values", earlier=first)


@graded("train_quantized", points=1, visible=True)
def test_train_quantized_losses(student):
    """losses are the floats before each step, starting with the loss of the given weights"""
    check_training(student, *training_data(10, 4, 3, seed=910), 0.02, 0.2, 8, "8 steps")


@graded("train_quantized", points=1)
def test_train_quantized_clipped_float64(student):
    """float64, with weights beyond the grid's range (the STE passes them no gradient)"""
    x, y, W, b = training_data(12, 3, 2, seed=920, dtype=F64, spread=2.0)
    check_training(student, x, y, W, b, 0.01, 0.05, 5, "float64, |W| up to 2 with scale 0.01")


@graded("train_quantized", points=1, visible=True)
def test_train_quantized_inputs_untouched(student):
    """W and b are left as they were (training works on copies); one step"""
    x, y, W, b = training_data(8, 2, 2, seed=930)
    reply = student.call("train_quantized", x, y, W, b, 0.1, 0.1, 1)
    student.result("train_quantized", reply, (x, y, W, b, 0.1, 0.1, 1))
    check_training(student, x, y, W, b, 0.1, 0.1, 1, "one step")
    # W and b as an nn.Linear holds them: leaves that require grad. A copy made with
    # W.clone() is then not a leaf, and torch.optim.SGD refuses it.
    W, b = W.clone().requires_grad_(), b.clone().requires_grad_()
    check_training(student, x, y, W, b, 0.1, 0.1, 1,
                   "W and b require grad, like nn.Linear's weight and bias")


# ---------------------------------------------------------------------------
# record_ops

# Each recipe returns the function fn to record; it runs in the sandbox and here.
PROGRAMS = '''
def _values(seed, *shape):
    gen = torch.Generator().manual_seed(seed)
    return torch.rand(*shape, generator=gen) * 2 - 1


def no_op():
    return lambda: None


def python_only():
    def fn():
        total = sum(range(10))
        return [total, "text", 2.5 * 4]
    return fn


def arithmetic():
    a, c = _values(1, 3), _values(2, 3)
    return lambda: ((a * c + a) * c).sum()


def other_arithmetic():
    a, c = _values(11, 2, 3), _values(12, 2, 3)
    return lambda: (a - c).abs().amax(dim=1).exp()


def nested():
    x, W, b = _values(3, 4, 3), _values(4, 2, 3), _values(5, 2)

    def helper(t):
        return torch.nn.functional.relu(t).mean(dim=0)

    def fn():
        h = torch.nn.functional.linear(x, W, b)
        return helper(h * 2) - helper(h)
    return fn


def backward_pass():
    w = _values(6, 3).requires_grad_()
    return lambda: (w.exp() * w).sum().backward()


def optimizer(steps, momentum=0.0, foreach=False):
    ps = [_values(7, 3).requires_grad_(), _values(8, 2, 2).requires_grad_()]
    opt = torch.optim.SGD(ps, lr=0.1, momentum=momentum, foreach=foreach)

    def fn():
        for k in range(steps):
            for i, p in enumerate(ps):
                p.grad = _values(10 + 3 * k + i, *p.shape)
            opt.step()
    return fn
'''


class _Reference(TorchDispatchMode):
    def __init__(self, every_namespace=False, spell=str, returns=True):
        super().__init__()
        self.every_namespace, self.spell, self.returns = every_namespace, spell, returns
        self.names = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if self.every_namespace or func.namespace == "aten":
            self.names.append(self.spell(func))
        result = func(*args, **(kwargs or {}))
        return result if self.returns else None


def reference_ops(name, args, every_namespace=False, spell=str, returns=True):
    """The operators program `name` runs; returns=False: a mode whose __torch_dispatch__ runs
    each operator but returns None (a learner's mistake; it raises where fn uses a result)."""
    scope = {"torch": torch, "NAMED": {}}
    exec(compile(PROGRAMS, "<programs>", "exec"), scope)
    fn = scope[name](*args)
    with _Reference(every_namespace, spell, returns) as mode:
        fn()
    return mode.names


def check_ops(student, name, *args, label, earlier=None):
    """The learner's record_ops on the program `name`; returns its list. `earlier`: what an
    earlier call, on another program, returned (a result kept from it)."""
    recipe = Recipe(PROGRAMS, name, args, label=label)
    reply = student.call("record_ops", recipe)
    got = student.result("record_ops", reply, (recipe,), hint=raised_mistakes(reply, {
        "__torch_dispatch__ must return the operator's result, func(*args, **kwargs): the code "
        "being recorded uses it (returning nothing hands it None).":
            lambda: reference_ops(name, args, returns=False)}))
    expected = reference_ops(name, args)
    what = f"record_ops({label})"
    if not isinstance(got, list):
        kind = got.type_name if isinstance(got, Unsupported) else type(got).__name__
        fail(f"{what} returned a {kind}; expected a list of strings such as \"aten.add_.Tensor\".")
    if any(not isinstance(v, str) for v in got):
        kinds = sorted({v.type_name if isinstance(v, Unsupported) else type(v).__name__
                        for v in got if not isinstance(v, str)})
        fail(f"{what} returned a list holding {', '.join(kinds)}; expected strings: append "
             "str(func), e.g. \"aten.add_.Tensor\".")
    if got == expected:
        return got
    with_all = reference_ops(name, args, every_namespace=True)
    repeats = ("keep repeats: keep every call, even the same operator twice in a row; an operator "
               "that runs twice is listed twice, in the order it ran.")
    candidates = [
        (list(dict.fromkeys(expected)), repeats),
        ([e for i, e in enumerate(expected) if i == 0 or expected[i - 1] != e], repeats),
        (expected * 2, "call fn() once, inside the mode: the list holds every operator twice, as if "
                       "fn had run two times."),
        (sorted(set(expected)), "keep the order the operators ran in, and their repeats (no set)."),
        (with_all, "keep only operators of the aten namespace (func.namespace == \"aten\"): the "
                   "profiler.* entries mark where optimizer.step() starts and ends."),
        ([e.rsplit(".", 1)[0] for e in expected], "use str(func), which includes the overload: "
                                                  "\"aten.add_.Tensor\", not \"aten.add_\"."),
        ([e.removeprefix("aten.") for e in expected], "use str(func), which includes the namespace: "
                                                      "\"aten.add_.Tensor\"."),
        (reference_ops(name, args, spell=lambda f: f.name()),
         "use str(func), \"aten.add_.Tensor\"; func.name() spells it \"aten::add_.Tensor\"."),
        (expected[::-1], "keep the order the operators ran in: append each one at the end of the "
                         "list (insert(0, ...) reverses it)."),
        ([e for e in expected for _ in range(2)], "each operator is listed twice in a row: append "
                                                  "str(func) once per call of __torch_dispatch__."),
        ([e for e in expected if e != "aten.detach.default"],
         "keep every aten operator, aten.detach.default too: autograd and the optimizer run it "
         "like any other."),
        ([], "nothing was recorded while fn ran: fn() must run inside the with-block of your mode, "
             "and its __torch_dispatch__ must append str(func) for every operator whose "
             "func.namespace is \"aten\"."),
        (earlier, STALE.format("record_ops")),
    ]
    hint = alternatives(h for c, h in candidates if got == c and c != expected) or described_list(
        got, expected, "operators")
    shown = lambda ops: f"{ops[:12]}{' ...' if len(ops) > 12 else ''} ({len(ops)} entries)"
    fail(f"{what} returned {shown(got)}; expected {shown(expected)}.{hint}")


@graded("record_ops", points=1, visible=True)
def test_record_ops_in_order_with_repeats(student):
    """arithmetic on tensors: every aten operator in order, repeats kept"""
    first = again(check_ops, student, "arithmetic", label="lambda: ((a * c + a) * c).sum()",
                  name="record_ops")   # twice: the same program, one process
    check_ops(student, "other_arithmetic", label="lambda: (a - c).abs().amax(dim=1).exp()",
              earlier=first)


@graded("record_ops", points=1, visible=True)
def test_record_ops_no_op(student):
    """a function that runs no tensor operation gives []"""
    check_ops(student, "no_op", label="lambda: None")
    check_ops(student, "python_only", label="a function of plain Python")


@graded("record_ops", points=1)
def test_record_ops_nested(student):
    """composite and nested calls (F.linear, a helper, relu, mean) and a backward pass"""
    check_ops(student, "nested", label="F.linear and a helper function")
    check_ops(student, "backward_pass", label="lambda: (w.exp() * w).sum().backward()")


@graded("record_ops", points=1, visible=True)
def test_record_ops_optimizer(student):
    """optimizer.step() of SGD: plain, with momentum (two steps), foreach=True; no profiler entries"""
    check_ops(student, "optimizer", 1, label="optimizer.step() of plain SGD")
    check_ops(student, "optimizer", 2, 0.9, label="two steps of SGD(momentum=0.9)")
    check_ops(student, "optimizer", 2, 0.9, True, label="two steps of SGD(momentum=0.9, foreach=True)")
    check_ops(student, "optimizer", 2, 0.0, True, label="two steps of SGD(foreach=True)")

"""Hidden tests: 07_custom_autograd (teaching autograd a new operation).

`LinearFunction` and `FakeQuantize` are classes, so the sandbox runs them through trusted
drivers (`student.drive`): the driver calls `cls.apply(...)` and then the learner's backward
*directly* on the output's node (`out.grad_fn.apply(grad_out)`, outside autograd's engine), so
the test sees exactly what backward returns (order, shapes, None) and what the learner ran
inside it (marked `SECTION("backward", ...)`: LinearFunction's allowlist applies there only).
Tests of what the engine makes of it (`.grad`, gradcheck) run the engine under `TRUSTED`. Every
expected value is computed here by PyTorch.
"""

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from autograder.compare import expect_tensor, fail
from autograder.notebook import stand_ins
from autograder.tests.data import rand
from autograder.tests.optim import SGD
from autograder.jail.wire import Recipe, Unsupported

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


# Hints for exceptions raised inside the learner's Function (matched on the message).
RAISED_HINTS = [
    ("values to unpack", "ctx.save_for_backward keeps only the tensors of its last call, and "
                         "ctx.saved_tensors returns them in the order saved: save everything in one "
                         "call, ctx.save_for_backward(x, W)."),
    ("save_for_backward can only save", "ctx.save_for_backward takes tensors only; keep a Python "
                                        "number as an attribute: ctx.scale = scale."),
    ("NoneType", "b may be None: then there is no bias to add (and backward returns None for it)."),
    ("incorrect number of gradients", "backward returns one value per input of forward, in order."),
    ("can't optimize a non-leaf Tensor", "the optimizer needs leaf tensors: make the shadow weights "
                                         "W_ = W.detach().clone().requires_grad_() (and b_ alike), "
                                         "and quantize W_ inside the loop, on every forward pass."),
]


def raised_hint(reply) -> str:
    if reply.status != "exception" or reply.exception is None:
        return ""
    return next((h for key, h in RAISED_HINTS if key in reply.exception.message), "")


def run(student, name, what, *args):
    """The driver's report for the learner's class, or a failed test for anything but a clean run."""
    reply = student.drive(name, driver(what), *args)
    student.result(name, reply, args, hint=raised_hint(reply))
    if not isinstance(reply.value, dict if what != "run_gradcheck" else str):
        fail(f"{name}: the grader could not read what your class returned.")
    return reply.value


# ---------------------------------------------------------------------------
# LinearFunction

LINEAR_INPUTS = ("x", "W", "b")


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
    x, W, b = (t.detach() if t is not None else None for t in inputs)
    g = grad_out
    if i == 0:
        return {"grad_x = grad_out @ W, of shape (N, in); grad_out @ W.T is not it (it only has the "
                "right shape when W is square).": lambda: g @ W.T,
                "that is grad_W: backward returns (grad_x, grad_W, grad_b) in the order of forward's "
                "inputs.": lambda: g.T @ x}
    if i == 1:
        return {"grad_W = grad_out.T @ x has W's shape (out, in); x.T @ grad_out is its "
                "transpose.": lambda: x.T @ g,
                "that is grad_x: backward returns (grad_x, grad_W, grad_b) in the order of forward's "
                "inputs.": lambda: g @ W}
    return {"grad_b has b's shape (out,): sum grad_out over the batch, grad_out.sum(0).": lambda: g,
            "grad_b is the sum over the batch, not the mean: grad_out.sum(0).": lambda: g.mean(0)}


def check_linear(student, inputs, grad_out, what):
    expected_out, expected = linear_expected(inputs, grad_out)
    report = run(student, "LinearFunction", "run_function", inputs, grad_out)
    x, W = inputs[0].detach(), inputs[1].detach()
    b = inputs[2].detach() if inputs[2] is not None else None
    expect_tensor(report.get("out"), expected_out, f"LinearFunction.apply(x, W, b) ({what})", mistakes={
        "y = x @ W.T + b: W is (out, in), so it must be transposed.": lambda: x @ W + (0 if b is None else b)})
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
        expect_tensor(got, want, label, mistakes=linear_mistakes(inputs, grad_out, i))


@graded("LinearFunction", points=1, visible=True)
def test_LinearFunction_forward(student):
    """forward equals F.linear (square W) and the output's grad_fn is LinearFunctionBackward"""
    inputs, g = linear_inputs(5, 4, 4, seed=700)
    check_linear(student, inputs, g, "square W, float32")


@graded("LinearFunction", points=1, visible=True)
def test_LinearFunction_backward_float32(student):
    """backward returns (grad_x, grad_W, grad_b) equal to autograd's for F.linear (float32)"""
    inputs, g = linear_inputs(6, 3, 2, seed=710)
    check_linear(student, inputs, g, "x (6, 3), W (2, 3), float32")


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
    """forward keeps its tensors with ctx.save_for_backward, not as attributes of ctx"""
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
    }


def backward_mistakes(w, scale, g):
    ratio = w / scale
    k = torch.round(ratio)

    def where(inside):
        return torch.where(inside, g, torch.zeros_like(g))
    return {
        "that is the true derivative of round (0 almost everywhere): nothing could train through "
        "it. Use the straight-through estimator: grad_out where -128 <= round(w / scale) <= 127.":
            lambda: torch.zeros_like(g),
        "outside the range clamp cuts w off: pass 0 where round(w / scale) < -128 or > 127.": lambda: g,
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
    }


def check_fake_quantize(student, w, scale, what, grad_out=None):
    w = w.detach().requires_grad_()
    report = run(student, "FakeQuantize", "run_function", (w, scale), grad_out)
    wd = w.detach()
    expect_tensor(report.get("out"), quantize(wd, scale),
                  f"FakeQuantize.apply(w, scale={scale}) ({what})", mistakes=forward_mistakes(wd, scale))
    if grad_out is None:
        return
    if report.get("node") != "FakeQuantizeBackward":
        fail(f"the output of FakeQuantize.apply has grad_fn {report.get('node')}; expected "
             "FakeQuantizeBackward.")
    grads = report.get("grads")
    if not isinstance(grads, (tuple, list)) or len(grads) != 2:
        n = f"{len(grads)} values" if isinstance(grads, (tuple, list)) else "a single value"
        fail(f"FakeQuantize.backward returned {n} ({what}); it must return 2, (grad_w, None): "
             "one per input of forward, None for scale.")
    expect_tensor(grads[0], ste(wd, scale, grad_out), f"grad_w from FakeQuantize.backward ({what})",
                  mistakes=backward_mistakes(wd, scale, grad_out))
    if grads[1] is not None:
        fail(f"FakeQuantize.backward returned a {type(grads[1]).__name__} for scale; return None: "
             "scale is a Python float, not a tensor, and autograd has no gradient to give it.")


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
    check_fake_quantize(student, rand(6, 5, seed=800, low=-3, high=3), 0.03, "2-D w, float32")


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
                    lr=lr)

    def fake_quantize(t):
        k = torch.round(t.detach() / scale)
        inside = ((k >= -128) & (k <= 127)).to(t.dtype)
        return quantize(t.detach(), scale) + (t - t.detach()) * inside

    def forward():
        if mistake == "float":
            return F.linear(x, W_, b_)
        return F.linear(x, fake_quantize(W_), fake_quantize(b_) if mistake == "bias" else b_)

    losses = []
    for _ in range(steps):
        if mistake != "no_zero_grad":
            optimizer.zero_grad()
        loss = F.mse_loss(forward(), y, reduction="sum" if mistake == "sum" else "mean")
        if mistake != "after":
            losses.append(loss.item())
        loss.backward()
        optimizer.step()
        if mistake == "requantize":
            with torch.no_grad():
                W_.copy_(quantize(W_, scale))
        if mistake == "after":
            with torch.no_grad():
                losses.append(F.mse_loss(forward(), y).item())
    return W_.detach(), b_.detach(), losses


TRAIN_MISTAKES = {
    "no_zero_grad": "zero the gradients before every backward (optimizer.zero_grad()): backward "
                    "adds into .grad, so the steps used the sum of all gradients so far.",
    "after": "record each loss before the step that follows it (losses[0] is the loss of the "
             "starting weights).",
    "float": "the forward pass must use the quantized weight, FakeQuantize.apply(W_, scale), not "
             "the float shadow weight.",
    "requantize": "keep the shadow weight in floats: rounding it back to the grid after every step "
                  "throws away every update smaller than half a grid step.",
    # before "inputs": after one step both leave b as it was, but only this one trains W
    "frozen_bias": "the bias trains too: make b_ a leaf that requires grad, "
                   "b_ = b.detach().clone().requires_grad_().",
    "inputs": "the optimizer must update the shadow weights, torch.optim.SGD([W_, b_], lr=lr): "
              "the loss is computed from W_ and b_, so W and b themselves get no gradient.",
    "sum": "the loss is the mean squared error, F.mse_loss(prediction, y): the mean of the squared "
           "errors over all entries, not their sum.",
    "bias": "quantize only the weight: LinearFunction.apply(x, FakeQuantize.apply(W_, scale), b_), "
            "with the bias b_ in floats.",
}


def check_training(student, x, y, W, b, scale, lr, steps, what):
    reply = student.call("train_quantized", x, y, W, b, scale, lr, steps)
    value = student.result("train_quantized", reply, (x, y, W, b, scale, lr, steps),
                           hint=raised_hint(reply))
    call = f"train_quantized(x, y, W, b, scale={scale}, lr={lr}, steps={steps}) ({what})"
    if not isinstance(value, (tuple, list)) or len(value) != 3:
        kind = value.type_name if isinstance(value, Unsupported) else type(value).__name__
        fail(f"{call} returned a {kind}; expected (W_trained, b_trained, losses).")
    W_got, b_got, losses = value
    W_want, b_want, losses_want = reference_training(x, y, W, b, scale, lr, steps)
    wrong = {hint: reference_training(x, y, W, b, scale, lr, steps, mistake=m)
             for m, hint in TRAIN_MISTAKES.items()}
    if not isinstance(losses, (list, tuple)) or len(losses) != steps:
        fail(f"losses from {call} should be a list of {steps} floats, one per step; got "
             f"{len(losses) if isinstance(losses, (list, tuple)) else type(losses).__name__}"
             f"{' items' if isinstance(losses, (list, tuple)) else ''}.")
    if not all(type(v) is float for v in losses):
        kinds = sorted({type(v).__name__ for v in losses if type(v) is not float})
        fail(f"losses from {call} should be Python floats; some are {', '.join(kinds)}: append "
             "loss.item().")
    expect_tensor(torch.tensor(losses, dtype=F64), torch.tensor(losses_want, dtype=F64),
                  f"losses from {call}", mistakes={h: (lambda v=v: torch.tensor(v[2], dtype=F64))
                                                   for h, v in wrong.items()})
    quantized_hint = {"return the shadow weight W_ itself, not its quantized value.":
                      lambda: quantize(W_want, scale)}
    expect_tensor(W_got, W_want, f"W_trained from {call}",
                  mistakes=quantized_hint | {h: (lambda v=v: v[0]) for h, v in wrong.items()})
    expect_tensor(b_got, b_want, f"b_trained from {call}",
                  mistakes={h: (lambda v=v: v[1]) for h, v in wrong.items()})


def training_data(n, n_in, n_out, seed, dtype=F32, spread=1.0):
    x = rand(n, n_in, seed=seed, dtype=dtype)
    y = rand(n, n_out, seed=seed + 1, dtype=dtype)
    W = rand(n_out, n_in, seed=seed + 2, dtype=dtype, low=-spread, high=spread)
    b = rand(n_out, seed=seed + 3, dtype=dtype)
    return x, y, W, b


@graded("train_quantized", points=1, visible=True)
def test_train_quantized_matches_pytorch(student):
    """the trained shadow weights and bias equal the same loop written with PyTorch's ops"""
    check_training(student, *training_data(16, 3, 2, seed=900), 0.05, 0.1, 6, "float32")


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
    def __init__(self, every_namespace=False):
        super().__init__()
        self.every_namespace = every_namespace
        self.names = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if self.every_namespace or func.namespace == "aten":
            self.names.append(str(func))
        return func(*args, **(kwargs or {}))


def reference_ops(name, args, every_namespace=False):
    scope = {"torch": torch, "NAMED": {}}
    exec(compile(PROGRAMS, "<programs>", "exec"), scope)
    fn = scope[name](*args)
    with _Reference(every_namespace) as mode:
        fn()
    return mode.names


def check_ops(student, name, *args, label):
    got = student.record_ops(Recipe(PROGRAMS, name, args, label=label))
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
        return
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
    ]
    hint = next((h for c, h in candidates if got == c and c != expected), "")
    shown = lambda ops: f"{ops[:12]}{' ...' if len(ops) > 12 else ''} ({len(ops)} entries)"
    fail(f"{what} returned {shown(got)}; expected {shown(expected)}."
         f"{chr(10) + 'Hint: ' + hint if hint else ''}")


@graded("record_ops", points=1, visible=True)
def test_record_ops_in_order_with_repeats(student):
    """arithmetic on tensors: every aten operator in order, repeats kept"""
    check_ops(student, "arithmetic", label="lambda: ((a * c + a) * c).sum()")


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

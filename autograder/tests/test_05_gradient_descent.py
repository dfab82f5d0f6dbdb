"""Hidden tests: 05_gradient_descent (what optimizer.step() does).

The expected values come from PyTorch's SGD update (autograder/tests/optim.py, equal to
torch.optim.SGD bit for bit) run here, on copies of the same tensors.
sgd_step works in place, so its result is read from the arguments after the call
(`reply.args_after`), where `.info.origin` tells whether each entry is still the very
tensor object that was passed in.
"""

import pytest
import torch

from autograder.grade.compare import _close, expect_tensor, fail
from autograder.tests.data import rand
from autograder.tests.optim import SGD
from autograder.tests.repeat import again
from autograder.jail.inside.wire import Recipe, Unsupported

ASSIGNMENT = "05_gradient_descent"
graded = pytest.mark.graded

F32, F64 = torch.float32, torch.float64


# ---------------------------------------------------------------------------
# sgd_step

def make_params(shapes, seed, dtype=F32, without_grad=()):
    """Leaf tensors that require grad, each with a .grad (except the indices in without_grad)."""
    params = []
    for i, shape in enumerate(shapes):
        p = rand(*shape, seed=seed + i, dtype=dtype).requires_grad_()
        if i not in without_grad:
            p.grad = rand(*shape, seed=seed + 100 + i, dtype=dtype)
        params.append(p)
    return params


def torch_sgd(params, lr):
    """SGD(params, lr).step() on copies: the values each parameter should get."""
    copies = []
    for p in params:
        c = p.detach().clone().requires_grad_()
        c.grad = None if p.grad is None else p.grad.clone()
        copies.append(c)
    SGD(copies, lr=lr).step()
    return [c.detach() for c in copies]


NO_GRAD_MODE = ("update under `with torch.no_grad():`. Autograd refuses an in-place change of a "
                "leaf that requires grad while it is recording.")


def call_sgd_step(student, params, lr):
    """The parameters after the learner's sgd_step (decoded, with .info), or a failed test."""
    reply = student.call("sgd_step", params, lr)
    hint = ""
    if reply.status == "exception":
        message = reply.exception.message
        if "in-place operation" in message:
            hint = NO_GRAD_MODE
        elif "NoneType" in message and any(p.grad is None for p in params):
            hint = "skip the tensors whose .grad is None, as torch.optim.SGD does."
    student.result("sgd_step", reply, (params, lr), hint=hint)
    after = reply.args_after[0] if reply.args_after else None
    if not isinstance(after, list) or len(after) != len(params):
        fail(f"sgd_step(params, lr={lr}) changed the list itself (it now holds "
             f"{len(after) if isinstance(after, list) else after!r} items); update the tensors "
             "in it, in place, and leave the list alone.")
    return reply, after


def step_mistakes(params, lr, expected) -> dict[str, list[torch.Tensor]]:
    """hint -> the whole list of parameters that mistake leaves (a hint is given only when every
    parameter is that mistake's value: one unchanged tensor alone says nothing about why)."""
    before = [p.detach() for p in params]
    moved = [i for i, p in enumerate(params) if p.grad is not None]
    out = {
        "the parameters did not change: the update must change each tensor p itself, in place "
        "(`p -= lr * p.grad` inside `with torch.no_grad():`). `p = p - lr * p.grad` only points "
        "the local name p at a new tensor, and changing p.grad or a copy of p leaves p as it "
        "was.": before,
        "sign error: step against the gradient, p - lr * p.grad (with + the loss goes up).":
            [b + lr * p.grad if p.grad is not None else b for b, p in zip(before, params)],
        "the learning rate is missing: p - lr * p.grad.":
            [b - p.grad if p.grad is not None else b for b, p in zip(before, params)],
        "the gradient is divided by the learning rate: the step is lr * p.grad, multiplied.":
            [b - p.grad / lr if p.grad is not None else b for b, p in zip(before, params)],
    }
    none_at = next((i for i, p in enumerate(params) if p.grad is None), None)
    if none_at is not None and any(i > none_at for i in moved):
        out["the loop stopped at the first tensor whose .grad is None (`break`, or a `return`): "
            "skip that tensor with `continue` and go on with the rest, as torch.optim.SGD "
            "does."] = expected[:none_at] + before[none_at:]
    if len(moved) > 1 and moved[0] == 0:
        out["only the first parameter was updated: a `return` (or `break`) inside the loop ends "
            "it after params[0]. Update every tensor in the list; return after the loop."] = \
            expected[:1] + before[1:]
        out["params[0] was not updated while the others were: loop over every tensor in the list "
            "(`for p in params:`; range(len(params)) starts at 0)."] = before[:1] + expected[1:]
    return out


def step_hint(after, expected, mistakes) -> dict[str, list[torch.Tensor]]:
    """The mistakes whose whole list the learner's parameters are: one, or all of several."""
    def same(values):
        return all(isinstance(g, torch.Tensor) and _close(g.to(v.dtype), v)
                   for g, v in zip(after, values))
    matches = [h for h, values in mistakes.items() if same(values) and not all(
        _close(v, e) for v, e in zip(values, expected))]
    if len(matches) > 1:
        return {"on these parameters more than one mistake gives this result: " + " Or: ".join(
            f"({i}) {h}" for i, h in enumerate(matches, 1)): mistakes[matches[0]]}
    return {h: mistakes[h] for h in matches}


def check_values(student, params, lr, what):
    expected = torch_sgd(params, lr)
    _, after = call_sgd_step(student, params, lr)
    for i, got in enumerate(after):
        if not isinstance(got, torch.Tensor):
            kind = got.type_name if isinstance(got, Unsupported) else type(got).__name__
            fail(f"after sgd_step, params[{i}] is a {kind}; it must stay the tensor it was.")
    hint = step_hint(after, expected, step_mistakes(params, lr, expected))
    for i, (got, want) in enumerate(zip(after, expected)):
        expect_tensor(got, want, f"params[{i}] after sgd_step(params, lr={lr}) ({what})",
                      mistakes={h: (lambda values=values, i=i: values[i]) for h, values in hint.items()})
    return after


@graded("sgd_step", points=1, visible=True)
def test_sgd_step_values(student):
    """the parameters of a 2-layer network after one step equal torch.optim.SGD's"""
    params = make_params([(4, 3), (4,), (2, 4), (2,)], seed=10)
    again(check_values, student, params, 0.1, "a 2-layer network", name="sgd_step")


def check_same_leaves(after):
    """Fail unless every entry is still the tensor object passed in, a leaf that requires grad."""
    for i, t in enumerate(after):
        info = getattr(t, "info", None)
        same = info is not None and info.origin is not None and info.origin == f"arg0[{i}]"
        if not same:
            detail = ""
            if info is not None:
                grad_fn = f", grad_fn={info.grad_fn}" if info.grad_fn else ""
                detail = f" (now a new tensor: is_leaf={info.is_leaf}{grad_fn})"
            fail(f"after sgd_step, params[{i}] is no longer the tensor that was passed in"
                 f"{detail}. `params[i] = params[i] - lr * params[i].grad` puts a new tensor in "
                 "the list: the model keeps the old one, and the new one is not a leaf, so the "
                 "next backward() would not fill its .grad. Update each tensor in place instead "
                 "(`p -= lr * p.grad` under torch.no_grad()).")
        if not info.is_leaf or info.grad_fn is not None or not info.requires_grad:
            fail(f"after sgd_step, params[{i}] is_leaf={info.is_leaf}, grad_fn={info.grad_fn}, "
                 f"requires_grad={info.requires_grad}; it must stay a leaf that requires grad.")


@graded("sgd_step", points=1, visible=True)
def test_sgd_step_same_leaves(student):
    """every parameter stays the same leaf tensor (same object, is_leaf, no grad_fn)"""
    params = make_params([(3, 2), (3,), (5,)], seed=20)
    _, after = call_sgd_step(student, params, 0.05)
    check_same_leaves(after)


@graded("sgd_step", points=1, visible=True)
def test_sgd_step_skips_missing_grad(student):
    """tensors whose .grad is None are skipped and left untouched"""
    params = make_params([(3,), (2, 2), (4,)], seed=30, without_grad=(1,))
    after = check_values(student, params, 0.2, "params[1].grad is None")
    if after[1].info.grad is not None:
        fail("after sgd_step, params[1].grad is no longer None; leave tensors without a "
             "gradient alone.")


@graded("sgd_step", points=1)
def test_sgd_step_float64(student):
    """float64 parameters of several shapes (a scalar, a 3-D tensor), another learning rate"""
    params = make_params([(), (2, 3, 4), (7,)], seed=40, dtype=F64)
    check_values(student, params, 0.37, "float64")


@graded("sgd_step", points=1, visible=True)
def test_sgd_step_keeps_grad(student):
    """.grad is left as it was (clearing it is zero_grad()'s job)"""
    params = make_params([(4, 2), (4,)], seed=50)
    _, after = call_sgd_step(student, params, 0.1)
    check_same_leaves(after)  # a replaced entry has no .grad of its own to compare
    for i, (p, t) in enumerate(zip(params, after)):
        grad = t.info.grad if isinstance(t, torch.Tensor) and hasattr(t, "info") else None
        if grad is None:
            fail(f"after sgd_step, params[{i}].grad is None. torch.optim.SGD's step() leaves "
                 ".grad as it is; clearing it is optimizer.zero_grad()'s job, before the next "
                 "backward().")
        expect_tensor(grad, p.grad, f"params[{i}].grad after sgd_step", mistakes={
            "sgd_step scaled .grad in place (e.g. p.grad.mul_(lr)); compute lr * p.grad as a "
            "new tensor.": lambda p=p: 0.1 * p.grad,
            "sgd_step zeroed .grad; leave that to zero_grad().": lambda p=p: torch.zeros_like(p.grad),
        })


# Trusted: calls the learner's sgd_step with autograd on, then with it off, and reports the
# grad mode each call left behind (torch.optim's step() leaves it as it found it).
GRAD_MODE = '''
def grad_mode_after(sgd_step, params_on, params_off, lr):
    modes = []
    for enabled, params in ((True, params_on), (False, params_off)):
        torch.set_grad_enabled(enabled)
        try:
            sgd_step(params, lr)
            modes.append(torch.is_grad_enabled())
        finally:
            torch.set_grad_enabled(True)
    return modes
'''


@graded("sgd_step", points=1, visible=True)
def test_sgd_step_leaves_grad_mode(student):
    """autograd is on after sgd_step when it was on before, off when it was off (as optimizer.step())"""
    on, off = make_params([(3, 2), (2,)], seed=60), make_params([(4,)], seed=65)
    reply = student.drive("sgd_step", Recipe(GRAD_MODE, "grad_mode_after"), on, off, 0.1)
    hint = ""
    if reply.status == "exception" and "in-place operation" in reply.exception.message:
        hint = NO_GRAD_MODE
    modes = student.result("sgd_step", reply, (on, 0.1), hint=hint)
    if not (isinstance(modes, list) and len(modes) == 2):
        raise RuntimeError(f"authoring error: the grad-mode driver returned {modes!r}")
    if modes[0] is not True:
        fail("after sgd_step(params, lr), autograd is switched off (torch.is_grad_enabled() is "
             "False): sgd_step turned it off and did not turn it back on, so every backward() "
             "after it fails ('element 0 of tensors does not require grad'). optimizer.step() "
             "leaves grad mode as it found it: update under `with torch.no_grad():`, which "
             "restores it on exit, not after torch.set_grad_enabled(False).")
    if modes[1] is not False:
        fail("sgd_step(params, lr), called with autograd off (inside torch.no_grad()), switched "
             "it on (torch.is_grad_enabled() is True afterwards). optimizer.step() leaves grad "
             "mode as it found it: `with torch.no_grad():` restores the mode it found; "
             "torch.set_grad_enabled(True) at the end does not.")


# ---------------------------------------------------------------------------
# sgd_momentum_update

def one_step(p, g, buf, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False,
             mistake=None):
    """One step of PyTorch's SGD rule, or of a known mistake: (new_p, new_buf)."""
    d = g
    if weight_decay and mistake not in ("no_weight_decay", "late_weight_decay"):
        d = g + weight_decay * p
    scale = lr if mistake == "lr_in_buffer" else 1.0
    if momentum:
        if buf is None:
            buf = (1 - dampening) * d * scale if mistake == "damp_first" else d.clone() * scale
        elif mistake == "no_dampening":
            buf = momentum * buf + d * scale
        elif mistake == "dampening_swapped":
            buf = momentum * buf + dampening * d * scale
        else:
            buf = momentum * buf + (1 - dampening) * d * scale
        if nesterov and mistake == "nesterov_ignored":
            step = buf
        elif nesterov:
            step = d * scale + momentum * buf
        else:
            step = buf
    else:
        step, buf = d, None
    if mistake == "late_weight_decay":
        step = step + weight_decay * p
    if mistake == "lr_in_buffer":
        return p - step, buf
    if mistake == "sign":
        return p + lr * step, buf
    return p - lr * step, buf


# hint for each mistake, in the order they are tried (late weight decay before missing weight
# decay: both leave g out of the buffer, only the first also leaves it out of the step).
# Using the old buffer in the Nesterov step is not listed apart: with dampening 0 (which Nesterov
# requires) g + momentum * old_buf equals the new buffer, i.e. "nesterov ignored"; its hint names both.
MISTAKES = {
    "damp_first": "on the first step the buffer is a plain copy of the gradient, buf = "
                  "g.clone(); dampening applies only from the second step on.",
    "sign": "sign error: step against the gradient, new_p = p - lr * step (with + the loss "
            "goes up).",
    "late_weight_decay": "weight decay goes into the gradient before the momentum buffer "
                         "(g = grad + weight_decay * p), not into the final step.",
    "no_weight_decay": "weight decay is missing: start from g = grad + weight_decay * p.",
    "nesterov_ignored": "with nesterov=True the step is g + momentum * buf, with the buffer just "
                        "updated by this step's g (on the first step buf = g, so the step is "
                        "(1 + momentum) * g): not buf alone, and not the previous buffer.",
    "lr_in_buffer": "PyTorch's buffer holds gradients, not steps: buf = momentum * buf + "
                    "(1 - dampening) * g, and lr multiplies only in new_p = p - lr * step.",
    "dampening_swapped": "the gradient enters the buffer as (1 - dampening) * g, not dampening * g: "
                         "buf = momentum * buf + (1 - dampening) * g (with dampening=0, the "
                         "default, g counts fully).",
    "no_dampening": "dampening is missing: from the second step on, buf = momentum * buf + "
                    "(1 - dampening) * g.",
}


def _settings(options) -> str:
    return ", ".join(f"{k}={v}" for k, v in options.items()) or "momentum=0"


def check_momentum(student, p0, grads, lr, **options):
    """Call sgd_momentum_update step after step, feeding back its own results, against SGD."""
    q = p0.clone().requires_grad_()
    optimizer = SGD([q], lr=lr, **options)
    p, buf = p0.clone(), None
    for k, g in enumerate(grads, 1):
        call = (f"step {k} of sgd_momentum_update(p, grad, buf, lr={lr}, {_settings(options)})"
                f"{' (buf is None)' if buf is None else ''}")
        value = student.sgd_momentum_update(p, g, buf, lr, **options)
        q.grad = g.clone()
        optimizer.step()
        want_p = q.detach().clone()
        want_buf = optimizer.state[q].get("momentum_buffer") if options.get("momentum") else None
        if not isinstance(value, (tuple, list)) or len(value) != 2:
            kind = value.type_name if isinstance(value, Unsupported) else type(value).__name__
            fail(f"{call} returned a {kind}; expected a pair (new_p, new_buf).")
        new_p, new_buf = value
        swapped = isinstance(new_buf, torch.Tensor) and _close(new_buf, want_p) and (
            new_p is None if want_buf is None
            else isinstance(new_p, torch.Tensor) and _close(new_p, want_buf))
        if swapped:
            fail(f"{call} returned (new_buf, new_p), the pair the wrong way round: return "
                 "(new_p, new_buf), in that order.")
        wrong = {MISTAKES[m]: one_step(p, g, buf, lr, **options, mistake=m) for m in MISTAKES}
        expect_tensor(new_p, want_p, f"new_p at {call}",
                      mistakes={h: (lambda v=v: v[0]) for h, v in wrong.items()})
        if want_buf is None:
            if new_buf is not None:
                fail(f"new_buf at {call} is {'a tensor' if isinstance(new_buf, torch.Tensor) else repr(new_buf)}; "
                     "with momentum=0 there is no buffer: return None.")
        else:
            if new_buf is None:
                fail(f"new_buf at {call} is None; with momentum={options['momentum']} return "
                     "the updated buffer (the next call gets it back as buf).")
            expect_tensor(new_buf, want_buf.clone(), f"new_buf at {call}",
                          mistakes={h: (lambda v=v: v[1]) for h, v in wrong.items()
                                    if v[1] is not None})
        p, buf = new_p.clone(), None if new_buf is None else new_buf.clone()


def grads_for(shape, steps, seed, dtype=F32):
    return [rand(*shape, seed=seed + k, dtype=dtype) for k in range(1, steps + 1)]


@graded("sgd_momentum_update", points=1, visible=True)
def test_momentum_plain(student):
    """momentum=0.9: five steps match torch.optim.SGD, buffer included"""
    again(check_momentum, student, rand(5, seed=60), grads_for((5,), 5, 60), 0.1, momentum=0.9,
          name="sgd_momentum_update")


@graded("sgd_momentum_update", points=1, visible=True)
def test_momentum_zero(student):
    """momentum=0 is plain SGD and the buffer stays None (with and without weight decay)"""
    check_momentum(student, rand(4, seed=70), grads_for((4,), 3, 70), 0.2)
    check_momentum(student, rand(3, 2, seed=75), grads_for((3, 2), 3, 75), 0.05, weight_decay=0.1)


@graded("sgd_momentum_update", points=1, visible=True)
def test_momentum_dampening(student):
    """dampening=0.5: the first step copies the gradient, later steps are dampened"""
    check_momentum(student, rand(6, seed=80), grads_for((6,), 4, 80), 0.1, momentum=0.9,
                   dampening=0.5)


@graded("sgd_momentum_update", points=1, visible=True)
def test_momentum_weight_decay(student):
    """weight_decay=0.1 and 1 with momentum: decay enters the gradient before the buffer"""
    check_momentum(student, rand(5, seed=90, low=-3, high=3), grads_for((5,), 4, 90), 0.1,
                   momentum=0.9, weight_decay=0.1)
    check_momentum(student, rand(3, seed=95), grads_for((3,), 2, 95), 0.1, momentum=0.5,
                   weight_decay=1.0)


@graded("sgd_momentum_update", points=1, visible=True)
def test_momentum_nesterov(student):
    """nesterov=True: the step is g + momentum * buf"""
    check_momentum(student, rand(5, seed=100), grads_for((5,), 4, 100), 0.1, momentum=0.9,
                   nesterov=True)


@graded("sgd_momentum_update", points=1)
def test_momentum_combined_float64(student):
    """float64 2-D parameters with every option combined"""
    check_momentum(student, rand(3, 4, seed=110, dtype=F64), grads_for((3, 4), 5, 110, F64),
                   0.03, momentum=0.8, dampening=0.3, weight_decay=0.05)
    check_momentum(student, rand(2, 3, seed=120, dtype=F64), grads_for((2, 3), 5, 120, F64),
                   0.07, momentum=0.5, weight_decay=0.01, nesterov=True)


@graded("sgd_momentum_update", points=1, visible=True)
def test_momentum_pure(student):
    """p, grad and buf are left unchanged (the function is pure)"""
    p, g, buf = rand(4, seed=130), rand(4, seed=131), rand(4, seed=132)
    for options in ({"momentum": 0.9, "dampening": 0.1, "weight_decay": 0.1},
                    {"momentum": 0.9, "nesterov": True}, {"weight_decay": 0.2}):
        reply = student.call("sgd_momentum_update", p, g, buf if options.get("momentum") else None,
                             0.1, **options)
        if reply.mutated:
            fail(f"sgd_momentum_update(p, grad, buf, lr, {_settings(options)}) changed "
                 f"{', '.join(reply.mutated)} in place. It must be pure: build new tensors "
                 "(`momentum * buf + g`, not `buf.mul_(momentum).add_(g)`; `p - lr * step`, "
                 "not `p -= ...`).")
        student.result("sgd_momentum_update", reply, (p, g, buf, 0.1), options)
    # the first buffer must be a copy of the gradient, not the grad tensor itself
    reply = student.call("sgd_momentum_update", p, g, None, 0.1, momentum=0.9)
    value = student.result("sgd_momentum_update", reply, (p, g, None, 0.1), {"momentum": 0.9})
    new_buf = value[1] if isinstance(value, (tuple, list)) and len(value) == 2 else None
    info = getattr(new_buf, "info", None) if isinstance(new_buf, torch.Tensor) else None
    if info is not None and "arg1" in (info.origin, info.shares):
        what = "the grad tensor itself" if info.origin == "arg1" else \
            "a tensor sharing the grad tensor's memory (a view, or grad.detach())"
        fail(f"sgd_momentum_update(p, grad, None, lr, momentum=0.9) returned as new_buf {what}, "
             "not a copy: buf = g.clone() on the first step, as torch.optim.SGD does. Otherwise "
             "the buffer and the gradient are one piece of memory, and a later in-place change "
             "of the gradient (optimizer.zero_grad(set_to_none=False), then backward() adding "
             "into .grad) changes the buffer too.")

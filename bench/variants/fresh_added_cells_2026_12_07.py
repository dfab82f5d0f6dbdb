"""Correct by-hand answers in learner idioms for 02 (activation functions), 05 (gradient descent) and
07 (custom autograd), a held-out probe of what the grader accepts.

Written from the release notebooks alone (exercise text, *What you may use*, def lines, docstrings).
Two families:
(a) 07's `LinearFunction` and `FakeQuantize` with forwards in varied honest spellings (F.linear,
    torch.addmm, x.mm(W.t()), x @ W.T, torch.matmul, torch.round/clamp, tensor-method chains,
    helper staticmethods computing with torch, ctx attributes such as ctx.scale / ctx.has_bias,
    @once_differentiable) and backwards written by hand from the notebook's formulas;
(b) 02 / 05 answers that read constants or tables built by an ADDED cell just above the answer
    cell in learner-ish ways: a dict filled entry by entry, a list grown with .append / .extend,
    a helper function called to fill a global (by mutation and by return), dict.update(...),
    and a constant computed by a small loop.
(`ctx.mark_non_differentiable` is not used: neither Function has a non-differentiable output.)

Each entry: {"assignment", "function" (the answer cell's grade_id), "style", "added" (a helper cell
the learner added just above the answer cell, or ""), "code" (the whole answer cell)}.
"""

VARIANTS = [
    # ------------------------------------------------------------------ 07 LinearFunction
    dict(
        assignment="07_custom_autograd", function="LinearFunction",
        style="forward with F.linear; ctx.has_bias attribute; backward with grad_out.mm(W), grad_out.t().mm(x), sum(0)",
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
        grad_x = grad_W = grad_b = None
        if ctx.needs_input_grad[0]:
            grad_x = grad_out.mm(W)
        if ctx.needs_input_grad[1]:
            grad_W = grad_out.t().mm(x)
        if ctx.has_bias and ctx.needs_input_grad[2]:
            grad_b = grad_out.sum(0)
        return grad_x, grad_W, grad_b
''',
    ),
    dict(
        assignment="07_custom_autograd", function="LinearFunction",
        style="forward with torch.addmm(b, x, W.t()) or x.mm(W.t()) without bias; needs_input_grad unpacked "
              "into three names; backward with torch.mm and torch.sum(dim=0)",
        added="",
        code=r'''class LinearFunction(torch.autograd.Function):
    """y = x W^T + b for x (N, in), W (out, in), b (out,) or None, with a backward written by hand."""

    @staticmethod
    def forward(ctx, x, W, b):
        """Return x @ W.T + b (no bias when b is None); save what backward needs in ctx."""
        ctx.save_for_backward(x, W)
        ctx.bias_given = b is not None
        if b is None:
            return x.mm(W.t())
        return torch.addmm(b, x, W.t())

    @staticmethod
    def backward(ctx, grad_out):
        """Return (grad_x, grad_W, grad_b) = (grad_out W, grad_out^T x, grad_out summed over the batch).

        None for each input with ctx.needs_input_grad False, and for b when it is None. No autograd here.
        """
        x, W = ctx.saved_tensors
        need_x, need_W, need_b = ctx.needs_input_grad
        grad_x = torch.mm(grad_out, W) if need_x else None
        grad_W = torch.mm(grad_out.t(), x) if need_W else None
        grad_b = torch.sum(grad_out, dim=0) if (need_b and ctx.bias_given) else None
        return grad_x, grad_W, grad_b
''',
    ),
    dict(
        assignment="07_custom_autograd", function="LinearFunction",
        style="x @ W.T then `out = out + b`; b itself saved with save_for_backward (None allowed); "
              "backward with @ and .T, a list of three Nones filled by index, returned as a tuple",
        added="",
        code=r'''class LinearFunction(torch.autograd.Function):
    """y = x W^T + b for x (N, in), W (out, in), b (out,) or None, with a backward written by hand."""

    @staticmethod
    def forward(ctx, x, W, b):
        """Return x @ W.T + b (no bias when b is None); save what backward needs in ctx."""
        ctx.save_for_backward(x, W, b)
        out = x @ W.T
        if b is not None:
            out = out + b
        return out

    @staticmethod
    def backward(ctx, grad_out):
        """Return (grad_x, grad_W, grad_b) = (grad_out W, grad_out^T x, grad_out summed over the batch).

        None for each input with ctx.needs_input_grad False, and for b when it is None. No autograd here.
        """
        x, W, b = ctx.saved_tensors
        grads = [None, None, None]
        if ctx.needs_input_grad[0]:
            grads[0] = grad_out @ W
        if ctx.needs_input_grad[1]:
            grads[1] = grad_out.T @ x
        if b is not None and ctx.needs_input_grad[2]:
            grads[2] = grad_out.sum(dim=0)
        return tuple(grads)
''',
    ),
    dict(
        assignment="07_custom_autograd", function="LinearFunction",
        style="torch.matmul with W.transpose(0, 1); helper staticmethods (affine, weight_grad) computing with torch; "
              "@once_differentiable on backward; annotations",
        added="",
        code=r'''from torch.autograd.function import once_differentiable


class LinearFunction(torch.autograd.Function):
    """y = x W^T + b for x (N, in), W (out, in), b (out,) or None, with a backward written by hand."""

    @staticmethod
    def affine(x: torch.Tensor, W: torch.Tensor, b) -> torch.Tensor:
        y = torch.matmul(x, W.transpose(0, 1))
        return y if b is None else y + b

    @staticmethod
    def weight_grad(grad_out: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return torch.matmul(grad_out.transpose(0, 1), x)

    @staticmethod
    def forward(ctx, x, W, b):
        """Return x @ W.T + b (no bias when b is None); save what backward needs in ctx."""
        ctx.save_for_backward(x, W)
        ctx.no_bias = b is None
        return LinearFunction.affine(x, W, b)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out):
        """Return (grad_x, grad_W, grad_b) = (grad_out W, grad_out^T x, grad_out summed over the batch).

        None for each input with ctx.needs_input_grad False, and for b when it is None. No autograd here.
        """
        x, W = ctx.saved_tensors
        grad_x = torch.matmul(grad_out, W) if ctx.needs_input_grad[0] else None
        grad_W = LinearFunction.weight_grad(grad_out, x) if ctx.needs_input_grad[1] else None
        grad_b = None
        if not ctx.no_bias and ctx.needs_input_grad[2]:
            grad_b = grad_out.sum(0)
        return grad_x, grad_W, grad_b
''',
    ),
    dict(
        assignment="07_custom_autograd", function="LinearFunction",
        style="forward with torch.mm plus b.unsqueeze(0).expand_as(y); ctx.shapes attribute "
              "and asserts on shapes in backward; zip over needs_input_grad to blank unwanted grads",
        added="",
        code=r'''class LinearFunction(torch.autograd.Function):
    """y = x W^T + b for x (N, in), W (out, in), b (out,) or None, with a backward written by hand."""

    @staticmethod
    def forward(ctx, x, W, b):
        """Return x @ W.T + b (no bias when b is None); save what backward needs in ctx."""
        ctx.save_for_backward(x, W)
        ctx.shapes = (tuple(x.shape), tuple(W.shape), None if b is None else tuple(b.shape))
        y = torch.mm(x, W.t())
        if b is not None:
            y = y + b.unsqueeze(0).expand_as(y)
        return y

    @staticmethod
    def backward(ctx, grad_out):
        """Return (grad_x, grad_W, grad_b) = (grad_out W, grad_out^T x, grad_out summed over the batch).

        None for each input with ctx.needs_input_grad False, and for b when it is None. No autograd here.
        """
        x, W = ctx.saved_tensors
        x_shape, W_shape, b_shape = ctx.shapes
        full = [grad_out.mm(W), grad_out.t().mm(x), None if b_shape is None else grad_out.sum(dim=0)]
        assert full[0].shape == x_shape and full[1].shape == W_shape
        return tuple(g if wanted else None for g, wanted in zip(full, ctx.needs_input_grad))
''',
    ),
    # ------------------------------------------------------------------ 07 FakeQuantize
    dict(
        assignment="07_custom_autograd", function="FakeQuantize",
        style="torch.round / torch.clamp / multiply; w saved, ctx.scale attribute; backward recomputes round(w/s), "
              "mask with & of two comparisons, torch.where against zeros_like",
        added="",
        code=r'''class FakeQuantize(torch.autograd.Function):
    """Round w to the int8 grid of step scale (forward); pass the gradient straight through (backward)."""

    @staticmethod
    def forward(ctx, w, scale):
        """Return scale * clamp(round(w / scale), -128, 127), in w's dtype; save what backward needs."""
        ctx.save_for_backward(w)
        ctx.scale = scale
        q = torch.clamp(torch.round(w / scale), -128, 127)
        return (q * scale).to(w.dtype)

    @staticmethod
    def backward(ctx, grad_out):
        """Return (grad_w, None): grad_out where -128 <= round(w / scale) <= 127, else 0; None for scale."""
        (w,) = ctx.saved_tensors
        r = torch.round(w / ctx.scale)
        inside = (r >= -128) & (r <= 127)
        return torch.where(inside, grad_out, torch.zeros_like(grad_out)), None
''',
    ),
    dict(
        assignment="07_custom_autograd", function="FakeQuantize",
        style="tensor-method chain w.div(scale).round().clamp(-128, 127).mul(scale); the rounded tensor itself "
              "saved; ctx.qmin / ctx.qmax attributes; mask as a float factor multiplied in",
        added="",
        code=r'''class FakeQuantize(torch.autograd.Function):
    """Round w to the int8 grid of step scale (forward); pass the gradient straight through (backward)."""

    @staticmethod
    def forward(ctx, w, scale):
        """Return scale * clamp(round(w / scale), -128, 127), in w's dtype; save what backward needs."""
        ctx.qmin, ctx.qmax = -128, 127
        rounded = w.div(scale).round()
        ctx.save_for_backward(rounded)
        return rounded.clamp(ctx.qmin, ctx.qmax).mul(scale).to(w.dtype)

    @staticmethod
    def backward(ctx, grad_out):
        """Return (grad_w, None): grad_out where -128 <= round(w / scale) <= 127, else 0; None for scale."""
        (rounded,) = ctx.saved_tensors
        keep = rounded.ge(ctx.qmin).logical_and(rounded.le(ctx.qmax))
        return grad_out * keep.to(grad_out.dtype), None
''',
    ),
    dict(
        assignment="07_custom_autograd", function="FakeQuantize",
        style="helper staticmethods (to_grid, in_range) computing with torch, called from both methods; "
              "@once_differentiable; ctx.scale",
        added="",
        code=r'''from torch.autograd.function import once_differentiable


class FakeQuantize(torch.autograd.Function):
    """Round w to the int8 grid of step scale (forward); pass the gradient straight through (backward)."""

    QMIN, QMAX = -128, 127

    @staticmethod
    def to_grid(w, scale):
        return torch.round(w / scale)

    @staticmethod
    def in_range(q):
        return (q >= FakeQuantize.QMIN) & (q <= FakeQuantize.QMAX)

    @staticmethod
    def forward(ctx, w, scale):
        """Return scale * clamp(round(w / scale), -128, 127), in w's dtype; save what backward needs."""
        ctx.save_for_backward(w)
        ctx.scale = scale
        q = FakeQuantize.to_grid(w, scale).clamp(min=FakeQuantize.QMIN, max=FakeQuantize.QMAX)
        return (scale * q).to(dtype=w.dtype)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out):
        """Return (grad_w, None): grad_out where -128 <= round(w / scale) <= 127, else 0; None for scale."""
        (w,) = ctx.saved_tensors
        mask = FakeQuantize.in_range(FakeQuantize.to_grid(w, ctx.scale))
        grad_w = grad_out.masked_fill(~mask, 0.0)
        return grad_w, None
''',
    ),
    dict(
        assignment="07_custom_autograd", function="FakeQuantize",
        style="mask computed in forward and saved (a bool tensor via save_for_backward); torch.clamp with "
              "keyword min/max; backward is grad_out * mask; annotations",
        added="",
        code=r'''class FakeQuantize(torch.autograd.Function):
    """Round w to the int8 grid of step scale (forward); pass the gradient straight through (backward)."""

    @staticmethod
    def forward(ctx, w: torch.Tensor, scale: float) -> torch.Tensor:
        """Return scale * clamp(round(w / scale), -128, 127), in w's dtype; save what backward needs."""
        q = torch.round(w / scale)
        mask = torch.logical_and(q >= -128, q <= 127)
        ctx.save_for_backward(mask)
        ctx.scale = float(scale)
        out = torch.clamp(q, min=-128, max=127) * scale
        return out.type(w.dtype)

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor):
        """Return (grad_w, None): grad_out where -128 <= round(w / scale) <= 127, else 0; None for scale."""
        (mask,) = ctx.saved_tensors
        return grad_out * mask, None
''',
    ),
    dict(
        assignment="07_custom_autograd", function="FakeQuantize",
        style="forward with torch.where-based clamping instead of clamp (torch.minimum/maximum against full_like); "
              "backward with torch.where(cond, grad_out, 0.0)-style zeros built by grad_out * 0",
        added="",
        code=r'''class FakeQuantize(torch.autograd.Function):
    """Round w to the int8 grid of step scale (forward); pass the gradient straight through (backward)."""

    @staticmethod
    def forward(ctx, w, scale):
        """Return scale * clamp(round(w / scale), -128, 127), in w's dtype; save what backward needs."""
        ctx.save_for_backward(w)
        ctx.scale = scale
        q = torch.round(w / scale)
        q = torch.maximum(q, torch.full_like(q, -128.0))
        q = torch.minimum(q, torch.full_like(q, 127.0))
        return (q * scale).to(w.dtype)

    @staticmethod
    def backward(ctx, grad_out):
        """Return (grad_w, None): grad_out where -128 <= round(w / scale) <= 127, else 0; None for scale."""
        w, = ctx.saved_tensors
        q = torch.round(w / ctx.scale)
        ok = (q >= -128) & (q <= 127)
        grad_w = torch.where(ok, grad_out, grad_out * 0)
        return grad_w, None
''',
    ),
    # ------------------------------------------------------------------ 02 with added cells
    dict(
        assignment="02_activation_functions", function="collapse_linear",
        style="added cell: list grown with .extend of the result's key names; answer builds a dict by those keys "
              "and returns the pair in that order",
        added=r'''RESULT_KEYS = []
RESULT_KEYS.extend(["W", "b"])
''',
        code=r'''def collapse_linear(W1, b1, W2, b2):
    """Return (W, b) with linear(linear(x, W1, b1), W2, b2) == linear(x, W, b) for every x.

    W1: (hidden, in), b1: (hidden,), W2: (out, hidden), b2: (out,). Result: W (out, in), b (out,).
    """
    parts = {}
    parts[RESULT_KEYS[0]] = W2 @ W1
    parts[RESULT_KEYS[1]] = W2 @ b1 + b2
    return tuple(parts[k] for k in RESULT_KEYS)
''',
    ),
    dict(
        assignment="02_activation_functions", function="relu",
        style="added cell: dict filled entry by entry (BOUNDS = {}; BOUNDS['low'] = 0.0); answer torch.clamp(min=BOUNDS['low'])",
        added=r'''BOUNDS = {}
BOUNDS["low"] = 0.0
BOUNDS["name"] = "relu"
''',
        code=r'''def relu(z):
    """Return max(z, 0) for every entry of z (same shape and dtype as z)."""
    return torch.clamp(z, min=BOUNDS["low"])
''',
    ),
    dict(
        assignment="02_activation_functions", function="relu",
        style="added cell: helper function called to fill a global dict by mutation (fill_table(TABLE)); "
              "answer is a mask product z * (z > threshold).to(z.dtype)",
        added=r'''TABLE = {}


def fill_table(table):
    table["threshold"] = 0.0
    table["slope"] = 1.0


fill_table(TABLE)
''',
        code=r'''def relu(z):
    """Return max(z, 0) for every entry of z (same shape and dtype as z)."""
    keep = (z > TABLE["threshold"]).to(z.dtype)
    return z * keep * TABLE["slope"]
''',
    ),
    dict(
        assignment="02_activation_functions", function="relu_derivative",
        style="added cell: list built with .append (LEVELS = [0.0, 1.0] one at a time); answer torch.where between "
              "full_like tensors of those levels",
        added=r'''LEVELS = []
LEVELS.append(0.0)   # derivative where z <= 0 (also at the corner, like torch.relu)
LEVELS.append(1.0)   # derivative where z > 0
''',
        code=r'''def relu_derivative(z):
    """Return 1.0 where z > 0 and 0.0 elsewhere (also at z == 0, like torch.relu); same shape and dtype as z."""
    return torch.where(z > 0, torch.full_like(z, LEVELS[1]), torch.full_like(z, LEVELS[0]))
''',
    ),
    dict(
        assignment="02_activation_functions", function="relu_derivative",
        style="added cell: dict updated with .update(...) keyword form; answer (z > cut).to(z.dtype) * slope",
        added=r'''RELU_PARAMS = {"name": "relu"}
RELU_PARAMS.update(cut=0.0, slope=1.0)
''',
        code=r'''def relu_derivative(z):
    """Return 1.0 where z > 0 and 0.0 elsewhere (also at z == 0, like torch.relu); same shape and dtype as z."""
    return (z > RELU_PARAMS["cut"]).to(z.dtype) * RELU_PARAMS["slope"]
''',
    ),
    dict(
        assignment="02_activation_functions", function="sigmoid",
        style="added cell: constant ONE computed by a small loop (four quarters summed); answer ONE / (ONE + torch.exp(-z))",
        added=r'''ONE = 0.0
for _ in range(4):
    ONE += 0.25
''',
        code=r'''def sigmoid(z):
    """Return 1 / (1 + exp(-z)) for every entry of z (same shape and dtype as z)."""
    return ONE / (ONE + torch.exp(-z))
''',
    ),
    dict(
        assignment="02_activation_functions", function="sigmoid",
        style="added cell: helper function that returns a dict, called to bind a global (SIG = make_constants()); "
              "answer uses torch.exp(sign * z) with sign -1",
        added=r'''def make_constants():
    consts = {}
    consts["numerator"] = 1.0
    consts["sign"] = -1.0
    return consts


SIG = make_constants()
''',
        code=r'''def sigmoid(z):
    """Return 1 / (1 + exp(-z)) for every entry of z (same shape and dtype as z)."""
    e = torch.exp(SIG["sign"] * z)
    return SIG["numerator"] / (1.0 + e)
''',
    ),
    dict(
        assignment="02_activation_functions", function="sigmoid_derivative",
        style="added cell: list built with .extend; answer calls the learner's own sigmoid and reads ONES[0]",
        added=r'''ONES = []
ONES.extend([1.0])
''',
        code=r'''def sigmoid_derivative(z):
    """Return σ(z) * (1 - σ(z)), the derivative of the sigmoid at every entry of z."""
    s = sigmoid(z)
    return s * (ONES[0] - s)
''',
    ),
    # ------------------------------------------------------------------ 05 with added cells
    dict(
        assignment="05_gradient_descent", function="sgd_step",
        style="added cell: dict updated with .update({...}) holding the step sign; answer p.add_(p.grad, alpha=sign*lr) "
              "inside `with torch.no_grad()`",
        added=r'''STEP = {}
STEP.update({"sign": -1.0})
''',
        code=r'''def sgd_step(params, lr):
    """Update every tensor p in the list in place: p <- p - lr * p.grad, as torch.optim.SGD(params, lr).step().

    Skip tensors whose .grad is None; each p must stay the same leaf tensor (use torch.no_grad()).
    """
    with torch.no_grad():
        for p in params:
            if p.grad is None:
                continue
            p.add_(p.grad, alpha=STEP["sign"] * lr)
''',
    ),
    dict(
        assignment="05_gradient_descent", function="sgd_step",
        style="added cell: list of skip markers built with .append; answer filters with a comprehension and uses "
              "p -= lr * p.grad under @torch.no_grad()",
        added=r'''SKIP = []
SKIP.append(None)
''',
        code=r'''@torch.no_grad()
def sgd_step(params, lr):
    """Update every tensor p in the list in place: p <- p - lr * p.grad, as torch.optim.SGD(params, lr).step().

    Skip tensors whose .grad is None; each p must stay the same leaf tensor (use torch.no_grad()).
    """
    for p in [q for q in params if all(q.grad is not s for s in SKIP)]:
        p -= lr * p.grad
''',
    ),
    dict(
        assignment="05_gradient_descent", function="sgd_momentum_update",
        style="added cell: dict filled entry by entry with the first-step rule and the 'no buffer' value; "
              "answer mirrors torch's order of operations with out-of-place .mul/.add(alpha=)",
        added=r'''SGD_RULES = {}
SGD_RULES["no_buffer"] = None
SGD_RULES["first_dampening"] = 0.0   # the first step copies g into the buffer, no dampening
''',
        code=r'''def sgd_momentum_update(p, grad, buf, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False):
    """One step of torch.optim.SGD for one parameter; return (new_p, new_buf) and change no input.

    g = grad + weight_decay * p; buf = g.clone() on the first step (buf is None), else
    buf = momentum * buf + (1 - dampening) * g; step = g + momentum * buf if nesterov else buf
    (step = g and new_buf = None when momentum == 0); new_p = p - lr * step.
    """
    g = grad.add(p, alpha=weight_decay) if weight_decay != 0 else grad
    if momentum == 0:
        return p.add(g, alpha=-lr), SGD_RULES["no_buffer"]
    if buf is None:
        new_buf = g.clone()
    else:
        new_buf = buf.mul(momentum).add(g, alpha=1 - dampening)
    step = g.add(new_buf, alpha=momentum) if nesterov else new_buf
    return p.add(step, alpha=-lr), new_buf
''',
    ),
    dict(
        assignment="05_gradient_descent", function="sgd_momentum_update",
        style="added cell: helper function returns the defaults dict; global bound from it, then .update(...) adds "
              "an entry; answer uses match on (momentum == 0, buf is None) with plain operators",
        added=r'''def default_hyperparams():
    d = {}
    d["lr_sign"] = -1.0
    return d


HYPER = default_hyperparams()
HYPER.update(copy_first=True)
''',
        code=r'''def sgd_momentum_update(p, grad, buf, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False):
    """One step of torch.optim.SGD for one parameter; return (new_p, new_buf) and change no input.

    g = grad + weight_decay * p; buf = g.clone() on the first step (buf is None), else
    buf = momentum * buf + (1 - dampening) * g; step = g + momentum * buf if nesterov else buf
    (step = g and new_buf = None when momentum == 0); new_p = p - lr * step.
    """
    g = grad + weight_decay * p if weight_decay else grad
    match (momentum == 0, buf is None):
        case (True, _):
            return p + HYPER["lr_sign"] * lr * g, None
        case (False, True):
            new_buf = g.clone() if HYPER["copy_first"] else g
        case _:
            new_buf = momentum * buf + (1 - dampening) * g
    step = g + momentum * new_buf if nesterov else new_buf
    return p + HYPER["lr_sign"] * lr * step, new_buf
''',
    ),
    dict(
        assignment="05_gradient_descent", function="sgd_momentum_update",
        style="added cell: a constant computed by a small loop (the number of steps whose buffer is copied, counted "
              "up) and a list of option names grown with .append; answer with torch.add / torch.mul and alpha",
        added=r'''COPY_STEPS = 0
for first in [None]:
    COPY_STEPS += 1
OPTION_NAMES = []
for name in ("momentum", "dampening", "weight_decay", "nesterov"):
    OPTION_NAMES.append(name)
''',
        code=r'''def sgd_momentum_update(p, grad, buf, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False):
    """One step of torch.optim.SGD for one parameter; return (new_p, new_buf) and change no input.

    g = grad + weight_decay * p; buf = g.clone() on the first step (buf is None), else
    buf = momentum * buf + (1 - dampening) * g; step = g + momentum * buf if nesterov else buf
    (step = g and new_buf = None when momentum == 0); new_p = p - lr * step.
    """
    assert len(OPTION_NAMES) == 4, f"expected 4 options, got {OPTION_NAMES}"
    g = torch.add(grad, p, alpha=weight_decay)
    new_buf = None
    if momentum != 0:
        if buf is None and COPY_STEPS == 1:
            new_buf = torch.clone(g)
        else:
            new_buf = torch.add(torch.mul(buf, momentum), g, alpha=1 - dampening)
        step = torch.add(g, new_buf, alpha=momentum) if nesterov else new_buf
    else:
        step = g
    return torch.add(p, step, alpha=-lr), new_buf
''',
    ),
]

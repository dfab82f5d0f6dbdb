"""Hidden tests: 06_putting_it_together (forward, backward, step)."""

import pytest
import torch
import torch.nn.functional as F

from autograder.grade.compare import alternatives, expect_tensor, fail, misplaced, raised_mistakes
from autograder.tests.data import rand
from autograder.tests.optim import SGD
from autograder.jail.inside.wire import Recipe
from autograder.tests.repeat import SECOND_CALL, again, state_hint

ASSIGNMENT = "06_putting_it_together"
graded = pytest.mark.graded
KEYS = ("W1", "b1", "W2", "b2")


def make_params(n_in, hidden, n_out, seed, dtype=torch.float32):
    return {"W1": rand(hidden, n_in, seed=seed, dtype=dtype), "b1": rand(hidden, seed=seed + 1, dtype=dtype),
            "W2": rand(n_out, hidden, seed=seed + 2, dtype=dtype), "b2": rand(n_out, seed=seed + 3, dtype=dtype)}


def torch_train(x, y, params, lr, steps):
    """The reference: nn.Sequential + nn.MSELoss + SGD (torch.optim.SGD's update) from the same values."""
    hidden, n_in = params["W1"].shape
    model = torch.nn.Sequential(torch.nn.Linear(n_in, hidden), torch.nn.ReLU(),
                                torch.nn.Linear(hidden, params["W2"].shape[0])).to(params["W1"].dtype)
    with torch.no_grad():
        for p, k in zip(model.parameters(), KEYS):
            p.copy_(params[k])
    optimizer = SGD(model.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = torch.nn.MSELoss()(model(x), y)
        losses.append(loss.item())
        loss.backward()
        optimizer.step()
    return {k: p.detach().clone() for k, p in zip(KEYS, model.parameters())}, losses


def mistaken_train(x, y, params, lr, steps, *, divide_by="numel", factor=2.0, sign=1.0,
                   slope_at_zero=False, mask=True, w2_first=False, bias="sum", transposed=False):
    """What train_mlp returns with a known mistake in its backward pass or step (the defaults:
    none, the contract's training)."""
    W1, b1, W2, b2 = (params[k].clone() for k in KEYS)
    reduce = {"sum": lambda g: g.sum(0), "mean": lambda g: g.mean(0), "none": lambda g: g}[bias]
    losses = []
    for _ in range(steps):
        z1 = x @ W1.T + b1
        h = torch.relu(z1)
        y_hat = h @ W2.T + b2
        losses.append(((y_hat - y) ** 2).mean().item())
        divisor = y_hat.numel() if divide_by == "numel" else y_hat.shape[0]   # M, or the batch size N
        grad_y_hat = factor * (y_hat - y) / divisor
        if w2_first:   # W2 and b2 updated before W1's gradient is computed through W2
            W2, b2 = W2 - sign * lr * grad_y_hat.T @ h, b2 - sign * lr * reduce(grad_y_hat)
        slope = ((z1 >= 0) if slope_at_zero else (z1 > 0)).to(z1.dtype) if mask else 1.0
        grad_z1 = (grad_y_hat @ W2) * slope
        if transposed:   # x.T @ grad instead of grad.T @ x: (in, out), broadcast against W
            W1, b1 = W1 - sign * lr * x.T @ grad_z1, b1 - sign * lr * reduce(grad_z1)
            W2, b2 = W2 - sign * lr * h.T @ grad_y_hat, b2 - sign * lr * reduce(grad_y_hat)
            continue
        W1, b1 = W1 - sign * lr * grad_z1.T @ x, b1 - sign * lr * reduce(grad_z1)
        if not w2_first:
            W2, b2 = W2 - sign * lr * grad_y_hat.T @ h, b2 - sign * lr * reduce(grad_y_hat)
    return {"W1": W1, "b1": b1, "W2": W2, "b2": b2}, losses


TRANSPOSED = ("the weight gradients are transposed: ∂L/∂W1 = (∂L/∂z1)ᵀ x has W1's shape (hidden, "
              "in), not xᵀ (∂L/∂z1); the same for W2 (the update broadcast a wrong shape into W).")


def _train_mistakes(x, y, params, lr, steps, key):
    """Hints for a wrong `key` ("W1", ..., or "losses"), each with what that mistake returns."""
    def variant(**kw):
        if key == "losses":
            return lambda: torch.tensor(mistaken_train(x, y, params, lr, steps, **kw)[1], dtype=x.dtype)
        return lambda: mistaken_train(x, y, params, lr, steps, **kw)[0][key]
    return {
        "the MSE gradient divides by the number of entries M = ŷ.numel(), not by the batch size N.":
            variant(divide_by="batch"),
        "the MSE gradient is 2(ŷ − y)/M: the factor 2 is missing.": variant(factor=1.0),
        "the update adds the gradient: θ ← θ − lr·∂L/∂θ goes against the gradient (sign error: the "
        "loss goes up).": variant(sign=-1.0),
        "where z1 = x W1ᵀ + b1 is exactly 0 the ReLU's slope is 0, as in torch.relu's backward: "
        "test z1 > 0, not z1 >= 0.": variant(slope_at_zero=True),
        "the backward pass skips the ReLU's mask: ∂L/∂z1 = (∂L/∂h) · 1[z1 > 0], zero where the "
        "unit was off (without it the gradient is that of a network with no ReLU).":
            variant(mask=False),
        "W1's gradient was computed with the W2 already updated: compute every gradient from "
        "the same forward pass first, before any update (∂L/∂h = G W2 uses the W2 of this "
        "step's forward pass).": variant(w2_first=True),
        "the bias gradients are the sum over the batch of the per-sample gradients "
        "(G.sum(0)), not their mean: the 1/M of the loss is already in G.": variant(bias="mean"),
        "the bias gradient must be summed over the batch (dim 0), G.sum(0), giving one value per "
        "unit: without the sum b takes the shape (N, units).": variant(bias="none"),
        TRANSPOSED: variant(transposed=True),
    }


def check_loss_count(call, losses, steps, losses_for):
    """One loss per step; a wrong count names the loop's bounds or losses kept from an earlier
    call (a default losses=[]), each only when the values are that mistake's: `losses_for(n)`
    gives the losses of n steps of the right training."""
    if len(losses) == steps:
        return
    hints = []
    n = len(losses)
    if n in (steps - 1, steps + 1) and _close_list(losses, losses_for(n)):
        hints.append(f"the loop ran {n} times, one step too {'few' if n < steps else 'many'} "
                     "(an off-by-one in its bounds): `for _ in range(steps):` runs exactly "
                     "`steps` updates, with one loss recorded before each.")
    elif steps and n > steps and _close_list(losses[n - steps:], losses_for(steps)):
        hints.append("the list starts with losses from an earlier call: " + state_hint("train_mlp"))
    fail(f"{call}: number of losses: expected {steps}, got {len(losses)} (one loss per step)."
         f"{alternatives(hints)}")


def _close_list(got, expected) -> bool:
    return len(got) == len(expected) and (not got or torch.allclose(
        torch.tensor(got, dtype=torch.float64), torch.tensor(expected, dtype=torch.float64),
        rtol=1e-4, atol=1e-5))


def check_training(student, x, y, params, lr, steps):
    expected, expected_losses = torch_train(x, y, params, lr, steps)
    call = f"train_mlp(x {tuple(x.shape)}, y {tuple(y.shape)}, params, lr={lr}, steps={steps})"
    args = (x, y, params, lr, steps)
    reply = student.call("train_mlp", *args)
    got = student.result("train_mlp", reply, args, hint=raised_mistakes(reply, {
        TRANSPOSED: lambda: mistaken_train(x, y, params, lr, steps, transposed=True)}))
    if not (isinstance(got, tuple) and len(got) == 2 and isinstance(got[0], dict)):
        fail(f"{call} should return a tuple (new_params, losses) with new_params a dict; got {got!r:.80}.")
    new_params, losses = got
    if sorted(new_params) != sorted(KEYS):
        fail(f"{call}: new_params has keys {sorted(new_params)}; expected {list(KEYS)}.")
    if not isinstance(losses, list) or not all(isinstance(v, float) for v in losses):
        fail(f"{call}: losses should be a list of Python floats (use loss.item()); got "
             f"{type(losses).__name__} of {sorted({type(v).__name__ for v in losses}) if isinstance(losses, list) else '?'}.")
    check_loss_count(call, losses, steps, lambda n: torch_train(x, y, params, lr, n)[1])
    if steps:
        # Losses come from computations in x's dtype: compare them at that precision.
        expect_tensor(torch.tensor(losses, dtype=x.dtype), torch.tensor(expected_losses, dtype=x.dtype),
                      f"{call}: the losses", check_dtype=False, mistakes={
                          "record each loss before the update that follows it (your losses are one step late).":
                              lambda: torch.tensor(mistaken_train(x, y, params, lr, steps + 1)[1][1:],
                                                   dtype=x.dtype),
                          **_train_mistakes(x, y, params, lr, steps, "losses")})
    for key in KEYS:
        expect_tensor(new_params[key], expected[key], f"{call}: {key} after training",
                      mistakes=_train_mistakes(x, y, params, lr, steps, key)
                      | misplaced({f'"{k}"': expected[k] for k in KEYS}, f'"{key}"'))


@graded("train_mlp", points=1, visible=True)
def test_train_matches_pytorch_small(student):
    """5 steps on a 1-16-1 network match nn.Sequential + SGD, called twice with the same inputs"""
    x = torch.linspace(-3, 3, 32).unsqueeze(1)
    again(check_training, student, x, torch.sin(x), make_params(1, 16, 1, seed=1), 0.1, 5,
          name="train_mlp")


@graded("train_mlp", points=1, visible=True)
def test_train_losses_before_each_update(student):
    """the first loss is the loss of the starting parameters"""
    x, y = rand(12, 3, seed=10), rand(12, 2, seed=11)
    params = make_params(3, 5, 2, seed=12)
    got = student.train_mlp(x, y, params, 0.05, 3)
    if not (isinstance(got, tuple) and len(got) == 2):
        fail(f"train_mlp(..., steps=3) should return a tuple (new_params, losses); got {got!r:.80}.")
    losses = got[1]
    start_loss = F.mse_loss(torch.relu(x @ params["W1"].T + params["b1"]) @ params["W2"].T + params["b2"], y)
    if not isinstance(losses, list) or not losses:
        fail(f"train_mlp(..., steps=3) returned losses={losses!r:.60}; expected a list of 3 floats.")
    check_loss_count("train_mlp(x (12, 3), y (12, 2), params, lr=0.05, steps=3)", losses, 3,
                     lambda n: torch_train(x, y, params, 0.05, n)[1])
    expect_tensor(torch.tensor([float(losses[0])]), start_loss.reshape(1),
                  "the first loss returned by train_mlp", check_dtype=False, mistakes={
                      "record the loss before the update: losses[0] is the loss of the starting parameters.":
                          lambda: torch.tensor([mistaken_train(x, y, params, 0.05, 2)[1][1]])})


# Sizes and steps are kept small: a correct train_mlp written with Python loops over samples and
# units (as a teacher accepts) runs each call in about 2 s under the sandbox's operation recording,
# far inside the per-call time limit.
@graded("train_mlp", points=1, visible=True)
def test_train_multi_output_float64(student):
    """several outputs, float64, 12 steps"""
    x, y = rand(10, 4, seed=20, dtype=torch.float64), rand(10, 3, seed=21, dtype=torch.float64)
    check_training(student, x, y, make_params(4, 6, 3, seed=22, dtype=torch.float64), 0.2, 12)


@graded("train_mlp", points=1)
def test_train_longer(student):
    """30 steps with a larger learning rate; a hidden unit whose input is exactly 0 (ReLU's kink)"""
    x = rand(12, 2, seed=30, low=-2, high=2)
    y = (x[:, :1] * x[:, 1:]).sin()
    check_training(student, x, y, make_params(2, 6, 1, seed=31), 0.3, 30)
    # a hidden unit whose input is exactly 0: the ReLU's slope there is 0, as in PyTorch
    params = make_params(3, 4, 1, seed=35)
    params["W1"][1], params["b1"][1] = 0.0, 0.0    # z[:, 1] == 0 for every sample, every step
    check_training(student, rand(6, 3, seed=36), rand(6, 1, seed=37), params, 0.2, 3)


@graded("train_mlp", points=1)
def test_train_zero_steps(student):
    """steps=0 returns the starting values and no losses"""
    x, y = rand(5, 3, seed=40), rand(5, 1, seed=41)
    check_training(student, x, y, make_params(3, 4, 1, seed=42), 0.1, 0)


@graded("train_mlp", points=1)
def test_train_batch_of_one(student):
    """a batch of a single sample"""
    check_training(student, rand(1, 3, seed=50), rand(1, 2, seed=51), make_params(3, 3, 2, seed=52), 0.5, 4)


MODELS = """
def build(spec, seed, dtype_name, stale=False):
    torch.manual_seed(seed)
    nn = torch.nn
    kinds = {"relu": nn.ReLU, "sigmoid": nn.Sigmoid, "tanh": nn.Tanh}
    layers = []
    for item in spec:
        if isinstance(item, list):
            layers.append(nn.Linear(item[0], item[1]))
        elif item.startswith("norm"):
            layers.append(nn.LayerNorm(int(item[4:])))
        else:
            layers.append(kinds[item]())
    model = nn.Sequential(*layers).to(getattr(torch, dtype_name))
    if stale:   # .grad already set by an earlier backward(), as in a training loop
        model(torch.ones(2, spec[0][0], dtype=getattr(torch, dtype_name))).sum().backward()
    NAMED["model"] = model
    return model
"""


def build_model(spec, seed, dtype="float32", stale=False):
    """The same model in the test's process and, through a Recipe, in the sandbox."""
    scope = {"torch": torch, "NAMED": {}}
    exec(MODELS, scope)
    return scope["build"](spec, seed, dtype, stale), Recipe(MODELS, "build", (spec, seed, dtype, stale))


def check_norms(student, spec, seed, x, y, dtype="float32", stale=False, floats=False, walks=1):
    """walks=2: the answer of a second call on the same model (repeat.SECOND_CALL)."""
    model, recipe = build_model(spec, seed, dtype, stale)
    linears = [m for m in model if isinstance(m, torch.nn.Linear)]
    F.mse_loss(model(x), y).backward()          # adds to the stale .grad, if any
    accumulated = torch.tensor([m.weight.grad.norm().item() for m in linears], dtype=torch.float64)
    model.zero_grad()
    F.mse_loss(model(x), y).backward()
    expected = torch.tensor([m.weight.grad.norm().item() for m in linears], dtype=torch.float64)
    if walks == 1:
        got = student.layer_grad_norms(recipe, x, y)
    else:
        got = student.result("layer_grad_norms", student.drive("layer_grad_norms", SECOND_CALL,
                                                                recipe, x, y), (recipe, x, y))
    what = (f"layer_grad_norms on a network with {len(linears)} nn.Linear layers"
            + (" whose .grad already holds an earlier gradient" if stale else "")
            + (", called a second time on the same model" if walks > 1 else ""))
    if not isinstance(got, (list, tuple)):
        fail(f"{what} returned a {type(got).__name__}; expected a list of floats.")
    if floats and not all(isinstance(v, float) for v in got):
        kinds = sorted({"a 0-d tensor" if isinstance(v, torch.Tensor) and v.dim() == 0
                        else type(v).__name__ for v in got if not isinstance(v, float)})
        fail(f"{what} returned a list holding {', '.join(kinds)}; the exercise asks for Python "
             "floats: take each norm's value with .item().")
    try:
        values = torch.tensor([float(v) for v in got], dtype=torch.float64)
    except (TypeError, ValueError, RuntimeError):
        fail(f"{what} returned {got!r:.80}; expected a list of floats (use .item()).")

    def norms(tensors):
        return torch.tensor([t.norm().item() for t in tensors], dtype=torch.float64)
    earlier = expected * (walks if not stale else 1)   # what a second backward() adds to .grad
    others = len(list(model.parameters())) > 2 * len(linears)   # LayerNorm's parameters too
    per_parameter = {
        "return one norm per nn.Linear weight, not one per parameter: leave out the biases"
        + (" and the other layers' parameters (LayerNorm's)" if others else "") + ".":
            lambda: norms(p.grad for p in model.parameters())}
    if others:
        per_parameter["return one norm per nn.Linear weight, not one per parameter (leave out "
                      "the biases)."] = lambda: norms(p.grad for m in linears for p in (m.weight, m.bias))
    expect_tensor(values, expected, what, check_dtype=False, mistakes={
        **per_parameter,
        "these are the norms of the biases' gradients: the exercise asks for the weights', "
        "m.weight.grad.": lambda: norms(m.bias.grad for m in linears),
        "these are the norms of the weights themselves: take the norm of their gradients, "
        "m.weight.grad, after backward().": lambda: norms(m.weight for m in linears),
        "only the nn.Linear layers count: other layers with a weight (LayerNorm) are not in the "
        "list; keep the layers with isinstance(m, nn.Linear).":
            lambda: norms(m.weight.grad for m in model if getattr(m, "weight", None) is not None),
        "the L2 norm is the square root of the sum of squares (tensor.norm()), not the sum of squares.":
            lambda: expected ** 2,
        "the norms are in reverse order: list the layers from the first (next to the input) "
        "to the last.": lambda: expected.flip(0),
        "this is the mean absolute entry of each gradient; the L2 norm is the square root of "
        "the sum of squares (m.weight.grad.norm()).":
            lambda: torch.tensor([m.weight.grad.abs().mean().item() for m in linears],
                                 dtype=torch.float64),
        "use the mean squared error (F.mse_loss, mean over all entries), not the sum.":
            lambda: expected * y.numel(),
        "backward() adds to .grad, which already held an earlier gradient: clear it first "
        "(model.zero_grad()).": lambda: accumulated if stale else earlier,
    })


@graded("layer_grad_norms", points=1, visible=True)
def test_norms_small(student):
    """a 2-layer tanh network; the norms are Python floats"""
    check_norms(student, [[3, 4], "tanh", [4, 2]], 1, rand(6, 3, seed=60), rand(6, 2, seed=61),
                floats=True)


@graded("layer_grad_norms", points=1)
def test_norms_deep_sigmoid(student):
    """a 5-layer sigmoid network (vanishing gradients)"""
    spec = [[4, 8], "sigmoid", [8, 8], "sigmoid", [8, 8], "sigmoid", [8, 8], "sigmoid", [8, 1]]
    check_norms(student, spec, 2, rand(16, 4, seed=70), rand(16, 1, seed=71))


@graded("layer_grad_norms", points=1)
def test_norms_with_layernorm_float64(student):
    """ReLU with LayerNorm, float64"""
    spec = [[3, 6], "norm6", "relu", [6, 6], "norm6", "relu", [6, 2]]
    check_norms(student, spec, 3, rand(9, 3, seed=80, dtype=torch.float64),
                rand(9, 2, seed=81, dtype=torch.float64), "float64")


@graded("layer_grad_norms", points=1)
def test_norms_single_layer(student):
    """a single nn.Linear with several outputs; a model whose .grad is already set; a second
    call on the same model"""
    check_norms(student, [[5, 3]], 4, rand(7, 5, seed=90), rand(7, 3, seed=91))
    check_norms(student, [[3, 4], "relu", [4, 2]], 5, rand(5, 3, seed=92), rand(5, 2, seed=93),
                stale=True)
    check_norms(student, [[3, 4], "relu", [4, 2]], 6, rand(5, 3, seed=94), rand(5, 2, seed=95),
                walks=2)

"""The error model (autograder/grade/causes.py): a wrong value is traced to the one-place
mistakes of the reference solution that give it, narrowed by the learner's own code."""

from __future__ import annotations

from pathlib import Path

import torch

from autograder.grade import causes, reference
from autograder.grade.mutation import differing, mutate

A06 = "06_putting_it_together"

TRAIN = reference.solutions(A06)[1]["train_mlp"]
"""The reference solution of train_mlp (the source notebook's answer cell): each test's learner
changes it in one place, and `_explain` checks the change makes the value wrong."""


def _inputs(n=6, i=3, hidden=5, o=2, steps=3):
    g = torch.Generator().manual_seed(7)
    x, y = torch.randn(n, i, generator=g), torch.randn(n, o, generator=g)
    params = {"W1": torch.randn(hidden, i, generator=g), "b1": torch.randn(hidden, generator=g),
              "W2": torch.randn(o, hidden, generator=g), "b2": torch.randn(o, generator=g)}
    return (x, y, params, 0.1, steps)


def _run(code: str, args):
    ns = {"torch": torch}
    exec(code, ns)
    return ns["train_mlp"](*args)


def _explain(learner: str, args, pick):
    """The error model's hints for `learner`'s train_mlp, on the value `pick` takes from it."""
    causes.note_call(causes.Call(A06, "train_mlp", args, {}, learner))
    got, expected = pick(_run(learner, args)), pick(_run(TRAIN, args))
    assert not torch.allclose(got, expected)
    return causes.explain(got, expected, 1e-4, 1e-5)


def test_a_variable_read_where_another_belongs_is_named_from_the_learners_own_line():
    # the layer's input x replaced by h in dL/dW1 (with hidden == input size, so it runs)
    learner = TRAIN.replace("grad_z1.T @ x", "grad_z1.T @ h")
    said = _explain(learner, _inputs(i=5, hidden=5), lambda out: out[0]["W1"])
    assert said and len(said) == 1, said
    assert "`h` is used where `x` belongs" in said[0] and "grad_W1" in said[0]


def test_a_dropped_factor_is_named_whatever_the_learners_names():
    learner = TRAIN.replace("2 * (y_hat - y)", "(y_hat - y)").replace("grad_y_hat", "g")
    said = _explain(learner, _inputs(), lambda out: torch.tensor(out[1]))
    assert said and len(said) == 1 and "the factor `2` is missing" in said[0], said


def test_a_mistake_no_one_place_change_gives_names_nothing():
    learner = TRAIN.replace("grad_W1, grad_b1 = grad_z1.T @ x", "grad_W1, grad_b1 = 3 * grad_z1.T @ x") \
        .replace("grad_W2, grad_b2 = grad_y_hat.T @ h", "grad_W2, grad_b2 = 0.5 * grad_y_hat.T @ h")
    assert _explain(learner, _inputs(), lambda out: out[0]["W1"]) == []


def test_a_statement_moved_is_named_only_when_the_learners_code_has_that_order():
    reference = ("def f(model, x):\n    h = model(x)\n    h.retain_grad()\n"
                 "    h.sum().backward()\n    g = h.grad\n    return g\n")
    [moved] = [m for m in mutate(reference, every=True)
               if m.sentence.startswith("`h.sum().backward()` comes after `g = h.grad`")]
    early = "def f(model, x):\n    h = model(x)\n    h.retain_grad()\n    g = h.grad\n    h.sum().backward()\n    return g\n"
    assert causes.supported(moved, early, frozenset())
    assert not causes.supported(moved, reference, frozenset())
    # a dropped statement leaves nothing in the learner's code to show it: never named
    dropped = [m for m in mutate(reference, every=True) if m.sentence == "`h.retain_grad()` is missing"]
    assert dropped and not causes.supported(dropped[0], early, frozenset())


def test_the_evaluation_writes_nothing_the_grader_would_see(capfd):
    # nbgrader scores a test cell 0 when it writes to stderr: the solution's setup cells (plots,
    # warnings) and the mutants (deprecation warnings) run silenced, in another process
    learner = TRAIN.replace("2 * (y_hat - y)", "(y_hat - y)")
    assert _explain(learner, _inputs(n=7), lambda out: out[0]["b2"])
    out, err = capfd.readouterr()
    assert (out, err) == ("", "")


def test_the_changed_part_of_an_expression_is_what_a_sentence_shows():
    assert differing("grad_z1.T @ x", "grad_z1 @ x") == ("grad_z1.T", "grad_z1")
    assert differing("W - lr * g", "W + lr * g") == ("-", "+")
    assert differing("y_hat.numel()", "len(y_hat)") == ("y_hat.numel()", "len(y_hat)")


def test_code_that_shows_no_mutation_costs_no_evaluation(monkeypatch):
    # the learner's code holds none of the mutants' changed expressions, and the solution
    # returns no local of its own (no intermediate to compare with): nothing is run
    started = []
    monkeypatch.setattr(causes, "ask", lambda *request: started.append(request))
    monkeypatch.setattr(causes, "model", lambda assignment, function: tuple(
        m for m in mutate(TRAIN, every=True) if m.kind != "intermediate"))
    learner = ("def train_mlp(x, y, params, lr, steps):\n"
               "    return {k: v * 0 for k, v in params.items()}, [0.0] * steps\n")
    causes.note_call(causes.Call(A06, "train_mlp", _inputs(), {}, learner))
    got = _run(learner, _inputs())[0]["W1"]
    assert causes.explain(got, _run(TRAIN, _inputs())[0]["W1"], 1e-4, 1e-5) == []
    assert started == []


def test_the_reference_process_ends_with_the_grader_process_that_started_it(tmp_path):
    # kill -9 of the grading process: its error model's reference process goes too
    import os
    import signal
    import subprocess
    import sys
    import time
    script = tmp_path / "grader.py"
    script.write_text(
        "import sys, time\n"
        f"sys.path[:0] = [{str(Path(__file__).parent)!r}]\n"
        "import test_causes as t\n"
        "from autograder.grade import reference\n"
        "learner = t.TRAIN.replace('2 * (y_hat - y)', '(y_hat - y)')\n"
        "assert t._explain(learner, t._inputs(), lambda out: out[0]['b2'])\n"
        "print([pid for pid, _, _ in reference._servers.values()][0], flush=True)\n"
        "time.sleep(600)\n")
    grader = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    server = int(grader.stdout.readline())
    os.kill(server, 0)                      # it runs
    os.kill(grader.pid, signal.SIGKILL)
    grader.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(server, 0)
        except ProcessLookupError:
            return
        if open(f"/proc/{server}/stat").read().rsplit(")", 1)[1].split()[0] == "Z":
            return                          # ended; its new parent has not reaped it yet
        time.sleep(0.05)
    raise AssertionError(f"the reference process {server} outlived its grader")


def test_a_value_equal_to_an_intermediate_of_the_computation_is_named_as_such():
    # the pre-activation z returned where relu(z) belongs: a fact about values, whatever the code
    [m] = [m for m in mutate("def f(x, W):\n    z = x @ W.T\n    h = z.clamp(min=0)\n    return h\n",
                             every=True) if m.kind == "intermediate"]
    assert m.sentence == "the function returns `z`, an intermediate value, instead of its result"
    assert causes.supported(m, "def f(x, W):\n    return x\n", frozenset())


def test_a_late_answer_is_never_read_as_the_next_calls(monkeypatch):
    # the grader stops waiting for the reference process's answer (here: its first wait ends at
    # once, whatever the machine's speed): that process is dropped, and the next call gets its
    # own answer from a new one, not the late answer to the first
    learner = TRAIN.replace("2 * (y_hat - y)", "(y_hat - y)")
    real, waited = reference._receive, []

    def late(fd, deadline=None):
        if deadline is not None and not waited:
            waited.append(fd)
            raise TimeoutError
        return real(fd, deadline)
    monkeypatch.setattr(reference, "_receive", late)
    causes.note_call(causes.Call(A06, "train_mlp", _inputs(), {}, learner))
    got = _run(learner, _inputs())[0]["b2"]
    assert causes.explain(got, _run(TRAIN, _inputs())[0]["b2"], 1e-4, 1e-5) == []
    assert waited and A06 not in reference._servers
    said = _explain(learner, _inputs(n=5), lambda out: out[0]["b2"])
    assert said and "the factor `2` is missing" in said[0]


def test_a_step_of_an_expression_returned_for_the_result_is_named_as_such():
    # the summed squared errors, the division by the count left out: a step of the solution's
    # `((y_hat - y) ** 2).sum() / y_hat.numel()`, named whatever the learner's code looks like
    a03 = "03_chain_rule"
    learner = ("def mse_loss(y_hat, y):\n"
               "    total = 0.0\n"
               "    for d in (y_hat - y).reshape(-1):\n"
               "        total = total + d * d\n"
               "    return total\n")
    g = torch.Generator().manual_seed(3)
    args = (torch.randn(4, 2, generator=g), torch.randn(4, 2, generator=g))
    ns = {"torch": torch}
    exec(learner, ns)
    got = ns["mse_loss"](*args)
    expected = ((args[0] - args[1]) ** 2).mean()
    causes.note_call(causes.Call(a03, "mse_loss", args, {}, learner))
    said = causes.explain(got, expected, 1e-5, 1e-6)
    assert said == ["this is the value you get when the function returns `((y_hat - y) ** 2).sum()`, "
                    "an intermediate value (a step of `((y_hat - y) ** 2).sum() / y_hat.numel()`), "
                    "instead of its result."], said
    # steps are of statements that run once: none inside a loop, none of a comprehension
    inside = mutate("def f(xs):\n    out = [x * 2 for x in xs]\n    for x in xs:\n"
                    "        y = (x + 1) * 3\n    return out\n", every=True)
    assert not [m for m in inside if "a step of" in m.sentence]


def test_an_intermediate_of_equal_entries_is_no_evidence():
    # relu(z) computed as torch.where(z > 0, z, torch.zeros_like(z)); a learner's all-zero
    # result equals the step torch.zeros_like(z), which says nothing of where the zeros came from
    a02 = "02_activation_functions"
    learner = "def relu(z):\n    return z * 0\n"
    z = torch.tensor([[1.0, -2.0], [0.5, 3.0]])
    causes.note_call(causes.Call(a02, "relu", (z,), {}, learner))
    assert causes.explain(z * 0, z.clamp(min=0), 1e-5, 1e-6) == []

#!/usr/bin/env python
"""Mutation testing of the hidden tests: does every wrong variant of a solution lose points?

For each graded function (autograder/course.py), the reference solution (the answer cell of
source/<id>/<notebook>, markers removed) is changed in one place by a small AST mutator:
comparisons flipped, constants off by one, + <-> -, * <-> /, sum <-> mean, a transpose or a
copy dropped, arguments swapped, a term dropped, a sign dropped, in place <-> copy, the order
of a traversal (append vs insert(0), pop() vs pop(0), a loop reversed), a statement removed,
duplicated or swapped with the next, an intermediate returned instead of the result. Each
mutant becomes a submission (that one answer cell replaced, every other cell the solution)
and all of them are graded in one batch by the standalone grader
(`python -m autograder grade DIR --out OUT`). A mutant is *killed* when the mutated function
loses points on a hidden test (a test that breaks with an internal error does not count).

The score per assignment is killed / (mutants - equivalent): EQUIVALENT below lists, with the
reason, the mutants that compute what the contract asks for (no test can or should kill them).
Every other survivor is a gap in the hidden tests.

    python tools/mutants.py                          # every assignment (make mutants)
    python tools/mutants.py 03_chain_rule --messages # also each killed mutant's first message
    python tools/mutants.py --function relu --list   # show the mutants, grade nothing

Deterministic: the same solutions give the same mutants in the same order, and the hidden
tests are seeded (hypothesis runs derandomized).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import nbformat  # noqa: E402

from autograder.course import ASSIGNMENTS  # noqa: E402
from autograder.grade.mutation import mutate  # noqa: E402
from autograder.instructor.samples import Scenario, submission_notebook  # noqa: E402

# ---------------------------------------------------------------------------
# Mutants that are not wrong: (function, change) -> why. `change` is the line diff the tool
# prints. They are graded too: one that is killed is a correct answer losing points (or was
# not equivalent after all), and the report says so.

_DUP = "done twice: the second time changes nothing"
_LATE = "the closure reads the variable when it is called, after it is assigned"
_SQUARE = "(a - b)² = (b - a)²: the same value and, for the argument that needs it, the same gradient"
_PROMOTE = "float * bool promotes to the float's dtype (float32 or float64): the same tensor"
_ACYCLIC = "on an acyclic graph (autograd's always are) this is the contract's walk"
_LEAVES_LAST = "AccumulateGrad nodes have no children, so a leaf is met at the same moment"
_NEW = "the updates `p - lr * g` build new tensors, so the caller's params are never changed"

EQUIVALENT: dict[tuple[str, str], str] = {
    # 01
    ("linear_forward", "`y = matmul(batch, W.transpose(0, 1))` -> `y = matmul(batch, W.transpose(1, 0))`"):
        "transpose(1, 0) and transpose(0, 1) swap the same two dimensions",
    ("linear_forward", "`y = y + b` -> `y += b`"):
        "y is a new tensor made by matmul: adding in place changes no input",
    # 02
    ("relu", "`return torch.where(z > 0, z, torch.zeros_like(z))` -> "
             "`return torch.where(z >= 0, z, torch.zeros_like(z))`"):
        "at z == 0 both give 0 (z itself)",
    # 03
    ("mse_loss", "`return ((y_hat - y) ** 2).sum() / y_hat.numel()` -> "
                 "`return ((y - y_hat) ** 2).sum() / y_hat.numel()`"): _SQUARE,
    ("relu_backward", "`return grad_out * (z > 0).to(grad_out.dtype)` -> `return grad_out * (z > 0)`"):
        _PROMOTE,
    # 04: the walks
    ("graph_nodes", "removed `names, seen = ([], set())`; added `names, seen = ([], set())`"): _LATE,
    ("graph_nodes", "added `seen.add(node)`"): _DUP,
    ("graph_nodes", "added `names.append(type(node).__name__)`; removed `names.append(type(node).__name__)`"):
        "listing the node before or after marking it seen: nothing runs in between",
    ("graph_nodes", "added `visit(child)`"): _DUP + " (the child is seen)",
    ("graph_nodes", "added `visit(t.grad_fn)`"): _DUP + " (the root is seen)",
    ("graph_nodes", "walk: stack, marked when popped"):
        "the iterative pre-order walk: children pushed last to first, marked when visited",
    ("graph_nodes", "walk: marked seen after its children"):
        _ACYCLIC + ": a node cannot be reached again while its own visit runs",
    ("graph_nodes", "walk: no visited set, duplicates dropped afterwards"):
        "the first occurrences in the walk without a visited set are the pre-order with one",
    ("leaf_tensors", "removed `leaves, seen = ([], set())`; added `leaves, seen = ([], set())`"): _LATE,
    ("leaf_tensors", "added `seen.add(node)`"): _DUP,
    ("leaf_tensors", "removed `seen.add(node)`; added `seen.add(node)`"):
        "marking the node seen before or after listing it: nothing runs in between",
    ("leaf_tensors", "added `for child, _ in node.next_functions: / visit(child)`; "
                     "removed `for child, _ in node.next_functions: / visit(child)`"): _LEAVES_LAST,
    ("leaf_tensors", "added `visit(child)`"): _DUP + " (the child is seen)",
    ("leaf_tensors", "added `visit(t.grad_fn)`"): _DUP + " (the root is seen)",
    ("leaf_tensors", "walk: post-order"): _LEAVES_LAST + " as in pre-order",
    ("leaf_tensors", "walk: stack, marked when popped"):
        "the iterative pre-order walk: children pushed last to first, marked when visited",
    ("leaf_tensors", "walk: marked seen after its children"):
        _ACYCLIC + ": a node cannot be reached again while its own visit runs",
    ("leaf_tensors", "walk: no visited set, duplicates dropped afterwards"):
        "the first occurrences in the walk without a visited set are the pre-order with one",
    ("leaf_tensors", "walk: only AccumulateGrad nodes deduplicated"):
        "inner nodes walked again only meet leaves already listed: the first occurrences are the same",
    ("leaf_tensors", "walk: t.grad_fn left out"):
        "t.grad_fn is never an AccumulateGrad node (a tensor with a grad_fn is not a leaf)",
    ("hidden_grad", "added `hidden.retain_grad()`"): _DUP,
    ("hidden_grad", "added `loss = F.mse_loss(model[2](hidden), y)`; "
                    "removed `loss = F.mse_loss(model[2](hidden), y)`"):
        "retain_grad() after building the loss is still before backward()",
    ("hidden_grad", "`loss = F.mse_loss(model[2](hidden), y)` -> `loss = F.mse_loss(y, model[2](hidden))`"):
        _SQUARE,
    # 05
    ("sgd_step", "`for param in params:` -> `for param in reversed(list(params)):`"):
        "each parameter's update depends only on itself",
    ("sgd_momentum_update", "`g = grad + weight_decay * p if weight_decay != 0 else grad` -> "
                            "`g = grad + weight_decay * p`"):
        "with weight_decay 0 it adds 0 * p = 0",
    ("sgd_momentum_update", "`g = grad + weight_decay * p if weight_decay != 0 else grad` -> "
                            "`g = grad + weight_decay * p if weight_decay != -1 else grad`"):
        "weight_decay = -1 is not a setting (torch.optim.SGD rejects a negative weight_decay); "
        "for every other value it is the `weight_decay != 0` mutant above",
    # 06
    ("train_mlp", "`W1, b1, W2, b2 = (params[k].clone() for k in ('W1', 'b1', 'W2', 'b2'))` -> "
                  "`W1, b1, W2, b2 = (params[k].detach() for k in ('W1', 'b1', 'W2', 'b2'))`"): _NEW,
    ("train_mlp", "`W1, b1, W2, b2 = (params[k].clone() for k in ('W1', 'b1', 'W2', 'b2'))` -> "
                  "`W1, b1, W2, b2 = (params[k] for k in ('W1', 'b1', 'W2', 'b2'))`"): _NEW,
    ("train_mlp", "`for _ in range(steps):` -> `for _ in reversed(list(range(steps))):`"):
        "the loop variable is not used",
    ("train_mlp", "`grad_z1 = grad_h * (z1 > 0).to(z1.dtype)` -> `grad_z1 = grad_h * (z1 > 0)`"): _PROMOTE,
    ("train_mlp", "added `grad_y_hat = 2 * (y_hat - y) / y_hat.numel()`; "
                  "removed `grad_y_hat = 2 * (y_hat - y) / y_hat.numel()`"):
        "recording the loss and computing grad_y_hat do not depend on each other",
    ("train_mlp", "`losses.append(((y_hat - y) ** 2).mean().item())` -> "
                  "`losses.append(((y - y_hat) ** 2).mean().item())`"): _SQUARE,
    ("layer_grad_norms", "added `model.zero_grad(set_to_none=True)`"): _DUP,
    ("layer_grad_norms", "`model.zero_grad(set_to_none=True)` -> `model.zero_grad()`"):
        "set_to_none=True is the default",
    ("layer_grad_norms", "`model.zero_grad(set_to_none=True)` -> `model.zero_grad(set_to_none=False)`"):
        "zeros plus the new gradient is the new gradient",
    ("layer_grad_norms", "`F.mse_loss(model(x), y).backward()` -> `F.mse_loss(y, model(x)).backward()`"):
        _SQUARE,
    # 07
    ("LinearFunction", "`grad_b = grad_out.sum(0) if want_b and ctx.with_bias else None` -> "
                       "`grad_b = grad_out.sum(0) if want_b else None`"):
        "without a bias, b is None, so needs_input_grad[2] (want_b) is False: with_bias adds nothing",
    ("LinearFunction", "added `ctx.save_for_backward(x, W)`"):
        "done twice: the second call saves the same tensors again",
    ("LinearFunction", "added `ctx.with_bias = b is not None`; removed `ctx.with_bias = b is not None`"):
        "saving the tensors and noting the bias do not depend on each other",
    ("LinearFunction", "`db = grad_out.sum(0) if want_b and ctx.with_bias else None` -> "
                       "`db = grad_out.sum(0) if want_b else None`"):
        "when b is None, ctx.needs_input_grad[2] is False: want_b already says there is no bias",
    ("FakeQuantize", "added `ctx.save_for_backward((k >= -128) & (k <= 127))`"):
        "done twice: the second call saves the same mask again",
    ("train_quantized", "`for _ in range(steps):` -> `for _ in reversed(list(range(steps))):`"):
        "the loop variable is not used",
    ("train_quantized", "added `sgd.zero_grad()`"): _DUP,
    ("train_quantized", "added `prediction = LinearFunction.apply(x, FakeQuantize.apply(W_float, scale), "
                        "b_float)`; removed `prediction = LinearFunction.apply(x, FakeQuantize.apply("
                        "W_float, scale), b_float)`"):
        "zeroing the gradients before or after the forward pass: the forward does not read .grad",
    ("train_quantized", "`objective = F.mse_loss(prediction, y)` -> `objective = F.mse_loss(y, prediction)`"):
        _SQUARE,
    ("train_quantized", "added `objective.backward()`; removed `objective.backward()`"):
        "recording the loss's value and running backward do not depend on each other",
    ("train_quantized", "`return (W_float.detach(), b_float.detach(), history)` -> "
                        "`return (W_float, b_float.detach(), history)`"):
        "the trained values are the same; the contract does not say the result must be detached",
    ("train_quantized", "`return (W_float.detach(), b_float.detach(), history)` -> "
                        "`return (W_float.detach(), b_float, history)`"):
        "the trained values are the same; the contract does not say the result must be detached",
    ("record_ops", "removed `log = []`; added `log = []`"):
        "the list made before or after the class statement: __torch_dispatch__ reads it only when "
        "an operator runs, inside the with-block",
    ("record_ops", "`return op(*args, **kwargs if kwargs else {})` -> `return op(*args, **kwargs)`"):
        "torch always passes kwargs as a dict (empty when there are none)",
}

# ---------------------------------------------------------------------------
# Mutants the AST mutator cannot make: other walks of the autograd graph (04's graph_nodes and
# leaf_tensors), the ones learners write instead of the contract's depth-first pre-order walk
# with a visited set. Each body leaves in `order` the nodes the function reports, in order.

KIDS = "[c for c, _ in node.next_functions if c is not None]"
WALKS = {
    "breadth first": f"""
    from collections import deque
    order, seen, queue = [], set(), deque([t.grad_fn] if t.grad_fn is not None else [])
    while queue:
        node = queue.popleft()
        if node in seen:
            continue
        seen.add(node)
        order.append(node)
        queue.extend({KIDS})""",
    "breadth first, marked when queued": f"""
    from collections import deque
    start = [t.grad_fn] if t.grad_fn is not None else []
    order, seen, queue = [], set(start), deque(start)
    while queue:
        node = queue.popleft()
        order.append(node)
        for c in {KIDS}:
            if c not in seen:
                seen.add(c)
                queue.append(c)""",
    "no visited set": f"""
    order = []
    def visit(node):
        order.append(node)
        for c in {KIDS}:
            visit(c)
    if t.grad_fn is not None:
        visit(t.grad_fn)""",
    "visited set of names": f"""
    order, seen = [], set()
    def visit(node):
        if type(node).__name__ in seen:
            return
        seen.add(type(node).__name__)
        order.append(node)
        for c in {KIDS}:
            visit(c)
    if t.grad_fn is not None:
        visit(t.grad_fn)""",
    "post-order": f"""
    order, seen = [], set()
    def visit(node):
        if node in seen:
            return
        seen.add(node)
        for c in {KIDS}:
            visit(c)
        order.append(node)
    if t.grad_fn is not None:
        visit(t.grad_fn)""",
    "children last to first": f"""
    order, seen = [], set()
    def visit(node):
        if node in seen:
            return
        seen.add(node)
        order.append(node)
        for c in reversed({KIDS}):
            visit(c)
    if t.grad_fn is not None:
        visit(t.grad_fn)""",
    "stack, marked when pushed": f"""
    start = [t.grad_fn] if t.grad_fn is not None else []
    order, seen, stack = [], set(start), list(start)
    while stack:
        node = stack.pop()
        order.append(node)
        for c in reversed({KIDS}):
            if c not in seen:
                seen.add(c)
                stack.append(c)""",
    "stack, marked when popped": f"""
    order, seen, stack = [], set(), [t.grad_fn] if t.grad_fn is not None else []
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        order.append(node)
        stack.extend(reversed({KIDS}))""",
    "stack, marked when popped, children pushed in order": f"""
    order, seen, stack = [], set(), [t.grad_fn] if t.grad_fn is not None else []
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        order.append(node)
        stack.extend({KIDS})""",
    "marked seen after its children": f"""
    order, seen = [], set()
    def visit(node):
        if node in seen:
            return
        order.append(node)
        for c in {KIDS}:
            visit(c)
        seen.add(node)
    if t.grad_fn is not None:
        visit(t.grad_fn)""",
    "no visited set, duplicates dropped afterwards": f"""
    order = []
    def visit(node):
        order.append(node)
        for c in {KIDS}:
            visit(c)
    if t.grad_fn is not None:
        visit(t.grad_fn)
    order = list(dict.fromkeys(order))""",
    "no visited set, the last occurrence kept": f"""
    order = []
    def visit(node):
        order.append(node)
        for c in {KIDS}:
            visit(c)
    if t.grad_fn is not None:
        visit(t.grad_fn)
    order = list(dict.fromkeys(reversed(order)))[::-1]""",
    "only AccumulateGrad nodes deduplicated": f"""
    order = []
    def visit(node):
        if type(node).__name__ == "AccumulateGrad" and node in order:
            return
        order.append(node)
        for c in {KIDS}:
            visit(c)
    if t.grad_fn is not None:
        visit(t.grad_fn)""",
    "t.grad_fn left out": f"""
    order, seen = [], set()
    def visit(node):
        if node in seen:
            return
        seen.add(node)
        order.append(node)
        for c in {KIDS}:
            visit(c)
    if t.grad_fn is not None:
        for c in [c for c, _ in t.grad_fn.next_functions if c is not None]:
            visit(c)""",
}
WALK_RESULT = {"graph_nodes": "[type(node).__name__ for node in order]",
               "leaf_tensors": '[node.variable for node in order if type(node).__name__ == "AccumulateGrad"]'}


def handwritten(function: str) -> list[tuple[str, str]]:
    """(change, answer cell) for the whole-function variants of `function`."""
    if function not in WALK_RESULT:
        return []
    return [(f"walk: {label}", f"def {function}(t):{body}\n    return {WALK_RESULT[function]}\n")
            for label, body in WALKS.items()]


# The mutator is autograder/grade/mutation.py (the error model uses it too).


@dataclass
class Mutant:
    assignment: str
    function: str
    number: int
    change: str
    source: str
    """The whole mutated answer cell."""

    @property
    def key(self) -> str:
        return f"{self.function}-{self.number:03d}"

    @property
    def equivalent(self) -> str | None:
        return EQUIVALENT.get((self.function, self.change))


def solutions(assignment: str) -> dict[str, str]:
    """grade_id -> the answer cell's solution code, as a sample submission gets it."""
    scenario = Scenario("solution", assignment, "", {})
    return {c.metadata["nbgrader"]["grade_id"]: c.source for c in submission_notebook(scenario).cells
            if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("solution")}


def mutants_for(assignment: str, functions=None) -> list[Mutant]:
    cells = solutions(assignment)
    return [Mutant(assignment, f, i, change, text)
            for f in ASSIGNMENTS[assignment].functions
            if f in cells and (not functions or f in functions)
            for i, (change, text) in enumerate([(m.change, m.text) for m in mutate(cells[f])]
                                               + handwritten(f))]


# ---------------------------------------------------------------------------
# Grading: one batch of the standalone grader

INTERNAL = "(internal error)"
"""In a test's message when the test itself broke (plugin.py): not a kill."""


def grade(mutants: list[Mutant], jobs: int | None, keep: Path | None) -> dict[tuple[str, str], dict]:
    """(student, assignment) -> the grader's results.json for it; the unmutated solutions are
    graded too, as student "original"."""
    with tempfile.TemporaryDirectory(prefix="mutants-") as tmp:
        work = keep or Path(tmp)
        submitted, out = work / "submitted", work / "graded"
        originals = [Scenario("original", a, "", {}) for a in sorted({m.assignment for m in mutants})]
        scenarios = originals + [Scenario(m.key, m.assignment, m.change, {m.function: m.source})
                                 for m in mutants]
        for s in scenarios:
            a = ASSIGNMENTS[s.assignment]
            path = submitted / s.student / a.id / a.notebook
            path.parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(submission_notebook(s), path)
        command = [sys.executable, "-m", "autograder", "grade", str(submitted), "--out", str(out),
                   "--quiet", "--force"] + (["--jobs", str(jobs)] if jobs else [])
        subprocess.run(command, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
        return {(s.student, s.assignment):
                json.loads((out / s.student / f"{s.assignment}.json").read_text())
                for s in scenarios}


def outcome(m: Mutant, result: dict) -> tuple[bool, list[dict], list[dict]]:
    """(killed, failed tests of the function, tests of it that broke)."""
    mine = [t for t in result.get("tests", []) if t["name"].startswith(m.function + ":")]
    failed = [t for t in mine if t["score"] < t["max_score"]]
    broken = [t for t in failed if INTERNAL in t["output"]]
    real = [t for t in failed if INTERNAL not in t["output"]]
    return bool(real) or not mine, real, broken


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("assignments", nargs="*", help="assignment ids (default: all)")
    parser.add_argument("--function", action="append", help="only this graded function (repeatable)")
    parser.add_argument("--jobs", type=int, help="grading worker processes (default: the grader's)")
    parser.add_argument("--list", action="store_true", help="list the mutants, grade nothing")
    parser.add_argument("--messages", action="store_true",
                        help="print, for every killed mutant, the first failed test and its message")
    parser.add_argument("--keep", type=Path, help="write the submissions and results here")
    args = parser.parse_args(argv)
    unknown = set(args.assignments) - set(ASSIGNMENTS)
    if unknown:
        parser.error(f"unknown assignment {sorted(unknown)}; known: {', '.join(ASSIGNMENTS)}")
    wanted = args.assignments or [a for a, spec in ASSIGNMENTS.items() if spec.source.is_file()
                                  and (ROOT / "release" / a / spec.notebook).is_file()]
    mutants = [m for a in wanted for m in mutants_for(a, args.function)]
    if args.list:
        for m in mutants:
            mark = "  (equivalent)" if m.equivalent else ""
            print(f"{m.assignment} {m.key}: {m.change}{mark}")
        print(f"{len(mutants)} mutants")
        return 0

    start = time.monotonic()
    results = grade(mutants, args.jobs, args.keep)
    elapsed = time.monotonic() - start

    warnings = [f"the unmutated solution of {a} scores {r['score']:g} / {r['max_score']:g}"
                for (student, a), r in results.items()
                if student == "original" and r["score"] != r["max_score"]]
    stats = defaultdict(lambda: [0, 0, 0])       # (assignment, function) -> killed, counted, equivalent
    survivors, equivalent, killed_lines = [], [], []
    for m in mutants:
        killed, failed, broken = outcome(m, results[(m.key, m.assignment)])
        row = stats[(m.assignment, m.function)]
        for t in broken:
            warnings.append(f"{m.key}: a hidden test broke: {t['name']}")
        if m.equivalent:
            row[2] += 1
            equivalent.append((m, killed))
            if killed:
                warnings.append(f"{m.key} is listed as equivalent but loses points on "
                                f"{failed[0]['name'] if failed else 'every test'}: a correct "
                                f"answer is failed, or it is not equivalent ({m.change})")
            continue
        row[1] += 1
        if killed:
            row[0] += 1
            if failed:
                text = failed[0]["output"].strip()
                hint = next((line for line in text.splitlines() if line.startswith("Hint:")), "")
                killed_lines.append(f"  {m.key}: {m.change}\n      {failed[0]['name']}\n      "
                                    f"{text.splitlines()[0][:220] if text else ''}"
                                    + (f"\n      {hint[:220]}" if hint else ""))
        else:
            survivors.append(m)
    generated = {(m.function, m.change) for m in mutants}
    functions = {m.function for m in mutants}
    warnings += [f"EQUIVALENT entry matches no mutant any more: {f}: {c}"
                 for f, c in EQUIVALENT if f in functions and (f, c) not in generated]

    print("Mutation score: killed / non-equivalent mutants")
    total = [0, 0, 0]
    for assignment in wanted:
        rows = [(f, stats[(assignment, f)]) for f in ASSIGNMENTS[assignment].functions
                if (assignment, f) in stats]
        if not rows:
            continue
        k, n, e = (sum(s[i] for _, s in rows) for i in range(3))
        total = [total[0] + k, total[1] + n, total[2] + e]
        print(f"{assignment:26s} {k:4d}/{n:<4d} {100 * k / max(n, 1):5.1f}%   ({e} equivalent)")
        for f, (fk, fn, fe) in rows:
            print(f"    {f:22s} {fk:4d}/{fn:<4d} {100 * fk / max(fn, 1):5.1f}%   ({fe} equivalent)")
    k, n, e = total
    print(f"{'total':26s} {k:4d}/{n:<4d} {100 * k / max(n, 1):5.1f}%   ({e} equivalent)")
    print(f"\nSurvivors ({len(survivors)}): gaps in the hidden tests")
    for m in survivors:
        print(f"  {m.assignment} {m.key}: {m.change}")
    print(f"\nEquivalent, not counted ({len(equivalent)}):")
    for m, _ in equivalent:
        print(f"  {m.assignment} {m.key}: {m.change}\n      {m.equivalent}")
    if args.messages:
        print("\nKilled: the first failed test and its message")
        print("\n".join(killed_lines))
    for line in warnings:
        print(f"\nWARNING: {line}")
    print(f"\n{len(mutants)} mutants graded in {elapsed:.0f} s")
    return 1 if warnings else 0


if __name__ == "__main__":
    raise SystemExit(main())

"""What an error torch or Python raised means, in plain words, read from its message alone.

Two kinds: `NAMING` messages single out the mistake whatever the input was (a tensor used as a
truth value); `DESCRIBING` ones say what the error means and what to look at, naming possible
sources only as examples (a shape mismatch, a graph used twice). A hint chosen from the
learner's code or a replay comes first (grade/student.py); a description is shown only when
no hint is, on a line of its own ("What the error means: ..."), since it names no cause.
`tests/grade/test_errors.py` raises each error with today's torch, so a changed wording fails
there, not silently in a learner's message.
"""

from __future__ import annotations

import ast
import re

NAMING = {
    re.compile(r"Boolean value of Tensor with more than one"): (
        "a tensor with several values has no single truth value, so `if t:`, `t in a_list`, "
        "`t == u` used as a condition and `and`/`or` on tensors raise this. To test for a missing "
        "argument write `if b is not None:`; to find a tensor in a list compare identities "
        "(`any(t is u for u in items)`, or a set of id(t))."),
    re.compile(r"only one element tensors can be converted to Python scalars"): (
        "a function of Python's math module (math.exp, math.sqrt, ...), float(t) or int(t) takes "
        "one number, not a tensor of several: use the torch function, which works elementwise "
        "(torch.exp(z))."),
}

DESCRIBING = {
    re.compile(r"Trying to backward through the graph a second time"): (
        "backward() ran through the same graph twice: autograd frees a graph's saved values "
        "after backward(), so a value computed once (before a loop, or in an earlier step) "
        "cannot be backpropagated again. Compute the forward pass from the current parameters "
        "in every step."),
    re.compile(r"does not require grad and does not have a grad_fn"): (
        "backward() was called on a value autograd did not record (it has no grad_fn): it was "
        "computed under torch.no_grad(), from .detach()ed or .data tensors, or from tensors "
        "without requires_grad=True. Compute the loss from the parameters themselves, with "
        "gradients on."),
    re.compile(r"leaf Variable that requires grad is being used in an in-place operation"): (
        "a tensor that requires grad (a parameter) was changed in place while autograd "
        "records: make the update inside `with torch.no_grad():`."),
    re.compile(r"variables needed for gradient computation has been modified by an inplace"): (
        "a value autograd saved for backward() was changed in place before backward() ran: "
        "compute it out of place (`x = x + d`, not `x += d`), or change it after backward()."),
    re.compile(r"grad can be implicitly created only for scalar outputs"): (
        "backward() without an argument needs a single number: reduce the output to the "
        "scalar loss first (.sum() or .mean()), or pass the output's gradient (t.backward(g))."),
    re.compile(r"mat1 and mat2 shapes cannot be multiplied \((\d+)x(\d+) and (\d+)x(\d+)\)"): (
        "a matrix product of a ({0}, {1}) and a ({2}, {3}) matrix: the inner sizes {1} and {2} "
        "differ. In A @ B the columns of A must match the rows of B: check the order of the "
        "operands and which one needs .T."),
    re.compile(r"The size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\) "
               r"at non-singleton dimension (\d+)"): (
        "an elementwise operation met sizes {0} and {1} in dimension {2}, which do not "
        "broadcast (sizes must agree, or one be 1): check which tensor each operand is and "
        "its shape."),
    re.compile(r"expected m1 and m2 to have the same dtype, but got: (\w+) != (\w+)"): (
        "a matrix product of a {0} and a {1} tensor: both must have one dtype. Make new "
        "tensors with the inputs' dtype (torch.zeros(..., dtype=x.dtype))."),
    re.compile(r"'NoneType' object|operand type\(s\) for .*'NoneType'"): (
        "a value is None where a tensor belongs: a function without `return` gives None, and "
        "a tensor's .grad is None until a backward() reaches it (and again after zero_grad())."),
    re.compile(r"Dimension out of range \(expected to be in range of \[(-?\d+), (-?\d+)\], "
               r"but got (-?\d+)\)"): (
        "dimension {2} does not exist here (this tensor's dimensions are {0} to {1}): check "
        "which dimension the formula reduces or indexes over."),
    re.compile(r"index (-?\d+) is out of bounds for dimension (\d+) with size (\d+)"): (
        "index {0} reaches past the end of dimension {1}, whose size is {2} (its indices run "
        "from 0 to one less than {2}): check which size each loop runs over and the order of "
        "the indices."),
    re.compile(r"stack expects a non-empty TensorList|expected a non-empty list of Tensors"): (
        "torch.stack or torch.cat was given an empty list: a loop that builds the pieces made "
        "none (an input with no rows, or a loop that never ran). With no rows the result still "
        "has a shape: make it directly (e.g. torch.zeros(0, m))."),
}


def _said(table: dict, message: str) -> str:
    for pattern, meaning in table.items():
        found = pattern.search(message)
        if found:
            return meaning.format(*found.groups())
    return ""


def naming(message: str) -> str:
    """The mistake an error message singles out, whatever the input was; "" for none."""
    return _said(NAMING, message)


def describing(message: str) -> str:
    """What an error message means and where to look; "" for a message not in the table."""
    return _said(DESCRIBING, message)


def _segment(source: str, node) -> str:
    """The source text of `node` on one line (a statement written over several lines joined)."""
    text = ast.get_source_segment(source, node) or ast.unparse(node)
    text = re.sub(r"\s*\n\s*", " ", text).replace("( ", "(").replace(" )", ")")
    return text if len(text) <= 120 else text[:117] + "..."


def own_check(source: str, line: int) -> str:
    """When the statement at `line` of the learner's `source` is a check of their own, a `raise X`
    (not a bare re-raise, nor one in an `except` block: the cause is then the first error) or an
    `assert`, the sentence naming it: a call the grader makes with arguments the function must
    accept (never with ones it must refuse) ended there, so that check refused valid arguments.
    "" for any other statement."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return ""
    found: list = []

    def visit(node, ancestors):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt) and child.lineno <= line <= (child.end_lineno or child.lineno):
                found[:] = [child, [*ancestors, node]]
            visit(child, [*ancestors, node])
    visit(tree, [])
    if not found:
        return ""
    statement, ancestors = found
    if isinstance(statement, ast.Assert):
        return (f"your own check refused valid arguments: `assert {_segment(source, statement.test)}` "
                f"(line {statement.lineno}) is false for these arguments. Assert only what the "
                f"exercise promises of the arguments.")
    if not isinstance(statement, ast.Raise) or statement.exc is None \
            or any(isinstance(a, ast.ExceptHandler) for a in ancestors):
        return ""
    raised = f"`{_segment(source, statement)}` ran"
    parent = ancestors[-1] if ancestors else None
    if isinstance(parent, ast.If):
        holds = "holds" if statement in parent.body else "is false"
        return (f"your own check refused valid arguments: `if {_segment(source, parent.test)}:` "
                f"(line {parent.lineno}) {holds} for these arguments, so {raised}. Make the "
                f"check refuse only the arguments the exercise says to refuse.")
    return (f"your own check refused valid arguments: {raised} (line {statement.lineno}) for "
            f"these arguments. Raise only for the arguments the exercise says to refuse.")

"""What the grader and the notebook's checks call: the refusals of a function's code, the
statements it reaches, a function's `Rules` from the notebook's lists, the message a learner
reads, and the cells of a learner's kernel in the order it ran them."""

import ast

from .rules import Finding, Rules
from .program import SETUP, _Program, _bound, _too_deep
from .checker import _Checker


def refusals(cells: list[dict], function: str, rules: Rules) -> list[Finding]:
    """What the code `function` can reach uses outside `rules`, in the cells that run above its
    check cell: each `{"source", "label", "answer"}`, `answer` the grade_id of an answer cell
    (None for others), `label` how messages name the cell (SETUP for the notebook's own)."""
    return reach(cells, function, rules)[0]


def reach(cells: list[dict], function: str, rules: Rules) -> tuple[list[Finding], dict]:
    """(refusals, statements): what `refusals` finds, and the learner's statements it read, as
    {cell index: [top-level statement, ...]} in source order. The statements are what `function`
    reaches by Python's scoping, starting from the statements that bind its name (its `def`) and
    following the global names their code uses: grading runs these, the setup cells, and nothing
    else of the learner's (a demo line, an unused import, another exercise's cell never runs)."""
    program = _Program(cells)
    labels = [c["label"] for c in cells]
    start = [d for d in program.binds.get(function, []) if labels[d.cell] != SETUP]
    checker = _Checker(program, rules, labels)
    for i, (cell, tree) in enumerate(zip(cells, program.trees)):
        if cell.get("answer") == function and tree is None and _too_deep(cell["source"]):
            checker.cell = i
            checker.refuse(ast.Pass(lineno=1), "code nested too deeply for Python's parser "
                                               "(split it into steps)")
    found = checker.run(start)
    statements: dict[int, list[ast.stmt]] = {}
    for d in checker.visited:
        if labels[d.cell] != SETUP:
            statements.setdefault(d.cell, []).append(d.node)
    for nodes in statements.values():
        nodes.sort(key=lambda n: (n.lineno, n.col_offset))
    return found, statements


def reached(cells: list[dict], functions) -> dict[int, set[int]]:
    """cell index -> the lines of the statements that answer cells and `functions` reach by
    name, transitively (a helper, a constant, an import a cell the learner added defines): what
    grading runs of the cells that are not answer cells, and nothing else of them."""
    program = _Program(cells)
    todo = list(functions)
    for c, tree in zip(cells, program.trees):
        if c.get("answer") is not None and tree is not None:
            todo += [n.id for n in ast.walk(tree) if isinstance(n, ast.Name)]
    seen, walked, out = set(), set(), {}
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for d in program.binds.get(name, []):
            node = d.node
            if id(node) in walked:  # a statement binding many names is walked once
                continue
            walked.add(id(node))
            first = min([node.lineno, *(x.lineno for x in getattr(node, "decorator_list", []))])
            out.setdefault(d.cell, set()).update(range(first, (node.end_lineno or node.lineno) + 1))
            todo += [n.id for n in ast.walk(node) if isinstance(n, ast.Name)]
    return out


def rules_from_lists(function: str, exercises, allowed: dict, not_allowed: dict, instead: dict,
                     stand_ins) -> Rules | None:
    """The Rules of `function` from the lists a notebook's setup cell holds (and course.py, in the
    same shape): `exercises` in their order, `allowed` (function, or "Class.method" for the
    method a by-hand rule is about) -> ATen operators, `not_allowed` (same keys) -> names refused,
    `instead` (same keys) -> what to use instead, `stand_ins` -> the functions grading stands in
    for. None for a function with no by-hand rule."""
    keys = [k for k in allowed if k.split(".")[0] == function]
    if not keys:
        return None
    key = keys[0]
    order = list(exercises)
    earlier = frozenset(order[:order.index(function)]) if function in order else frozenset()
    standing_in = frozenset(stand_ins) & earlier
    return Rules(ops=frozenset(allowed[key]), banned=frozenset(not_allowed.get(key, ())),
                 classes="." in key, section=key.partition(".")[2],
                 instead=instead.get(key, Rules._field_defaults["instead"]), standing_in=standing_in,
                 later=frozenset(stand_ins) - standing_in - {function})


def refusal_message(function: str, found: list[Finding], instead: str) -> str:
    """What the learner reads, in grading and in the notebook's checks alike."""
    by_line: dict[tuple, list] = {}
    for r in found:
        by_line.setdefault((r.cell, r.line, r.text), []).append(r.what)
    shown = "\n".join(f"  {cell}, line {line}: `{text}`: {'; '.join(whats)}"
                      for (cell, line, text), whats in list(by_line.items())[:4])
    more = f"\n  ... and {len(by_line) - 4} more lines" if len(by_line) > 4 else ""
    return (f"{function} is written with what this exercise does not allow, so it was not run:\n"
            f"{shown}{more}\nInstead: {instead}.")


def _defines(source: str, name: str) -> bool:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return any(name in _bound(node) for node in tree.body)


KERNEL_SETUP = ("STAND_IN_CODE = ", "class _Checker")
"""Text only the notebook's own setup cells hold (the checks, and this file)."""


def kernel_cells(function: str, code, history) -> list[dict]:
    """The cells as a learner's kernel has run them (IPython's `In`, oldest first), for the
    notebook's own checks: an older run of a cell that was run again is left out, the cell that
    defined `code` (the function being checked, as the kernel holds it) is its answer cell."""
    import linecache
    filename = getattr(code, "co_filename", "")
    own = "".join(linecache.getlines(filename)) if filename else ""
    texts, seen = [], set()
    for text in reversed(list(history)):
        if isinstance(text, str) and text.strip() and text not in seen:
            seen.add(text)
            texts.append(text)
    texts.reverse()
    if own not in seen:  # not a cell the kernel ran (a library's file): the last cell defining it
        own = next((t for t in reversed(texts) if _defines(t, function)), "")
    cells = []
    for text in texts:
        if any(mark in text for mark in KERNEL_SETUP):
            cells.append({"source": text, "label": SETUP, "answer": None})
        elif text == own:
            cells.append({"source": text, "label": f"cell {function}", "answer": function})
        else:
            cells.append({"source": text, "label": "a cell you added", "answer": None})
    return cells

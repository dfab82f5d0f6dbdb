"""The subset of Python a by-hand answer is written in, decided from the code before anything runs.

A by-hand exercise (write the product, the derivative, the gradient, the update yourself) is a
rule about the code, so it is decided from the code: with `ast`, in the grader's own process
(and, with this same file, in the notebook's visible checks), never by watching the learner's
process from inside it, where learner code has the same power as the watcher.

`refusals(cells, function, rules)` reads the cells a graded function can reach, in notebook
order: all of its answer cell, and, transitively, every statement of the other cells that binds
a global name that code uses (a helper, a constant, an import). Each construct outside the
subset is one `Finding`, with its cell, line, the construct and what to use instead.

The subset (`Rules`, one per by-hand function):
* modules: torch (and torch.nn, torch.nn.functional, torch.linalg), math, itertools, functools,
  operator, copy; of torch, only functions whose operators the exercise allows (`ops`: the same
  ATen operator names the recorder checks, course.py), a few plain values (dtypes, `torch.tensor`,
  `torch.no_grad`, ...), nothing private (`torch._C`, `torch.ops`, `torch.library`);
* attributes of values: tensor methods whose operators are allowed, a tensor's metadata (shape,
  dtype, `.grad`, ...), the methods of lists, dicts and strings; no dunder or private attribute;
  assigning an attribute only to a tensor's `.data`, `.grad`, `.requires_grad` (and, in a class,
  to the `ctx` of its methods);
* builtins: the plain ones (len, range, zip, isinstance, print, ...); no reflection (getattr,
  setattr, vars, globals, eval, exec, compile, __import__, type, open, ...);
* no class definitions unless the exercise is a class (`classes`); no star imports.

The parts, in the order they are read:
    tables.py    what may be named (modules, builtins, attributes, torch's aliases): data
    rules.py     `Rules`, `Finding`, whether a torch name is allowed under a `Rules`
    program.py   the cells' statements parsed once, and the names each binds
    names.py     what an expression names (a module, a local, a class torch holds, ...)
    checker.py   the walk that refuses constructs and keeps the statements it read
    reach.py     what the grader and the notebooks' checks call

Only the standard library is used: a notebook with by-hand exercises carries the parts joined
into one locked cell (`one_text`, written there by `python -m autograder build`).
"""

import ast
from pathlib import Path

from .checker import _Checker
from .program import SETUP, _parse
from .reach import (KERNEL_SETUP, kernel_cells, reach, reached, refusal_message, refusals,
                    rules_from_lists)
from .rules import Finding, Rules, lines_of
from .tables import MODULES

PARTS = ("tables", "rules", "program", "names", "checker", "reach")
"""The part files in the order one namespace must run them (each uses only names of earlier parts
at import, of any part when called)."""


def one_text() -> str:
    """The parts as one module, for a notebook's cell: each part's text in PARTS order, without
    the relative imports that join the parts here (in one namespace they are the same names)."""
    texts = [f'"""{__doc__}"""\n']
    for part in PARTS:
        text = (Path(__file__).parent / f"{part}.py").read_text()
        lines = text.splitlines(keepends=True)
        for node in reversed(ast.parse(text).body):
            if isinstance(node, ast.ImportFrom) and node.level:
                del lines[node.lineno - 1:node.end_lineno]
        texts.append("".join(lines).strip("\n") + "\n")
    return "\n\n".join(texts)


__all__ = ["KERNEL_SETUP", "MODULES", "PARTS", "SETUP", "Finding", "Rules", "_Checker", "_parse",
           "kernel_cells", "lines_of", "one_text", "reach", "reached", "refusal_message",
           "refusals", "rules_from_lists"]

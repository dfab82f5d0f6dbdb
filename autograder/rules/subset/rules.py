"""One by-hand function's subset (`Rules`), a construct found in the learner's code (`Finding`),
and whether a torch name is allowed under a `Rules`."""

import inspect
import re
import sys
from typing import NamedTuple

from .tables import ALIASES, GRAPH, MODULES, PRODUCT_NAMES, TORCH_VALUES, UNSAFE_TORCH


_LINES = re.compile(r"\r\n|\r|\n")
"""Line breaks as Python's tokenizer counts them (not a form feed or a vertical tab)."""
MAX_QUOTE = 120
"""Characters of a line quoted in a refusal."""


class Rules(NamedTuple):
    """The subset one by-hand function is written in."""

    ops: frozenset
    """The ATen operators the exercise allows (course.py): a torch function or tensor method is
    allowed when the operator it runs is."""
    banned: frozenset = frozenset()
    """Names refused whatever their operator (the exercise's text forbids them)."""
    classes: bool = False
    """Whether class definitions are allowed (the exercise is an autograd.Function)."""
    instead: str = "write it with the operations the exercise allows"
    section: str = ""
    """For a class: the method the by-hand rule is about (07: "backward"); its other methods
    may use any public torch function (LinearFunction's forward), reflection still refused."""
    standing_in: frozenset = frozenset()
    """Graded functions of earlier exercises that grading replaces by its own stand-in while this
    one runs: a call of one is allowed, its code is checked under its own rules."""
    later: frozenset = frozenset()
    """Graded functions of later exercises that have a stand-in: not to be called (the stand-in
    would compute, unchecked, what this exercise may not use)."""


class Finding(NamedTuple):
    """A construct in the learner's code, where it is and why it matters: a refusal of the subset
    (this file), or a flag for the instructor (review.py)."""

    cell: str
    """"cell matmul" (an answer cell), "a cell you added", "the notebook's setup cell"."""
    line: int
    text: str
    what: str
    """The construct and why it is refused: "getattr (reflection: ...)"."""

    @property
    def construct(self) -> str:
        return self.what.split(" (", 1)[0]

    @property
    def grade_id(self) -> str:
        """The answer cell's grade_id ("matmul"), or the label of another cell."""
        return self.cell.removeprefix("cell ")

    def describe(self) -> str:
        return f"{self.cell}, line {self.line}: `{self.text}`: {self.what}"


def lines_of(source: str) -> list[str]:
    return _LINES.split(source)


def op_allowed(name: str, rules: Rules) -> bool:
    """Whether the torch function or tensor method `name` runs only operators `rules` allow."""
    if name in rules.banned or name.rstrip("_") in rules.banned:
        return False
    ops = rules.ops
    if name.startswith("_foreach_"):
        return op_allowed(name[len("_foreach_"):], rules)
    if name.startswith("_"):
        return False
    base = name[:-1] if name.endswith("_") else name
    if name in ops or base in ops or ALIASES.get(name) in ops or ALIASES.get(base) in ops:
        return True
    return base in PRODUCT_NAMES and "mm" in ops


def _torch_now():
    """torch, as the process that reads the code has it (the grader's, or the learner's kernel for
    the notebook's own checks: what a name of torch is, is read from torch, not from a list)."""
    return sys.modules.get("torch") or __import__("torch")


def _outside_torch(module: str, name: str) -> str | None:
    """Why `module.name`, in a method any public torch function may use, reaches past torch's
    computations, or None: a module of Python's that torch imported (`torch.sys`, a module object
    reaches everything it imported), or a function of a part of torch that runs code or reaches
    files and processes (`torch.load` unpickles: it runs whatever the file says)."""
    _torch_now()
    found = sys.modules.get(module)
    value = inspect.getattr_static(found, name, None) if found is not None else None
    if value is None:  # not there when read: a part torch loads only when first used, or a typo
        return f"not a name {module} has"
    if inspect.ismodule(value):
        where = value.__name__
        if where != "torch" and not where.startswith("torch."):
            return f"Python's module {where}, which torch imports: it reaches the interpreter"
    else:
        where = getattr(value, "__module__", None)
        where = where if isinstance(where, str) else "torch"
        if where.split(".")[0] != "torch":
            return f"not torch's own (it comes from {where})"
    if set(where.split(".")[1:]) & UNSAFE_TORCH:
        return "a part of torch that registers operators, runs code, or reaches files or processes"
    return None


def tensor_name(name: str) -> bool:
    """Whether `name` is a public name of torch's tensors or of torch: what an attribute of a value
    may be in a method any public torch function may use (not `.modules`, `.getattr`, `.sys`)."""
    torch = _torch_now()
    if name.startswith("_"):
        return False
    if inspect.getattr_static(torch.Tensor, name, None) is not None:
        return True
    value = inspect.getattr_static(torch, name, None)
    return value is not None and not inspect.ismodule(value) and _outside_torch("torch", name) is None


def _module_attribute(module: str, name: str, rules: Rules, lenient: bool = False) -> str | None:
    """None if `module.name` is allowed, else why not."""
    if name.startswith("__") and name.endswith("__"):
        return "a dunder attribute"
    if rules.classes and name in GRAPH:
        return "autograd's graph or its recording, which a class's methods do not need"
    if rules.classes and module == "torch.autograd" and name != "Function":
        return "autograd's machinery, which a class's methods do not need"
    if module == "torch.autograd.function" and not rules.classes:
        return "autograd, which the exercise computes by hand"
    if lenient and module.startswith("torch") and not name.startswith("_") \
            and name not in rules.banned and name not in UNSAFE_TORCH:
        return _outside_torch(module, name)
    if module in MODULES and MODULES[module] == "any":
        return None if not name.startswith("_") else "a private name"
    if isinstance(MODULES.get(module), set):
        if name in MODULES[module] and (name != "matmul" or op_allowed("matmul", rules)):
            return None
        return "not one a by-hand answer needs"
    # torch and its submodules
    if f"{module}.{name}" in MODULES:
        if module + "." + name == "torch.autograd" and not rules.classes:
            return "autograd"
        return None
    if name in rules.banned:
        return "the exercise forbids it"
    if module == "torch.autograd":
        return None if name == "Function" and rules.classes else "autograd"
    if name in TORCH_VALUES and module in ("torch", "torch.nn"):
        return None
    if name.startswith("_") and not name.startswith("_foreach_"):
        return "torch's internals"
    if module == "torch.linalg":
        name = "linalg_" + name if ("linalg_" + name) in rules.ops else name
    if op_allowed(name, rules):
        return None
    return "not one a by-hand answer needs"

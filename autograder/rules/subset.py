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

Only the standard library is used: the notebooks' setup cells carry a copy of this file.
"""

import ast
import functools
import re
from typing import NamedTuple

MODULES = {
    "torch": None, "torch.nn": None, "torch.nn.functional": None, "torch.linalg": None,
    "torch.autograd": None,
    "math": "any", "itertools": "any",
    "functools": {"reduce", "partial", "lru_cache", "cache", "wraps"},
    "operator": {"add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "neg", "pos", "abs",
                 "eq", "ne", "lt", "le", "gt", "ge", "not_", "and_", "or_", "xor", "iadd",
                 "isub", "imul", "itruediv", "itemgetter", "index", "matmul"},
    "copy": {"copy", "deepcopy"},
    # annotations: names that describe types and compute nothing (no get_type_hints, which
    # evaluates text, no cast of a value)
    "typing": {"Optional", "Union", "Tuple", "List", "Dict", "Set", "FrozenSet", "Sequence",
               "Mapping", "Iterable", "Iterator", "Callable", "Any", "Literal", "Final",
               "TypeVar", "TYPE_CHECKING", "NamedTuple", "Protocol"},
    "__future__": {"annotations"},
    # PyTorch's own decorator for a backward written by hand ("Extending torch.autograd")
    "torch.autograd.function": {"once_differentiable", "Function", "FunctionCtx"},
}
"""Modules a by-hand answer may import: None means torch's rule (`torch_attribute`), "any" every
public name, else the names allowed."""

BUILTINS = frozenset("""
    abs all any bool dict divmod enumerate filter float int isinstance issubclass len list map max
    min pow print range reversed round set slice sorted str sum tuple zip frozenset iter next
    callable repr format chr ord complex hash id bin hex oct ascii
    None True False NotImplemented Ellipsis
    ArithmeticError AssertionError Exception IndexError KeyError LookupError NotImplementedError
    OverflowError RuntimeError StopIteration TypeError ValueError ZeroDivisionError
""".split())
"""Builtins any answer may use."""
EXCEPTIONS = frozenset(name for name, value in vars(__import__("builtins")).items()
                       if isinstance(value, type) and issubclass(value, Exception))
"""Python's exception classes (and warning categories): values to raise and catch, nothing more."""
CLASS_BUILTINS = frozenset({"staticmethod", "classmethod", "super"})
"""Builtins of class definitions, where the exercise is a class."""
REFLECTION = {
    **dict.fromkeys(("getattr", "setattr", "delattr", "hasattr", "vars", "globals", "locals",
                     "dir", "type", "object", "property", "memoryview", "super", "classmethod",
                     "staticmethod"),
                    "reflection: reaching objects and attributes by name or by their type"),
    **dict.fromkeys(("eval", "exec", "compile", "__import__", "__build_class__"),
                    "running code given as text"),
    **dict.fromkeys(("open", "input", "breakpoint", "help", "exit", "quit", "__builtins__",
                     "__loader__", "__spec__"), "the interpreter or files"),
}
"""Builtins refused, and why."""

TENSOR_META = frozenset("""
    shape dtype device ndim dim size numel nelement item tolist is_floating_point is_complex
    is_contiguous requires_grad requires_grad_ is_leaf grad data layout stride T mT H mH float
    double half int long bool to type_as cpu contiguous clone detach detach_ new_tensor
    element_size itemsize eps tiny resolution bits type
""".split())
"""A tensor's metadata and conversions (and torch.finfo's fields): allowed on any value."""
PYTHON_METHODS = frozenset("""
    append extend insert pop remove clear copy items keys values get setdefault update add
    discard union intersection difference index count sort reverse join format split strip
    startswith endswith lower upper replace real imag conjugate
""".split())
"""Methods of lists, dicts, sets, strings and numbers."""
GRAPH = frozenset({"grad_fn", "next_functions", "enable_grad", "set_grad_enabled", "graph",
                   "grad_mode", "register_hook", "register_prehook", "retain_grad"})
"""What reaches autograd's graph or turns gradient recording on: refused in every method of a
class exercise (07), whose forward could otherwise build the library's graph and hand its nodes
to the backward written by hand."""
MAX_DEPTH = 200
"""How deeply nested a checked statement may be, in levels of its syntax tree (a sum of 200
terms; an answer's deepest statement is about 15): the walk reads every level, and a deeper
statement is refused, named, rather than overflow Python's stack."""
STORED = frozenset({"data", "grad", "requires_grad"})
"""Attributes of a tensor an answer may assign (p.data = ..., p.grad = None)."""
TORCH_VALUES = frozenset("""
    tensor as_tensor asarray Tensor Size no_grad enable_grad is_tensor is_floating_point
    finfo iinfo inf nan pi e newaxis get_default_dtype result_type promote_types
    broadcast_shapes broadcast_tensors can_cast dtype Parameter Module Function
    set_grad_enabled is_grad_enabled inference_mode
    float16 bfloat16 float32 float64 half float double int8 int16 int32 int64 uint8 bool long
    int short complex64 complex128
""".split())
"""Names of torch (and of torch.nn, torch.autograd) that are plain values or classes to test
against: allowed wherever the module is."""
ALIASES = {
    "multiply": "mul", "subtract": "sub", "divide": "div", "true_divide": "div",
    "absolute": "abs", "negative": "neg", "positive": "neg", "greater": "gt",
    "greater_equal": "ge", "less": "lt", "less_equal": "le", "not_equal": "ne", "clip": "clamp",
    "arccos": "acos", "arcsin": "asin", "arctan": "atan", "arctan2": "atan2", "arccosh": "acosh",
    "arcsinh": "asinh", "arctanh": "atanh", "swapaxes": "transpose", "swapdims": "transpose",
    "moveaxis": "movedim", "concat": "cat", "concatenate": "cat", "hstack": "cat",
    "vstack": "cat", "row_stack": "cat", "column_stack": "cat", "dstack": "cat",
    "ravel": "reshape", "reshape_as": "reshape", "sum_to_size": "sum", "square": "pow",
    "vector_norm": "linalg_vector_norm", "expand_dims": "unsqueeze", "dsplit": "split",
    "hsplit": "split", "vsplit": "split", "tensor_split": "split", "atleast_1d": "reshape",
    "atleast_2d": "reshape", "fliplr": "flip", "flipud": "flip", "trapz": "sum",
    "mean": "mean", "fill": "fill_", "zero": "zero_", "new_empty": "new_empty",
    "floor_divide": "floor_divide", "rsub": "rsub", "sigmoid": "sigmoid", "expit": "sigmoid",
    "mse_loss": "mse_loss", "positive_": "neg", "outer": "mul", "ger": "mul", "kron": "mul",
}
"""A Python name -> the operator it runs, where the two differ."""
PRODUCT_NAMES = frozenset({
    "matmul", "__matmul__", "mm", "bmm", "einsum", "tensordot", "addmm", "inner", "dot", "vdot",
    "linear", "mv", "addmv", "baddbmm", "addbmm", "chain_matmul", "multi_dot", "vecdot"})
"""Names that compute a matrix product: allowed where the library's products are ("mm")."""

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


UNSAFE_TORCH = frozenset({"library", "ops", "utils", "overrides", "func", "fx", "jit", "compile",
                          "multiprocessing", "distributed", "hub", "package", "classes"})
"""Parts of torch that register operators, run code or reach processes: refused even where any
torch function is allowed (a class's methods other than the by-hand one)."""


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
        return None
    if module in MODULES and MODULES[module] == "any":
        return None if not name.startswith("_") else "a private name"
    if isinstance(MODULES.get(module), set):
        if name in MODULES[module] and (name != "matmul" or op_allowed("matmul", rules)):
            return None
        return f"not one a by-hand answer needs"
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


class _Definition(NamedTuple):
    cell: int
    node: ast.stmt


@functools.lru_cache(maxsize=64)
def _parse(source: str) -> ast.Module | None:
    """A cell's tree (the setup cells' are read once per process; nothing here changes a tree)."""
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _too_deep(source: str) -> bool:
    """Whether Python's parser gives up on `source` for its depth (not a plain syntax error,
    which running the cell reports itself, running nothing)."""
    try:
        ast.parse(source)
    except (RecursionError, MemoryError):
        return True
    except (SyntaxError, ValueError):
        return False
    return False


@functools.lru_cache(maxsize=64)
def _cell_binds(source: str) -> tuple:
    """(index of a top-level statement, the global names it binds), for one cell's source: what
    it binds itself, and names its functions declare `global`."""
    tree = _parse(source)
    out = []
    for k, node in enumerate(tree.body if tree else ()):
        declared = {n for x in ast.walk(node) if isinstance(x, ast.Global) for n in x.names}
        out.append((k, frozenset(_bound(node) | declared)))
    return tuple(out)


class _Program:
    """The cells' top-level statements, parsed once; which statements bind which global name."""

    def __init__(self, cells: list[dict]):
        self.cells = cells
        self.trees: list[ast.Module | None] = []
        self.lines: list[list[str]] = []
        self.stars: list[_Definition] = []
        """`from m import *` statements: whatever name no cell binds may come from one."""
        self.postponed: list[bool] = []
        """Per cell: `from __future__ import annotations` (its annotations stay text)."""
        self.binds: dict[str, list[_Definition]] = {}
        """name -> the statements that bind it: all in the last learner cell that does (as a
        kernel holds it: a later cell rebinding a name replaces what an earlier one bound, and
        grading runs only what is read), and always the setup cells' too. A read may run before
        the learner's binding (`T = sys; sys = None`), or that binding may never run (`if
        False:`, a `global` in a function never called): the name then still holds what the
        setup bound, which must be allowed as well."""
        for i, cell in enumerate(cells):
            tree = _parse(cell["source"])
            self.trees.append(tree)
            self.lines.append(lines_of(cell["source"]))
            self.postponed.append(tree is not None and any(
                isinstance(n, ast.ImportFrom) and n.module == "__future__"
                and any(a.name == "annotations" for a in n.names) for n in tree.body))
            self.stars += [_Definition(i, n) for n in (tree.body if tree else ())
                           if isinstance(n, ast.ImportFrom) and any(a.name == "*" for a in n.names)]
            for k, names in _cell_binds(cell["source"]):
                for name in names:
                    found = self.binds.setdefault(name, [])
                    if found and found[-1].cell != i:  # an earlier learner cell's: replaced
                        found[:] = [d for d in found if cells[d.cell].get("label") == SETUP]
                    found.append(_Definition(i, tree.body[k]))


def _depth(node: ast.AST) -> int:
    """How deeply nested a tree is (read without recursion: the walk must not overflow)."""
    deepest, stack = 0, [(node, 1)]
    while stack:
        n, d = stack.pop()
        deepest = max(deepest, d)
        if deepest > MAX_DEPTH:
            return deepest
        stack.extend((c, d + 1) for c in ast.iter_child_nodes(n))
    return deepest


def _bound(node: ast.stmt) -> set[str]:
    """Global names a top-level statement binds (not those of the functions it defines)."""
    out = set()
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, ast.ImportFrom) and node.module == "__future__":
        return set()  # a compiler directive, kept with every part of its cell that runs
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in node.names if a.name != "*"}
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(n.name)
            continue
        if isinstance(n, ast.Lambda):
            continue
        if isinstance(n, COMPREHENSIONS):
            out |= _walrus_targets(n)  # its own names stay in it; := binds the enclosing scope
            continue
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            out.add(n.id)
        elif isinstance(n, ast.NamedExpr) and isinstance(n.target, ast.Name):
            out.add(n.target.id)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            out |= {(a.asname or a.name).split(".")[0] for a in n.names if a.name != "*"}
        elif isinstance(n, ast.ExceptHandler) and n.name:
            out.add(n.name)
        else:
            out |= _captured(n)
        stack.extend(ast.iter_child_nodes(n))
    return out


COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def _walrus_targets(comprehension) -> set[str]:
    """Names a comprehension's `:=` binds in the scope around it (its loop names it keeps)."""
    out, stack = set(), [comprehension]
    while stack:
        n = stack.pop()
        if isinstance(n, (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(n, ast.NamedExpr) and isinstance(n.target, ast.Name):
            out.add(n.target.id)
        stack.extend(ast.iter_child_nodes(n))
    return out


def _captured(node) -> set[str]:
    """The name a `match` pattern binds (`case (n, k):`, `case [first, *rest]:`, `**extra`)."""
    if isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
        return {node.name}
    if isinstance(node, ast.MatchMapping) and node.rest:
        return {node.rest}
    return set()


def _imported_module(node: ast.stmt, name: str) -> str | None:
    """The module `name` is bound to by the import statement `node` (None: not a module)."""
    found = None  # `import math as T, torch as T`: Python keeps the last
    if isinstance(node, ast.Import):
        for a in node.names:
            if a.asname == name:
                found = a.name
            elif a.asname is None and a.name.split(".")[0] == name:
                found = name
    if isinstance(node, ast.ImportFrom) and node.module and not node.level:
        for a in node.names:
            if (a.asname or a.name) == name:
                found = f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in MODULES else None
    return found


def _locals(function) -> set[str]:
    """Names local to a function or lambda: its parameters and what its body binds."""
    a = function.args
    names = {p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)}
    names |= {p.arg for p in (a.vararg, a.kwarg) if p is not None}
    declared = set()
    body = function.body if isinstance(function.body, list) else [function.body]
    stack = list(body)
    while stack:
        n = stack.pop()
        if isinstance(n, (ast.Global, ast.Nonlocal)):
            declared |= set(n.names)
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(n.name)
            stack.extend(n.decorator_list)
            continue
        if isinstance(n, ast.Lambda):
            continue
        if isinstance(n, COMPREHENSIONS):
            names |= _walrus_targets(n)  # a comprehension's loop names are its own, not the function's
            continue
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            names.add(n.id)
        elif isinstance(n, ast.arg):
            names.add(n.arg)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            names |= {(x.asname or x.name).split(".")[0] for x in n.names}
        elif isinstance(n, ast.ExceptHandler) and n.name:
            names.add(n.name)
        else:
            names |= _captured(n)
        stack.extend(ast.iter_child_nodes(n))
    return names - declared


class _Checker:
    def __init__(self, program: _Program, rules: Rules, labels: list[str]):
        self.program = program
        self.rules = rules
        self.labels = labels
        self.found: dict[tuple, Finding] = {}
        self.queue: list[_Definition] = []
        self.seen: set[int] = set()
        self.cell = 0
        self.lenient = False
        """Inside a class's method that the by-hand rule is not about (Rules.section)."""
        self._aliasing: set[str] = set()
        self.visited: list[_Definition] = []
        """The statements read, in the order they were reached: what grading may run."""

    # -- reporting ----------------------------------------------------------------------------
    def refuse(self, node, what: str) -> None:
        line = getattr(node, "lineno", 1)
        lines = self.program.lines[self.cell]
        text = lines[line - 1].strip() if 0 < line <= len(lines) else ""
        if len(text) > MAX_QUOTE:
            text = text[:MAX_QUOTE] + " ..."
        key = (self.cell, line, what)
        self.found.setdefault(key, Finding(self.labels[self.cell], line, text, what))

    # -- reach --------------------------------------------------------------------------------
    def visit_statement(self, definition: _Definition) -> None:
        if id(definition.node) in self.seen:
            return
        self.seen.add(id(definition.node))
        self.queue.append(definition)

    def run(self, start: list[_Definition]) -> list[Finding]:
        for d in start:
            self.visit_statement(d)
        while self.queue:
            d = self.queue.pop(0)
            self.cell = d.cell
            self.scopes: list[tuple[str, set[str]]] = []
            self.ctx_names: set[str] = set()
            depth = _depth(d.node)
            if depth > MAX_DEPTH:
                self.refuse(d.node, f"a statement nested more than {MAX_DEPTH} levels deep "
                                    f"(the most the check reads: split it into steps)")
                continue
            self.visited.append(d)
            self.visit(d.node)
        return sorted(self.found.values(), key=lambda r: (r.cell != self.labels[0], r.cell, r.line))

    def resolve_global(self, node: ast.Name) -> None:
        """A global name used by reached code: allowed, checked where it is defined, or refused."""
        name = node.id
        if name in self.rules.standing_in:
            return  # grading calls its own stand-in here; the learner's code is checked on its own
        if name in self.rules.later:
            self.refuse(node, f"{name} (a later exercise's function, which grading replaces with "
                              f"PyTorch's own: write this one without it)")
            return
        definitions = [d for d in self.program.binds.get(name, [])]
        if not definitions:
            if name in BUILTINS or name in EXCEPTIONS or (self.rules.classes and name in CLASS_BUILTINS):
                return
            stars = [d for d in self.program.stars if self.labels[d.cell] != SETUP]
            if stars:
                for d in stars:  # refused where it stands, as the place the name comes from
                    self.visit_statement(d)
                return
            if name in REFLECTION:
                self.refuse(node, f"{name} ({REFLECTION[name]})")
            elif name.startswith("__") and name.endswith("__"):
                self.refuse(node, f"{name} (a dunder name, which a by-hand answer does not need)")
            else:
                self.refuse(node, f"{name} (defined in no cell above this function's check: "
                                  f"grading runs the notebook only that far)")
            return
        for d in definitions:
            if self.labels[d.cell] != SETUP:
                self.visit_statement(d)
                continue
            module = _imported_module(d.node, name)
            if module is None:
                self.refuse(node, f"{name} (it belongs to the notebook's checks, not to your "
                                  f"answer)")
            elif module not in MODULES:
                self.refuse(node, f"{name} (the module {module}, which a by-hand answer does "
                                  f"not need)")

    def module_of(self, node) -> str | None:
        """The module an expression names (`torch`, `torch.nn.functional`, `F`), if any."""
        if isinstance(node, ast.Name):
            if self.is_local(node.id):
                return None
            # a module only if every statement that binds the name imports that module (a name
            # also bound by `T = torch`, a loop, a pattern or a decorator is a value)
            modules = {self._module_bound(d, node.id) for d in self.program.binds.get(node.id, [])}
            return modules.pop() if len(modules) == 1 and None not in modules else None
        if isinstance(node, ast.Attribute):
            parent = self.module_of(node.value)
            if parent and f"{parent}.{node.attr}" in MODULES:
                return f"{parent}.{node.attr}"
        return None

    def _module_bound(self, definition: _Definition, name: str) -> str | None:
        """The module a statement binds `name` to: an import, or `ag = torch.autograd`."""
        node = definition.node
        module = _imported_module(node, name)
        if module is None and isinstance(node, ast.Assign) and len(node.targets) == 1 \
                and isinstance(node.targets[0], ast.Name) and node.targets[0].id == name \
                and isinstance(node.value, (ast.Name, ast.Attribute)) and name not in self._aliasing:
            self._aliasing.add(name)
            try:
                saved, self.scopes = self.scopes, []
                module = self.module_of(node.value)
            finally:
                self.scopes = saved
                self._aliasing.discard(name)
        return module

    def is_class(self, node) -> bool:
        """Whether `node` names a class the learner defined (`LinearFunction.apply`)."""
        return isinstance(node, ast.Name) and not self.is_local(node.id) and any(
            isinstance(d.node, ast.ClassDef) for d in self.program.binds.get(node.id, []))

    def is_local(self, name: str) -> bool:
        for i, (kind, names) in enumerate(reversed(self.scopes)):
            if kind == "class" and i > 0:
                continue  # a class body's names are not visible in its methods
            if name in names:
                return True
        return False

    # -- the walk -----------------------------------------------------------------------------
    def visit(self, node) -> None:
        method = getattr(self, "visit_" + type(node).__name__, None)
        if method is not None:
            method(node)
        else:
            self.generic(node)

    def generic(self, node) -> None:
        for child in ast.iter_child_nodes(node):
            self.visit(child)

    def _function(self, node) -> None:
        for d in getattr(node, "decorator_list", []):
            self.visit(d)
        args = node.args
        for default in (*args.defaults, *args.kw_defaults):
            if default is not None:
                self.visit(default)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if not self.program.postponed[self.cell]:  # else text, never evaluated
                for a in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg):
                    if a is not None and a.annotation is not None:
                        self.visit(a.annotation)
                if node.returns is not None:
                    self.visit(node.returns)
            if self.scopes and self.scopes[-1][0] == "class":
                params = [*args.posonlyargs, *args.args]
                if params:
                    self.ctx_names.add(params[0].arg)
        self.scopes.append(("function", _locals(node)))
        for statement in (node.body if isinstance(node.body, list) else [node.body]):
            self.visit(statement)
        self.scopes.pop()

    def visit_FunctionDef(self, node) -> None:
        self._function(node)

    def visit_AsyncFunctionDef(self, node) -> None:
        self.refuse(node, "async def (asynchronous code, which a by-hand answer does not need)")

    def visit_Lambda(self, node) -> None:
        self._function(node)

    def visit_ClassDef(self, node) -> None:
        if not self.rules.classes:
            self.refuse(node, f"class {node.name} (a class definition, which this exercise does "
                              f"not need: write functions)")
            return
        for n in (*node.decorator_list, *node.bases, *(k.value for k in node.keywords)):
            self.visit(n)
        names = {n.name for n in node.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
        names |= {t.id for n in node.body if isinstance(n, ast.Assign) for t in n.targets
                  if isinstance(t, ast.Name)}
        self.scopes.append(("class", names))
        # `backward = helper` (or any binding of the section's name but its def) makes another
        # method the section: then no method is read leniently
        aliased = any(self.rules.section in _bound(n) for n in node.body
                      if not isinstance(n, ast.FunctionDef))
        for statement in node.body:
            saved = self.lenient
            self.lenient = bool(self.rules.section) and isinstance(statement, ast.FunctionDef) \
                and statement.name != self.rules.section and not aliased
            self.visit(statement)
            self.lenient = saved
        self.scopes.pop()

    def visit_AnnAssign(self, node) -> None:
        if not (self.program.postponed[self.cell] or self.scopes and self.scopes[-1][0] == "function"):
            self.visit(node.annotation)  # evaluated only at a module's or a class's top level
        self.visit(node.target)
        if node.value is not None:
            self.visit(node.value)

    def _comprehension(self, node) -> None:
        names = {n.id for g in node.generators for n in ast.walk(g.target) if isinstance(n, ast.Name)}
        self.visit(node.generators[0].iter)  # evaluated in the enclosing scope
        self.scopes.append(("comprehension", names))
        for k, g in enumerate(node.generators):
            self.visit(g.target)
            if k:
                self.visit(g.iter)
            for condition in g.ifs:
                self.visit(condition)
        for part in ("elt", "key", "value"):
            if getattr(node, part, None) is not None:
                self.visit(getattr(node, part))
        self.scopes.pop()

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _comprehension

    def _is_builtin(self, node, name: str) -> bool:
        """Whether `node` is Python's own `name` (not a local or a global the learner bound)."""
        return isinstance(node, ast.Name) and node.id == name and not self.is_local(name) \
            and not self.program.binds.get(name)

    def _type_of(self, node) -> ast.expr | None:
        """x, for `type(x)` or `x.__class__`: a value's class, only compared or named below."""
        if isinstance(node, ast.Call) and self._is_builtin(node.func, "type") \
                and len(node.args) == 1 and not node.keywords:
            return node.args[0]
        if isinstance(node, ast.Attribute) and node.attr == "__class__":
            return node.value
        return None

    def visit_Call(self, node) -> None:
        # hasattr(x, "grad"), getattr(x, "grad", None): with a literal name, the attribute read
        # `x.grad` is, checked as that read; with a computed name, reflection (refused below)
        literal = len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) \
            and isinstance(node.args[1].value, str) and node.args[1].value.isidentifier()
        if literal and not node.keywords and (
                self._is_builtin(node.func, "hasattr") and len(node.args) == 2
                or self._is_builtin(node.func, "getattr") and len(node.args) in (2, 3)):
            read = ast.Attribute(value=node.args[0], attr=node.args[1].value, ctx=ast.Load())
            ast.copy_location(read, node)
            self.visit(read)
            for default in node.args[2:]:
                self.visit(default)
            return
        self.generic(node)

    def visit_Compare(self, node) -> None:
        for part in (node.left, *node.comparators):  # type(x) is torch.Tensor
            subject = self._type_of(part)
            self.visit(subject if subject is not None else part)

    def visit_MatchClass(self, node) -> None:
        self.visit(node.cls)
        for pattern in (*node.patterns, *node.kwd_patterns):
            self.visit(pattern)
        for attr in node.kwd_attrs:  # `case torch.Tensor(shape=s)` reads the subject's .shape
            read = ast.Attribute(value=ast.Name(id="_subject", ctx=ast.Load()), attr=attr,
                                 ctx=ast.Load())
            ast.copy_location(read, node)
            self.check_attribute(read)

    def visit_Import(self, node) -> None:
        for a in node.names:
            self._import(node, a.name)

    def visit_ImportFrom(self, node) -> None:
        module = node.module or ""
        if node.level:
            self.refuse(node, "a relative import (a by-hand answer imports only torch, math, "
                              "itertools, functools, operator, copy)")
            return
        if module == "__future__":
            return  # compiler directives (from __future__ import annotations)
        for a in node.names:
            if a.name == "*":
                self.refuse(node, f"from {module} import * (names that cannot be checked: "
                                  f"import the module, or the names you use)")
            elif f"{module}.{a.name}" in MODULES:
                self._import(node, f"{module}.{a.name}")  # refused where the module is
            elif self._import(node, module):
                why = _module_attribute(module, a.name, self.rules)
                if why:
                    self.refuse(node, f"{self._spelled(module, a.name)} ({why})")

    def _import(self, node, module: str) -> bool:
        top = module.split(".")[0]
        if module in MODULES:
            if module.startswith("torch.autograd") and not self.rules.classes:
                self.refuse(node, f"{module} (autograd, which the exercise computes by hand)")
                return False
            return True
        if top in ("numpy", "scipy", "jax", "tensorflow", "cupy", "sympy", "pandas"):
            why = ("another library: leaving torch, what it computes cannot be checked; stay in "
                   "torch (plain Python on .tolist() is fine)")
        elif top == "torch":
            why = "a part of torch a by-hand answer does not need"
        elif top == "autograder":
            why = "the grader's own modules"
        else:
            why = ("a module a by-hand answer does not need; modules that reach the "
                   "interpreter, files or other processes are never allowed")
        self.refuse(node, f"import {module} ({why})")
        return False

    def visit_Name(self, node) -> None:
        if not isinstance(node.ctx, ast.Load):
            return
        if node.id in REFLECTION and not self.is_function_local(node.id) \
                and (self.is_local(node.id) or self.program.binds.get(node.id)):
            # bound in a class body or at a cell's top level: `del` (or a binding that did not
            # run) leaves the name to Python's own, which a function's local never does
            self.refuse(node, f"{node.id} (a name of Python's own, rebound: {REFLECTION[node.id]})")
        elif not self.is_local(node.id):
            self.resolve_global(node)
        elif not self.is_function_local(node.id) and (self.program.binds.get(node.id)
                                                     or node.id in BUILTINS):
            # a class body's name is read from the globals until its binding there has run
            self.resolve_global(node)

    def is_function_local(self, name: str) -> bool:
        """Whether `name` is a local of the function, lambda or comprehension around this point."""
        for kind, names in reversed(self.scopes):
            if kind != "class" and name in names:
                return True
        return False

    def _spelled(self, module: str, name: str) -> str:
        short = {"torch.nn.functional": "F", "torch.nn": "nn"}.get(module, module)
        return f"{short}.{name}"

    def visit_Attribute(self, node) -> None:
        attr = node.attr
        if attr in ("__name__", "__qualname__") and isinstance(node.ctx, ast.Load):
            subject = self._type_of(node.value)  # type(A).__name__ in a message: a string
            if subject is not None:
                self.visit(subject)
                return
        if self.rules.classes and attr in GRAPH:
            self.refuse(node, f".{attr} (autograd's graph or its recording, which a class's "
                              f"methods do not need: forward computes values, backward the "
                              f"gradients by hand)")
            return
        module = self.module_of(node.value)
        storing = isinstance(node.ctx, (ast.Store, ast.Del))
        if module is not None:
            if module not in MODULES:
                root = node.value
                while isinstance(root, ast.Attribute):
                    root = root.value
                self.visit(root)  # refused where it is imported (or used, for the setup's)
                return
            if storing:
                self.refuse(node, f"assigns {self._spelled(module, attr)} (changing a module: "
                                  f"patching torch or Python, which an answer never needs)")
                return
            why = _module_attribute(module, attr, self.rules, self.lenient)
            if why:
                self.refuse(node, f"{self._spelled(module, attr)} ({why})")
            root = node.value
            while isinstance(root, ast.Attribute):
                root = root.value
            self.visit(root)  # the import that binds the module: read, and run, with the rest
            return
        self.visit(node.value)
        self.check_attribute(node)

    def check_attribute(self, node: ast.Attribute) -> None:
        """An attribute of a value (not of a module): allowed, or refused with why."""
        attr = node.attr
        if self.rules.classes and attr in GRAPH:
            self.refuse(node, f".{attr} (autograd's graph or its recording, which a class's "
                              f"methods do not need: forward computes values, backward the "
                              f"gradients by hand)")
            return
        storing = isinstance(node.ctx, (ast.Store, ast.Del))
        ctx = isinstance(node.value, ast.Name) and node.value.id in self.ctx_names \
            and self.is_local(node.value.id)
        if attr.startswith("__") and attr.endswith("__"):
            self.refuse(node, f".{attr} (a dunder attribute, which a by-hand answer does not "
                              f"need: it reaches Python's internals)")
        elif attr.startswith("_") and not (attr.startswith("_foreach_") and op_allowed(attr, self.rules)):
            self.refuse(node, f".{attr} (a private attribute, which a by-hand answer does not "
                              f"need)")
        elif storing:
            if attr not in STORED and not ctx and not self.is_class(node.value):
                self.refuse(node, f"assigns .{attr} (an answer assigns only a tensor's .data, "
                                  f".grad or .requires_grad)")
        elif ctx or attr in TENSOR_META or attr in PYTHON_METHODS or op_allowed(attr, self.rules) \
                or (self.rules.classes and self.is_class(node.value)) \
                or (self.lenient and attr not in self.rules.banned):
            return
        else:
            self.refuse(node, f".{attr} (not one a by-hand answer needs: it runs what the "
                              f"exercise does not allow, or is not a tensor's)")

    def visit_BinOp(self, node) -> None:
        if isinstance(node.op, ast.MatMult) and not op_allowed("matmul", self.rules):
            self.refuse(node, "@ (a built-in matrix product, which the exercise forbids)")
        self.generic(node)

    def visit_AugAssign(self, node) -> None:
        if isinstance(node.op, ast.MatMult) and not op_allowed("matmul", self.rules):
            self.refuse(node, "@= (a built-in matrix product, which the exercise forbids)")
        self.generic(node)

    def visit_Global(self, node) -> None:
        for name in node.names:
            if name in REFLECTION or name.startswith("__"):
                self.refuse(node, f"global {name} (rebinding Python's own names)")


SETUP = "the notebook's setup cell"


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
    seen, out = set(), {}
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for d in program.binds.get(name, []):
            node = d.node
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

"""The walk of the code a graded function reaches: each construct outside its `Rules` is refused
with a `Finding`, and every statement read is kept (what grading may run)."""

import ast

from .tables import (
    BUILTINS, CLASS_BUILTINS, EXCEPTIONS, GRAPH, MAX_DEPTH, MODULES, PYTHON_METHODS, REFLECTION,
    STORED, TENSOR_META, MAX_STEPS)
from .rules import Finding, MAX_QUOTE, Rules, _module_attribute, op_allowed
from .program import SETUP, _Definition, _Program, _bound, _depth, _imported_module, _locals
from .names import _Names


def _rebinds(function, name: str) -> bool:
    """Whether `function`'s body binds its parameter `name` again (an assignment, a loop, `with
    ... as`, `:=`, `del`, an import, a nested function's `nonlocal`)."""
    return any(name in _bound(s) for s in function.body) or any(
        isinstance(n, ast.Nonlocal) and name in n.names for n in ast.walk(function))


MODULE_VALUE = ("a module used as a value: passed, stored or returned, it reaches any of its "
                "attributes wherever it lands; call its functions where you use them, "
                "as torch.zeros(...)")


SELF_MATCHING = ("bool", "bytearray", "bytes", "dict", "float", "frozenset", "int", "list", "set",
                 "str", "tuple")
"""Python's types whose one positional class pattern matches the subject itself (`case int(n)`),
reading no attribute (`__match_args__` of others are fixed too; a learner's class sets its own)."""


class _Intricate(Exception):
    """The check read MAX_STEPS steps of a function's code and stopped."""


class _Checker(_Names):
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
        self.steps = 0
        self._bound_module: dict[tuple[int, str], str | None] = {}
        """_module_bound's answers, by (statement, name): each statement is read once."""
        self._indexes: dict[tuple, dict] = {}
        """Per tree: the names it binds and what its functions return (`_read`)."""
        self._receivers: set[int] = set()
        """Expressions whose value is only a receiver (`torch` of `torch.zeros`) or the value of a
        plain alias (`T = torch`): there a module is not used as a value."""
        self._stars: list[_Definition] | None = None
        """The learner's `from m import *` statements, once a read needs them."""
        self._by_name: dict[str, list[_Definition]] = {}
        """Per global name read: the setup's statements binding it (the learner's are queued
        at the first read: a name 5,000 statements change is not looked through at each read)."""
        self._global: dict[tuple[str, str], object] = {}
        """Answers about a global name that hold for the whole check (module_of, is_class, ...)."""
        self._modules: dict[tuple[int, str], bool] = {}
        """module_value's answers for names, by (scope, name)."""
        self._decorator_wraps: set[int] = set()
        """The `functools.wraps` references that are the decorator `@wraps(f)` of a def."""
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
            self.scopes: list[tuple[str, set[str], ast.AST]] = []   # (kind, names, node)
            self.functions: list[ast.AST] = []   # the functions the walk is in, innermost last
            self.ctx_names: set[str] = set()
            depth = _depth(d.node)
            if depth > MAX_DEPTH:
                self.refuse(d.node, f"a statement nested more than {MAX_DEPTH} levels deep "
                                    f"(the most the check reads: split it into steps)")
                continue
            self.visited.append(d)
            try:
                self.visit(d.node)
            except _Intricate:
                self.refuse(d.node, f"code the check cannot read in {MAX_STEPS} steps (names bound "
                                    f"from names, over and over: write it plainly)")
                break
            except RecursionError:  # names bound from names deeper than Python's own stack
                self.refuse(d.node, "code the check cannot read: names bound from names, more "
                                    "levels deep than the check follows (write it plainly)")
                break
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
        definitions = self.program.binds.get(name, [])
        if not definitions:
            if name in BUILTINS or name in EXCEPTIONS or (self.rules.classes and name in CLASS_BUILTINS):
                return
            if self._stars is None:  # listed once per check, queued at the first such read
                self._stars = [d for d in self.program.stars if self.labels[d.cell] != SETUP]
                for d in self._stars:  # refused where it stands, as the place the name comes from
                    self.visit_statement(d)
            if self._stars:
                return
            if name in REFLECTION:
                self.refuse(node, f"{name} ({REFLECTION[name]})")
            elif name.startswith("__") and name.endswith("__"):
                self.refuse(node, f"{name} (a dunder name, which a by-hand answer does not need)")
            else:
                self.refuse(node, f"{name} (defined in no cell above this function's check: "
                                  f"grading runs the notebook only that far)")
            return
        if name not in self._by_name:  # the learner's statements are queued once per name
            self._by_name[name] = [d for d in definitions if self.labels[d.cell] == SETUP]
            for d in definitions:
                if self.labels[d.cell] != SETUP:
                    self.visit_statement(d)
        for d in self._by_name[name]:  # the setup's, refused where read
            module = _imported_module(d.node, name)
            if module is None:
                self.refuse(node, f"{name} (it belongs to the notebook's checks, not to your "
                                  f"answer)")
            elif module not in MODULES:
                self.refuse(node, f"{name} (the module {module}, which a by-hand answer does "
                                  f"not need)")

    # -- the walk -----------------------------------------------------------------------------
    def tick(self) -> None:
        """One step of reading: past MAX_STEPS the check stops (its time is bounded, whatever
        the code; it runs in the grader's process, before any limit on the learner's)."""
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise _Intricate

    def visit(self, node) -> None:
        self.tick()
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
            if isinstance(d, ast.Call) and len(d.args) == 1 and not d.keywords \
                    and not isinstance(d.args[0], ast.Starred) and self._names_wraps(d.func):
                self._decorator_wraps.add(id(d.func))
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
        saved = self.ctx_names
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and self.scopes \
                and self.scopes[-1][0] == "class":
            params = [*args.posonlyargs, *args.args]
            if params:  # a method's first parameter is autograd's ctx, in this method, only while
                # nothing rebinds it (`ctx = torch` would make any attribute a ctx attribute)
                first = params[0].arg
                self.ctx_names = (saved - {first}) | (set() if _rebinds(node, first) else {first})
        self.scopes.append(("function", _locals(node), node))
        self.functions.append(node)
        for statement in (node.body if isinstance(node.body, list) else [node.body]):
            self.visit(statement)
        self.functions.pop()
        self.scopes.pop()
        self.ctx_names = saved

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
        # every name the body binds, however (an annotated assignment, a loop, unpacking, `:=`,
        # an import, a pattern, `with`, `except`), is the class body's own, not a global's
        names = set().union(*(_bound(n) for n in node.body))
        self.scopes.append(("class", names, node))
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

    def visit_Assign(self, node) -> None:
        target = node.targets[0]
        if len(node.targets) == 1 and isinstance(target, ast.Name) \
                and isinstance(node.value, (ast.Name, ast.Attribute)) \
                and (not self.scopes or self.is_function_local(target.id)):
            # `T = torch`, in the cells or a function: an alias, itself a module wherever it is
            # used as a value (module_value follows it); not in a class body, whose names any
            # `Class.name` reads, nor into a name a function declares global
            self._receivers.add(id(node.value))
        self.generic(node)

    def visit_AnnAssign(self, node) -> None:
        if not (self.program.postponed[self.cell] or self.scopes and self.scopes[-1][0] == "function"):
            self.visit(node.annotation)  # evaluated only at a module's or a class's top level
        self.visit(node.target)
        if node.value is not None:
            self.visit(node.value)

    def _comprehension(self, node) -> None:
        names = {n.id for g in node.generators for n in ast.walk(g.target) if isinstance(n, ast.Name)}
        self.visit(node.generators[0].iter)  # evaluated in the enclosing scope
        self.scopes.append(("comprehension", names, node))
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
        # `case C(v)` reads the attribute C.__match_args__ names: fixed for a class of Python's
        # or of a module (`case torch.Size([n, k])`), any name for a class of one's own
        library = isinstance(node.cls, ast.Attribute) and self.module_of(node.cls.value) is not None
        if node.patterns and not library and not any(
                self._is_builtin(node.cls, name) for name in SELF_MATCHING):
            self.refuse(node, "a class pattern's positional part (`case C(v)`: it reads the "
                              "attributes C.__match_args__ names, any name for a class of your "
                              "own, getattr by a string); write keyword patterns, `case C(x=v)`")
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

    def _wraps_elsewhere(self, node) -> bool:
        """Refuse `functools.wraps` anywhere but as `@wraps(f)` above a def: with `assigned=` or
        `updated=` it reads and writes attributes named by strings (a function's __code__,
        torch's namespace), and called on a value it writes that value's attributes."""
        if id(node) in self._decorator_wraps or not self._names_wraps(node):
            return False
        self.refuse(node, "functools.wraps other than as the decorator `@wraps(f)` of a function "
                          "you define (given assigned=/updated=, or called on an object, it "
                          "reads and writes attributes named by strings: reflection)")
        return True

    def visit_Name(self, node) -> None:
        if not isinstance(node.ctx, ast.Load):
            return
        if self._wraps_elsewhere(node):
            return
        if id(node) not in self._receivers and self.module_value(node):
            self.refuse(node, f"{node.id} ({MODULE_VALUE})")
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

    def visit_Attribute(self, node) -> None:
        attr = node.attr
        if isinstance(node.ctx, ast.Load) and self._wraps_elsewhere(node):
            return
        if isinstance(node.ctx, ast.Load) and id(node) not in self._receivers \
                and self.module_value(node):
            self.refuse(node, f"{ast.unparse(node)} ({MODULE_VALUE})")
            return
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
                self._visit_root(node)  # refused where it is imported (or used, for the setup's)
                return
            if storing:
                self.refuse(node, f"assigns {self._spelled(module, attr)} (changing a module: "
                                  f"patching torch or Python, which an answer never needs)")
                return
            why = _module_attribute(module, attr, self.rules, self.lenient)
            if why:
                self.refuse(node, f"{self._spelled(module, attr)} ({why})")
            self._visit_root(node)  # the import that binds the module: read, and run, with the rest
            return
        self._receivers.add(id(node.value))
        self.visit(node.value)
        self.check_attribute(node)

    def _visit_root(self, node: ast.Attribute) -> None:
        """Visit the name a chain of attributes starts from (`torch` of `torch.nn.functional.relu`),
        as a receiver: there a module is not used as a value."""
        root = node.value
        while isinstance(root, ast.Attribute):
            root = root.value
        self._receivers.add(id(root))
        self.visit(root)

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
            elif self._held_by_module(node.value):
                self.refuse(node, f"assigns .{attr} of something torch holds, such as torch.Tensor "
                                  f"itself (patching torch for every tensor; assign a tensor's "
                                  f".{attr})")
        elif ctx or attr in TENSOR_META or attr in PYTHON_METHODS or op_allowed(attr, self.rules) \
                or (self.rules.classes and self.is_class(node.value)) \
                or (self.lenient and attr not in self.rules.banned and self.torch_name(node)):
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

"""The cells as a program: their top-level statements parsed once, which statement binds which
global name, and the names a function or a statement binds."""

import ast
import functools
from typing import NamedTuple

from .tables import MAX_DEPTH, MODULES
from .rules import lines_of


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


def _root(node) -> str | None:
    """The name an expression's value is reached from: `SLOPE` of `SLOPE["pos"]`, `L` of
    `L.append`, `cfg` of `cfg.opts[0].x`."""
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _changes(node) -> tuple[set, set, set]:
    """(names an item or attribute of which `node` assigns or deletes (`SLOPE["pos"] = 1.0`),
    names a call whose value is dropped may change: the object of its method (`START.append(x)`,
    `[Z.append(v) for v in vs]`, in a loop's body too) or a name passed to it (`fill(TABLE)`),
    names of functions called so (`fill()`)), outside the functions and classes it defines."""
    changed, called, methods, dropped = set(), set(), set(), set()
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(n, ast.Expr):  # a statement whose value nobody keeps: run for its effect
            dropped |= {id(c) for c in ast.walk(n.value) if isinstance(c, ast.Call)}
        if isinstance(n, (ast.Subscript, ast.Attribute)) and isinstance(n.ctx, (ast.Store, ast.Del)):
            changed.add(_root(n))
        elif isinstance(n, ast.Call) and id(n) in dropped:
            if isinstance(n.func, ast.Attribute):
                methods.add(_root(n.func))
            elif isinstance(n.func, ast.Name):
                called.add(n.func.id)
            methods |= {a.id for a in n.args if isinstance(a, ast.Name)}
        stack.extend(ast.iter_child_nodes(n))
    return changed - {None}, methods - {None}, called


@functools.lru_cache(maxsize=64)
def _cell_changes(source: str) -> tuple:
    """(index of a top-level statement, the global names whose value it changes without binding
    them, the names of the functions it calls for their effect), for one cell's source."""
    tree = _parse(source)
    out = []
    for k, node in enumerate(tree.body if tree else ()):
        changed, methods, called = _changes(node)
        if changed or methods or called:
            out.append((k, frozenset(changed - _bound(node)), frozenset(methods - _bound(node)),
                        frozenset(called)))
    return tuple(out)


def _changed_by(function: ast.FunctionDef) -> set[str]:
    """The globals a function's body changes without binding them (`SLOPE["pos"] = 1.0` in
    `def fill():`), or binds through `global`."""
    mine = _locals(function)
    changed = set()
    for statement in function.body:
        stored, methods, _ = _changes(statement)
        changed |= stored | methods
        changed |= {n for x in ast.walk(statement) if isinstance(x, ast.Global) for n in x.names}
    return changed - mine


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
        self._changed: dict[int, set[str]] = {}
        """_changed_by of each learner function called for its effect, by its node."""
        self._summaries: dict[str, dict] = {}
        """name -> what `binds[name]` holds, in counts (`_note`)."""
        self.binds: dict[str, list[_Definition]] = {}
        """name -> the statements that bind it: all in the last learner cell that does (as a
        kernel holds it: a later cell rebinding a name replaces what an earlier one bound, and
        grading runs only what is read), the learner's later statements that change what it
        holds (`SLOPE["pos"] = 1.0`), and always the setup cells' too. A read may run before
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
                        self._summaries.pop(name, None)
                        for d in found:
                            self._note(name, d)
                    self._add(name, _Definition(i, tree.body[k]))
            if cells[i].get("label") == SETUP:
                continue
            # A statement that changes what a learner's global holds (`SLOPE["pos"] = 1.0`,
            # `L.append(x)`) runs with that global's bindings, as it ran in the kernel (not for a
            # module: `torch.manual_seed(0)` is a demo line; patching one is refused where read).
            for k, stored, methods, called in _cell_changes(cell["source"]):
                names = set(stored)
                # a method called on a value the learner assigned (a list, a dict; not a module,
                # a function or a class: `LinearFunction.apply(x, W)` is a demo line)
                names |= {n for n in methods if self._value(n)}
                for name in called:  # a function of the learner's, called for what it changes
                    for d in self.binds.get(name, []):
                        if cells[d.cell].get("label") != SETUP and isinstance(d.node, ast.FunctionDef):
                            if id(d.node) not in self._changed:  # read once, however often called
                                self._changed[id(d.node)] = _changed_by(d.node)
                            names |= {n for n in self._changed[id(d.node)] if self._value(n)}
                for name in set(names):  # `ALIAS = ONE; ALIAS["v"] = 1.0` changes ONE
                    names |= self._summary(name)["aliases"]
                for name in names:
                    if self._summary(name)["learner"]:  # bound by the learner, not by an import
                        self._add(name, _Definition(i, tree.body[k]))

    def _add(self, name: str, definition: _Definition) -> None:
        self.binds.setdefault(name, []).append(definition)
        self._note(name, definition)

    def _summary(self, name: str) -> dict:
        return self._summaries.setdefault(name, {"assigned": 0, "defined": 0, "learner": 0,
                                                 "aliases": set()})

    def _note(self, name: str, definition: _Definition) -> None:
        """Keep `_summary(name)` up to date with a statement added to `binds[name]` (kept as
        the statements come: asking each new one about all the earlier ones was quadratic, 5,000
        `len(g)` in a cell took 31 s)."""
        summary, node = self._summary(name), definition.node
        if self.cells[definition.cell].get("label") != SETUP:
            summary["assigned"] += isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign))
            summary["defined"] += isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                    ast.ClassDef, ast.Import, ast.ImportFrom))
            summary["learner"] += not isinstance(node, (ast.Import, ast.ImportFrom))
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Name):
            summary["aliases"].add(node.value.id)

    def _value(self, name: str) -> bool:
        """Whether the learner binds `name` to a value by assignment, and never by a def, a class
        or an import."""
        summary = self._summary(name)
        return bool(summary["assigned"]) and not summary["defined"]


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


def _bindings(tree: ast.AST) -> dict[str, list[ast.expr]]:
    """name -> the expressions `tree` binds it to: an assignment's value (the whole value when the
    name is one of several targets), a walrus's, a loop's iterable, a `with`'s context; a target
    that only reads the name (`d[name] = v`, `name.x = v`) does not bind it. From one walk of
    `tree` (the checker keeps it per tree: a function that stores into one name a thousand times
    is walked once)."""
    def stored(target) -> set[str]:
        return {n.id for n in ast.walk(target) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    out: dict[str, list[ast.expr]] = {}
    for n in ast.walk(tree):
        if isinstance(n, ast.Assign):
            pairs = (set().union(*map(stored, n.targets)), n.value)
        elif isinstance(n, (ast.AnnAssign, ast.NamedExpr)) and n.value is not None:
            pairs = (stored(n.target), n.value)
        elif isinstance(n, (ast.For, ast.comprehension)):
            pairs = (stored(n.target), n.iter)
        elif isinstance(n, ast.withitem) and n.optional_vars is not None:
            pairs = (stored(n.optional_vars), n.context_expr)
        else:
            continue
        for name in pairs[0]:
            out.setdefault(name, []).append(pairs[1])
    return out


def _returns(tree: ast.AST) -> dict[str, list[ast.expr]]:
    """name -> what the functions named so in `tree` return and the bodies of the lambdas bound to
    it, from one walk of `tree` (asked once per store, it would otherwise be walked each time)."""
    out: dict[str, list[ast.expr]] = {}
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.setdefault(n.name, []).extend(r.value for r in ast.walk(n)
                                              if isinstance(r, ast.Return) and r.value)
    for name, values in _bindings(tree).items():
        lambdas = [v.body for v in values if isinstance(v, ast.Lambda)]
        if lambdas:
            out.setdefault(name, []).extend(lambdas)
    return out


def _module_sources(tree: ast.AST) -> dict[str, list]:
    """name -> what in `tree` may bind it to a module: an import (its `ast.alias`, with the
    statement's module for `from M import X`) or the value of a plain alias (`name = X`,
    `name = X.y`). From one walk of `tree`."""
    out: dict[str, list] = {}
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            for a in n.names:
                out.setdefault((a.asname or a.name).split(".")[0], []).append((None, a))
        elif isinstance(n, ast.ImportFrom) and n.module != "__future__":
            for a in n.names:
                if a.name != "*":
                    out.setdefault(a.asname or a.name, []).append((n.module or "", a))
        elif isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name) \
                and isinstance(n.value, (ast.Name, ast.Attribute)):
            out.setdefault(n.targets[0].id, []).append(n.value)
    return out


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


SETUP = "the notebook's setup cell"

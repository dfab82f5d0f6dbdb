"""What an expression names, read without running anything: a module (`torch`, `F`, an alias),
a class the learner defined, a local, Python's own builtin, something torch holds
(`torch.Tensor`), a public name of torch. The checker's walk asks; this part only answers."""

import ast
import inspect
import sys

from .tables import MODULES
from .rules import _module_attribute, _torch_now, tensor_name
from .program import _Definition, _bindings, _imported_module, _module_sources, _returns


def _imports_module(module: str | None, alias: ast.alias) -> bool:
    """Whether an import binds a module: `import a.b` always; `from M import X` when M.X is one
    (read from the module if this process has it; else assumed)."""
    if module is None or f"{module}.{alias.name}" in MODULES:
        return True
    found = sys.modules.get(module)
    return found is None or inspect.ismodule(inspect.getattr_static(found, alias.name, None))


class _Names:
    """Answers for `_Checker` (which holds `program`, `rules`, `scopes`, `functions`)."""

    def module_of(self, node) -> str | None:
        """The module an expression names (`torch`, `torch.nn.functional`, `F`), if any."""
        self.tick()
        if isinstance(node, ast.Name):
            if self.is_local(node.id):
                return None
            # a module only if every statement that binds the name imports that module (a name
            # also bound by `T = torch`, a loop, a pattern or a decorator is a value)
            key = ("module", node.id)
            if key in self._global:
                return self._global[key]
            modules = {self._module_bound(d, node.id) for d in self.program.binds.get(node.id, [])}
            found = modules.pop() if len(modules) == 1 and None not in modules else None
            if not self._aliasing:  # an answer complete only outside an alias's own reading
                self._global[key] = found
            return found
        if isinstance(node, ast.Attribute):
            parent = self.module_of(node.value)
            if parent and f"{parent}.{node.attr}" in MODULES:
                return f"{parent}.{node.attr}"
        return None

    def _names_wraps(self, node) -> bool:
        """Whether `node` is `functools.wraps`: the attribute of the module, or a name a
        statement binds by `from functools import wraps`."""
        if isinstance(node, ast.Attribute):
            return node.attr == "wraps" and self.module_of(node.value) == "functools"
        if not isinstance(node, ast.Name) or self.is_function_local(node.id):
            return False
        key = ("wraps", node.id)
        if key not in self._global:
            self._global[key] = self._imports_wraps(node.id)
        return self._global[key]

    def _imports_wraps(self, name: str) -> bool:
        return any(isinstance(d.node, ast.ImportFrom) and d.node.module == "functools"
                   and not d.node.level and any(a.name == "wraps" and (a.asname or a.name) == name
                                                for a in d.node.names)
                   for d in self.program.binds.get(name, []))

    def _module_bound(self, definition: _Definition, name: str) -> str | None:
        """The module a statement binds `name` to: an import, or `ag = torch.autograd` (each
        statement read once per check: a chain of names each bound twice would otherwise be
        read 2**n times)."""
        key = (id(definition.node), name)
        if key not in self._bound_module:
            self._bound_module[key] = self._module_bound_now(definition, name)
        return self._bound_module[key]

    def _module_bound_now(self, definition: _Definition, name: str) -> str | None:
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
        if not isinstance(node, ast.Name) or self.is_local(node.id):
            return False
        key = ("class", node.id)
        if key not in self._global:
            self._global[key] = any(isinstance(d.node, ast.ClassDef)
                                    for d in self.program.binds.get(node.id, []))
        return self._global[key]

    def is_local(self, name: str) -> bool:
        return self._scope_of(name) is not None

    def _scope_of(self, name: str) -> tuple | None:
        """The innermost scope (kind, names, node) that holds `name`, None for a global."""
        for i, scope in enumerate(reversed(self.scopes)):
            if scope[0] == "class" and i > 0:
                continue  # a class body's names are not visible in its methods
            if name in scope[1]:
                return scope
        return None

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

    def is_function_local(self, name: str) -> bool:
        """Whether `name` is a local of the function, lambda or comprehension around this point."""
        for kind, names, _ in reversed(self.scopes):
            if kind != "class" and name in names:
                return True
        return False

    def module_value(self, node) -> bool:
        """Whether an expression may be a module where it stands: an attribute chain naming one
        (`torch.nn`, `torch.special`), or a name an import or a plain alias (`T = torch`,
        `U = T`) binds to one, in its function, its class body or the cells. Passed, stored or
        returned, a module reaches any of its public attributes wherever it lands."""
        self.tick()
        if isinstance(node, ast.Attribute):
            return self.module_of(node) is not None or self.torch_module_of(node) is not None
        if not isinstance(node, ast.Name):
            return False
        scope = self._scope_of(node.id)
        if scope is not None and scope[0] == "comprehension":
            return False  # a loop's name: what it iterates is checked where it is written
        key = (id(scope[2]) if scope else 0, node.id)
        if key not in self._modules:
            self._modules[key] = self._module_reached(node.id, scope)
        return self._modules[key]

    def _module_reached(self, name: str, scope) -> bool:
        """Whether an import or a chain of plain aliases binds `name` (in `scope`, or the cells'
        globals when None) to a module: every name on the way is read once."""
        todo, seen = [name], {name}
        while todo:
            current = todo.pop()
            if scope is not None:
                trees = [scope[2]]
            else:  # the statements binding a global; a def or class of that name binds no module
                trees = [d.node for d in self.program.binds.get(current, [])
                         if not (isinstance(d.node, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                     ast.ClassDef)) and d.node.name == current)]
            for tree in trees:
                for source in self._read(tree, _module_sources).get(current, []):
                    if isinstance(source, tuple):
                        if _imports_module(*source):
                            return True
                    elif isinstance(source, ast.Name):
                        local = scope is None or source.id in scope[1]  # else a global
                        if local and source.id not in seen:
                            seen.add(source.id)
                            todo.append(source.id)
                        elif not local and self.module_value_global(source.id):
                            return True
                    else:
                        saved, self.scopes = self.scopes, [] if scope is None else self.scopes
                        try:
                            if self.module_value(source):
                                return True
                        finally:
                            self.scopes = saved
        return False

    def module_value_global(self, name: str) -> bool:
        """module_value of the cells' global `name`, whatever scope the walk is in."""
        saved, self.scopes = self.scopes, []
        try:
            return self.module_value(ast.Name(id=name, ctx=ast.Load()))
        finally:
            self.scopes = saved

    def _spelled(self, module: str, name: str) -> str:
        short = {"torch.nn.functional": "F", "torch.nn": "nn"}.get(module, module)
        return f"{short}.{name}"

    def _held_by_module(self, node, seen: set | None = None) -> bool:
        """Whether an expression may be an object a module holds (`torch.Tensor`, `nn.Parameter`),
        reached by attributes or items, a container, `getattr` with a literal name, what a
        learner's function returns, or a name any statement of its function or of the cells binds
        to one: a store into it changes torch. `seen` holds the names and functions read so far
        in this question, whatever the path (each is read once: the walk is linear in the code)."""
        seen = set() if seen is None else seen
        self.tick()
        while isinstance(node, (ast.Attribute, ast.Subscript, ast.Starred, ast.NamedExpr)):
            node = node.value
        if isinstance(node, (ast.List, ast.Tuple, ast.Set, ast.Dict, ast.BoolOp, ast.IfExp)):
            parts = [p for p in ast.iter_child_nodes(node) if isinstance(p, ast.expr)]
            return any(self._held_by_module(p, seen) for p in parts)
        if isinstance(node, ast.Call) and self._is_builtin(node.func, "getattr") and node.args:
            return self._held_by_module(node.args[0], seen)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            name = "()" + node.func.id  # what a learner's function returns
            if name in seen:
                return False
            seen.add(name)
            return any(self._held_by_module(value, seen) for value in self._returned(node.func.id))
        if not isinstance(node, ast.Name) or node.id in seen:
            return False
        seen.add(node.id)
        if self.module_of(node) is not None:
            return True
        trees = [*self.functions, *(d.node for d in self.program.binds.get(node.id, []))]
        return any(self._held_by_module(value, seen)
                   for tree in trees for value in self._read(tree, _bindings).get(node.id, []))

    def _returned(self, name: str) -> list[ast.expr]:
        """What the functions and lambdas the learner binds to `name` (in the cells or in the
        function the walk is in) may return."""
        self.tick()
        trees = [*self.functions, *(d.node for d in self.program.binds.get(name, []))]
        return [value for tree in trees for value in self._read(tree, _returns).get(name, [])]

    def _read(self, tree, index) -> dict:
        """`index(tree)` (the names a tree binds, or what its functions return), made once per
        tree and check, whatever the number of trees (no cache it could cycle through), and
        counted as steps: one per node of the tree."""
        key = (id(tree), index)
        self.tick()
        if key not in self._indexes:
            for _ in ast.walk(tree):
                self.tick()
            self._indexes[key] = index(tree)
        return self._indexes[key]

    def torch_name(self, node: ast.Attribute) -> bool:
        """Whether an attribute of a value, in a method any public torch function may use, is a
        public name of torch: of a part of torch the code names (`torch.special.expit`), else of
        torch's tensors or of torch itself (`y.addmm_`), not `.sys` or `.getattr`."""
        module = self.torch_module_of(node.value)
        if module is not None:
            return _module_attribute(module, node.attr, self.rules, lenient=True) is None
        return tensor_name(node.attr)

    def torch_module_of(self, node) -> str | None:
        """The module of torch an attribute chain names (`torch.nn.modules`), read from torch
        without running anything; None for a value that is not one."""
        module = self.module_of(node)
        if module is not None or not isinstance(node, ast.Attribute):
            return module
        parent = self.torch_module_of(node.value)
        found = sys.modules.get(parent) if parent and _torch_now() else None
        value = inspect.getattr_static(found, node.attr, None) if found is not None else None
        name = getattr(value, "__name__", "") if inspect.ismodule(value) else ""
        return name if name == "torch" or name.startswith("torch.") else None

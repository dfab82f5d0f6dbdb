"""Small changes to a reference solution: the mistakes a learner can make in one place.

One AST mutator serves two jobs. `tools/mutants.py` grades every mutant of every solution to
find what the hidden tests miss (mutation testing). `causes.py` evaluates the mutants of one
function on the inputs of a failed check to name the learner's mistake (the error model): each
mutation carries a sentence derived from the change and the line it is in, in the solution's
own names ("in `grad_W1 = …`: `h` is used where `x` belongs").

The changes: a comparison flipped, a constant off by one, an operator swapped (+ -, * /, @ *),
a term or factor dropped, operands swapped, a transpose or a call dropped, a function replaced
by a look-alike (sum/mean, ...), a keyword dropped, the batch size for every entry, a traversal
order changed, a statement removed, done twice or moved after the next, a loop reversed, a
condition inverted, in place <-> a new tensor, an intermediate returned instead of the result,
and (for the error model) a variable read where another one belongs.
"""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass, field

from autograder.grade.sentences import (_OPS, _expression_sentence, describe, differing,  # noqa: F401
                                        short, where)

__all__ = ["Mutation", "mutate"]

COMPARE = {ast.Gt: [ast.GtE, ast.Lt], ast.GtE: [ast.Gt, ast.LtE], ast.Lt: [ast.LtE, ast.Gt],
           ast.LtE: [ast.Lt, ast.GtE], ast.Eq: [ast.NotEq], ast.NotEq: [ast.Eq],
           ast.Is: [ast.IsNot], ast.IsNot: [ast.Is], ast.In: [ast.NotIn], ast.NotIn: [ast.In]}
BINOP = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult,
         ast.Pow: ast.Mult, ast.MatMult: ast.Mult, ast.FloorDiv: ast.Div}
RENAME = {"sum": "mean", "mean": "sum", "max": "min", "min": "max", "amax": "amin",
          "zeros_like": "ones_like", "ones_like": "zeros_like", "add": "sub", "sub": "add",
          "mul": "div", "div": "mul", "add_": "sub_", "sub_": "add_", "mul_": "div_",
          "clone": "detach", "popleft": "pop", "appendleft": "append",
          "retain_grad": "requires_grad_"}
"""A called function or method replaced by a look-alike: f(...) -> g(...)."""
DROP_CALL = {"transpose", "t", "clone", "detach", "item", "contiguous", "float", "double", "to",
             "squeeze", "unsqueeze", "retain_grad", "requires_grad_", "copy", "norm", "abs",
             "sqrt", "neg", "tolist", "list", "reversed", "sorted"}
"""x.method(...) -> x, and f(x) -> x."""


@dataclass
class Mutation:
    change: str
    """The changed lines, `old` -> `new` (what tools/mutants.py prints and EQUIVALENT keys)."""
    text: str
    """The whole mutated answer cell."""
    sentence: str
    """The mistake in words, in the solution's names."""
    order: tuple[frozenset[str], frozenset[str]] | None = None
    """For a statement moved after the next: the calls of (the moved one, the next one)."""
    fragment: str = ""
    """The changed expression as the mutant has it (`grad_z1.T @ h`): code that holds it is
    evidence for this mutation."""
    code: object = field(default=None, repr=False, compare=False)
    """`text` compiled."""
    kind: str = ""
    """The expression change's kind ("constant", "operator", "drop-term", ...), "" for others."""


def _calls(node) -> frozenset[str]:
    """Names of the functions and methods a statement calls."""
    out = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Call):
            f = n.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
            if name:
                out.add(name)
    return frozenset(out)


def marks(node) -> frozenset[str]:
    """What tells a statement apart in someone else's code: the calls it makes and the
    attributes it reads (`L.backward()`: backward; `g = h.grad`: grad)."""
    return _calls(node) | {n.attr for n in ast.walk(node)
                           if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load)}


# ---------------------------------------------------------------------------
# The changes

def _copy(node):
    return copy.deepcopy(node)


def expression_mutants(node) -> list[tuple[str, ast.expr]]:
    """(kind, replacement) for one expression node."""
    out = []
    if isinstance(node, ast.Compare):
        for i, op in enumerate(node.ops):
            for new in COMPARE.get(type(op), []):
                m = _copy(node)
                m.ops[i] = new()
                out.append(("compare", m))
    elif isinstance(node, ast.Constant) and not isinstance(node.value, (str, bytes)) \
            and node.value is not None and node.value is not Ellipsis:
        v = node.value
        if isinstance(v, bool):
            out.append(("constant", ast.Constant(not v)))
        elif isinstance(v, int):
            out += [("constant", ast.Constant(v + 1)), ("constant", ast.Constant(v - 1))]
        elif isinstance(v, float):
            out += [("constant", ast.Constant(v + 1.0))] + ([("constant", ast.Constant(0.0))] if v else [])
    elif isinstance(node, ast.BinOp):
        if type(node.op) in BINOP:
            out.append(("operator", ast.BinOp(_copy(node.left), BINOP[type(node.op)](), _copy(node.right))))
        if isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow)):
            kind = "drop-term" if isinstance(node.op, (ast.Add, ast.Sub)) else "drop-factor"
            out.append((kind, _copy(node.left)))                     # drop a term / factor
            if not isinstance(node.op, ast.Pow):
                out.append((kind, _copy(node.right)))
        if isinstance(node.op, (ast.Sub, ast.Div, ast.MatMult)):
            out.append(("operands", ast.BinOp(_copy(node.right), node.op, _copy(node.left))))
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.Not)):
        out.append(("unary", _copy(node.operand)))
    elif isinstance(node, ast.BoolOp):
        out.append(("boolop", ast.BoolOp(ast.Or() if isinstance(node.op, ast.And) else ast.And(),
                                         _copy(node.values))))
        out += [("boolop", _copy(v)) for v in node.values]
    elif isinstance(node, ast.Attribute) and node.attr in ("T", "mT"):
        out.append(("transpose", _copy(node.value)))
    elif isinstance(node, ast.IfExp):
        out += [("ifexp", ast.IfExp(_copy(node.test), _copy(node.orelse), _copy(node.body))),
                ("ifexp", _copy(node.body)), ("ifexp", _copy(node.orelse))]
    elif isinstance(node, ast.Call):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if name in RENAME:
            m = _copy(node)
            setattr(m.func, "attr" if isinstance(func, ast.Attribute) else "id", RENAME[name])
            out.append(("rename", m))
        if name in DROP_CALL:
            if isinstance(func, ast.Attribute):
                out.append(("drop-call", _copy(func.value)))
            elif len(node.args) == 1 and not node.keywords:
                out.append(("drop-call", _copy(node.args[0])))
        if name == "numel" and isinstance(func, ast.Attribute):   # every entry -> the batch
            out.append(("batch", ast.Call(ast.Name("len", ast.Load()), [_copy(func.value)], [])))
        if name == "squeeze" and node.args:
            m = _copy(node)
            m.args = []
            out.append(("call", m))
        if name == "append" and len(node.args) == 1 and isinstance(func, ast.Attribute):
            out.append(("order", ast.Call(ast.Attribute(_copy(func.value), "insert", ast.Load()),
                                          [ast.Constant(0), _copy(node.args[0])], [])))
        if name == "pop" and isinstance(func, ast.Attribute):
            m = _copy(node)
            m.args = [] if node.args else [ast.Constant(0)]
            out.append(("order", m))
        if len(node.args) >= 2:
            m = _copy(node)
            m.args[0], m.args[1] = m.args[1], m.args[0]
            out.append(("arguments", m))
        for i, kw in enumerate(node.keywords):
            if kw.arg is not None:
                m = _copy(node)
                del m.keywords[i]
                out.append(("keyword", m))
    elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice) \
            and node.slice.step is not None:                      # x[::-1] -> x
        out.append(("slice", _copy(node.value)))
    return out


def statement_mutants(node, names) -> list[tuple[str, list[ast.stmt]]]:
    """(sentence, replacement statements) for one statement in a body."""
    if isinstance(node, (ast.FunctionDef, ast.ClassDef)) or (
            isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)):
        return []                                                  # defs, docstrings
    line = short(node.test if isinstance(node, (ast.If, ast.While)) else node, 40)
    head = line if not isinstance(node, (ast.For, ast.If, ast.With, ast.While)) \
        else short(ast.unparse(node).splitlines()[0].rstrip(":"), 40)
    out = [(f"`{head}` is missing", [])]                           # removed
    if isinstance(node, (ast.Expr, ast.AugAssign)):
        out.append((f"`{head}` runs twice", [_copy(node), _copy(node)]))
    if isinstance(node, ast.With):
        out.append((f"`{head}` is missing: its body runs outside it", _copy(node.body)))
    if isinstance(node, ast.If):
        out.append((f"the test `if {line}` is missing: its body always runs", _copy(node.body)))
        if node.orelse:
            out.append((f"the test `if {line}` is missing: only its else branch runs", _copy(node.orelse)))
        m = _copy(node)
        m.test = ast.UnaryOp(ast.Not(), m.test)
        out.append((f"the condition `if {line}` is the wrong way round", [m]))
    if isinstance(node, ast.For):
        m = _copy(node)
        m.iter = ast.Call(ast.Name("reversed", ast.Load()),
                          [ast.Call(ast.Name("list", ast.Load()), [m.iter], [])], [])
        out.append((f"`{head}` runs in reverse order", [m]))
    if isinstance(node, ast.AugAssign):                            # p -= v -> p = p - v
        target = short(node.target)
        out.append((f"`{target} = {target} {_OPS.get(type(node.op), '?')} …` makes a new object "
                    f"where `{target} {_OPS.get(type(node.op), '?')}= …` changes it in place",
                    [ast.Assign([_copy(node.target)],
                                ast.BinOp(_load(node.target), node.op, _copy(node.value)))]))
    if isinstance(node, ast.Assign) and len(node.targets) == 1 \
            and isinstance(node.value, ast.BinOp) \
            and isinstance(node.targets[0], (ast.Name, ast.Attribute, ast.Subscript)) \
            and ast.dump(_load(node.targets[0])) == ast.dump(node.value.left):
        target, op = short(node.targets[0]), _OPS.get(type(node.value.op), "?")
        out.append((f"`{target} {op}= …` changes it in place where `{target} = {target} {op} …` "
                    "makes a new object",
                    [ast.AugAssign(_copy(node.targets[0]), node.value.op, _copy(node.value.right))]))
    if isinstance(node, ast.Return) and node.value is not None:
        own = ast.unparse(node.value)
        out += [(f"the function returns `{n}`, an intermediate value, instead of its result",
                 [ast.Return(ast.Name(n, ast.Load()))]) for n in names if n != own]
    return out


_SCOPES = (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_STEP = (ast.BinOp, ast.UnaryOp, ast.Call, ast.Compare, ast.IfExp)
"""Sub-expressions that are a step of a computation (not a name, a constant or an attribute)."""


def _steps(stmt) -> list[tuple[str, list[ast.stmt]]]:
    """A step of a statement's computation returned in its place, for a statement of a function's
    own body (not in a loop: each runs once) that computes one value: the squared errors before
    their mean in `return ((y_hat - y) ** 2).mean()`, the mask in `g = grad_out * (z > 0)`."""
    if not isinstance(stmt, (ast.Assign, ast.Return)) or stmt.value is None \
            or isinstance(stmt.value, (ast.Tuple, *_SCOPES)):
        return []
    out, stack = [], list(ast.iter_child_nodes(stmt.value))
    while stack:
        node = stack.pop(0)
        if isinstance(node, _SCOPES):
            continue   # names bound in there are not the function's
        if isinstance(node, _STEP) and not (isinstance(node, ast.UnaryOp)
                                             and isinstance(node.operand, ast.Constant)):
            out.append((f"the function returns `{short(node, 40)}`, an intermediate value (a step "
                        f"of `{short(stmt.value, 40)}`), instead of its result",
                        [ast.Return(_copy(node))]))
        stack.extend(ast.iter_child_nodes(node))
    return out


def _load(target):
    m = _copy(target)
    m.ctx = ast.Load()
    return m


def _local_names(func, every: bool = False) -> list[str]:
    """The local variables of a def in order of first binding (the first three unless `every`:
    what it might return by mistake)."""
    found = []
    for node in ast.walk(func):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and node.id not in found:
            found.append(node.id)
    return found if every else found[:3]


def _parameters(func) -> list[str]:
    a = func.args
    return [p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)]


class _Readable(dict):
    """line -> the variables a read on that line may take by mistake: the parameters, the
    locals bound on an earlier line, and the locals of a loop around it (last iteration's)."""

    def __init__(self, func):
        super().__init__()
        self.first, self.params = {}, _parameters(func)
        for node in ast.walk(func):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                self.first[node.id] = min(self.first.get(node.id, node.lineno), node.lineno)
        self.loops = [(n.lineno, n.end_lineno) for n in ast.walk(func)
                      if isinstance(n, (ast.For, ast.While))]

    def __contains__(self, name):
        return name in self.first or name in self.params

    def __missing__(self, line):
        return [*self.params, *(n for n, first in self.first.items() if n not in self.params and (
            first < line or any(a <= first <= b and a <= line <= b for a, b in self.loops)))]


_readable = _Readable


def _sites(tree, every: bool):
    """(path, node, replacements, statement) for every place to mutate, in source order.
    `path` leads from the module to the node's list slot or field, so it finds the same place in
    a copy; a replacement is (sentence or kind, new) with new a node, a list of statements or
    "swap"; `statement` is the statement the node is in."""
    def walk(node, path, names, variables, stmt, parent=None):
        for fld, value in ast.iter_fields(node):
            items = list(enumerate(value)) if isinstance(value, list) else [(None, value)]
            for index, child in items:
                if not isinstance(child, ast.AST):
                    continue
                here = path + [(fld, index)]
                if isinstance(child, ast.FunctionDef):
                    yield from walk(child, here, _local_names(child, every), _readable(child), stmt)
                    continue
                if isinstance(child, ast.ClassDef):
                    yield from walk(child, here, names, variables, stmt)
                    continue
                if isinstance(child, ast.stmt) and index is not None:
                    steps = _steps(child) if every and isinstance(node, ast.FunctionDef) \
                        and fld == "body" else []
                    yield here, child, statement_mutants(child, names) + steps, child, None
                    if index + 1 < len(value) and _swappable(child, value[index + 1]):
                        yield here, child, [(value[index + 1], "swap")], child, None
                    yield from walk(child, here, names, variables, child)
                    continue
                if not isinstance(child, ast.expr):
                    yield from walk(child, here, names, variables, stmt)
                    continue
                # the topmost expression of the statement, or of a tuple's element there: the
                # fragment a learner's code holds as they wrote this part of it
                top = child if parent is None or (node is parent and isinstance(node, ast.Tuple)) \
                    else parent
                if fld not in ("targets", "target"):
                    yield here, child, expression_mutants(child), stmt, top
                    if every and isinstance(child, ast.Name) and isinstance(child.ctx, ast.Load) \
                            and child.id in variables and fld != "func":
                        yield here, child, [(("name", other), ast.Name(other, ast.Load()))
                                            for other in variables[child.lineno]
                                            if other != child.id], stmt, top
                yield from walk(child, here, names, variables, stmt, top)
    for i, node in enumerate(tree.body):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names = _local_names(node, every) if isinstance(node, ast.FunctionDef) else []
            variables = _readable(node) if isinstance(node, ast.FunctionDef) else {}
            yield from walk(node, [("body", i)], names, variables, node)


def _swappable(node, nxt) -> bool:
    """Swapping two plain assignments mostly gives a NameError: not worth a mutant."""
    plain = (ast.Assign, ast.Return)
    docstring = isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    return not (docstring or isinstance(node, ast.Return)
                or isinstance(node, plain) and isinstance(nxt, plain))


def _replace(tree, path, new):
    """Make the change in `tree` itself; returns what undoes it."""
    *head, (fld, index) = path
    parent = tree
    for f, i in head:
        parent = getattr(parent, f) if i is None else getattr(parent, f)[i]
    if index is None:
        old = getattr(parent, fld)
        setattr(parent, fld, new)
        return lambda: setattr(parent, fld, old)
    body = getattr(parent, fld)
    saved = list(body)
    if new == "swap":
        body[index], body[index + 1] = body[index + 1], body[index]
    elif isinstance(new, list):
        body[index:index + 1] = new
        if not body:
            body.append(ast.Pass())
    else:
        body[index] = new
    return lambda: body.__setitem__(slice(None), saved)


def mutate(cell: str, every: bool = False) -> list[Mutation]:
    """Every distinct mutant of the defs in an answer cell. `every` (the error model) adds a
    variable read in place of each other one and returns of every local, not only the first
    three."""
    tree = ast.parse(cell)
    original = ast.unparse(tree)
    out, seen = [], {original}
    for path, node, replacements, stmt, parent in list(_sites(tree, every)):
        for how, new in replacements:
            undo = _replace(tree, path, new)
            try:
                text = ast.unparse(ast.fix_missing_locations(tree))
                code = compile(text, "<mutant>", "exec")
                context = (new if parent is node else parent) if isinstance(new, ast.expr) else None
                fragment = ast.unparse(context) if context is not None else ""
            except (SyntaxError, ValueError, TypeError, AttributeError, RecursionError):
                continue
            finally:
                undo()
            if text in seen:
                continue
            seen.add(text)
            extra = {}
            if new == "swap":
                nxt = how                                          # the statement it moves after
                sentence = f"`{short(node, 40)}` comes after `{short(nxt, 40)}`; it belongs before it"
                extra["order"] = (marks(node), marks(nxt))
            elif isinstance(new, list):
                sentence = how
                if isinstance(node, (ast.Return, ast.Assign)) and len(new) == 1 \
                        and isinstance(new[0], ast.Return):
                    extra["kind"] = "intermediate"
            elif isinstance(how, tuple):                           # ("name", other)
                sentence = f"in {where(stmt, node)}, `{how[1]}` is used where `{node.id}` belongs"
            else:
                sentence = f"in {where(stmt, node)}, {_expression_sentence(how, node, new)}"
                extra["kind"] = how
            out.append(Mutation(describe(original, text), text, sentence, code=code,
                                fragment=fragment, **extra))
    return out

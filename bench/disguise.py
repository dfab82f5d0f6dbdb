"""Disguised copies of an answer, made as a learner hides a copy (bench/similarity.py).

`disguise(code, added, seed)` returns (code, added, what was done): identifiers renamed (the graded
function's and the class's methods' names kept), comments and blank lines changed (the code is
re-printed by ast.unparse, its comments dropped, others and blank lines put in), independent
adjacent statements swapped, a list built by a loop turned into a comprehension or a comprehension
into a loop, and helpers whose body is one `return` inlined where they are called.
"""

from __future__ import annotations

import ast
import builtins
import copy
import random

KEEP = set(dir(builtins)) | {"self", "ctx", "cls", "forward", "backward", "setup_context",
                             "__torch_dispatch__", "__init__", "__enter__", "__exit__", "torch",
                             "nn", "F", "math", "np", "functools", "itertools", "operator",
                             "typing", "copy"}
NAMES = ["alpha", "beta", "gamma", "delta", "eps_", "zeta", "eta", "theta", "iota", "kappa",
         "lam", "mu", "nu", "xi", "omicron", "pi_", "rho", "sigma_", "tau", "upsilon", "phi",
         "chi", "psi", "omega", "acc", "tmp", "val", "res", "buf", "cur", "nxt", "prv", "idx",
         "jdx", "kdx", "rows", "cols", "out_", "part", "piece"]
COMMENTS = ["# compute the result", "# step by step", "# see the lecture notes",
            "# TODO: tidy up", "# loop over the entries", "# shapes first", "# done",
            "# the main part", "# check this again", "# helper values"]


def _imported(tree) -> set[str]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            out |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return out


class _Rename(ast.NodeTransformer):
    def __init__(self, mapping):
        self.mapping = mapping

    def visit_Name(self, node):
        node.id = self.mapping.get(node.id, node.id)
        return node

    def visit_arg(self, node):
        node.arg = self.mapping.get(node.arg, node.arg)
        self.generic_visit(node)
        return node

    def visit_FunctionDef(self, node):
        node.name = self.mapping.get(node.name, node.name)
        self.generic_visit(node)
        return node

    visit_AsyncFunctionDef = visit_FunctionDef


def rename(tree, keep: set[str], rng: random.Random) -> ast.AST:
    """Every name the code binds (parameters, locals, helpers) gets another, except `keep`."""
    bound = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound.add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            bound.add(node.name)
    bound -= keep | KEEP | _imported(tree)
    fresh = [n for n in NAMES if n not in bound]
    rng.shuffle(fresh)
    mapping = {name: fresh[i % len(fresh)] + ("" if i < len(fresh) else str(i))
               for i, name in enumerate(sorted(bound))}
    return _Rename(mapping).visit(tree)


def _names(node, ctx) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ctx)}


def _independent(a, b) -> bool:
    simple = (ast.Assign, ast.AugAssign, ast.AnnAssign)
    if not (isinstance(a, simple) and isinstance(b, simple)):
        return False
    wa, wb = _names(a, ast.Store), _names(b, ast.Store)
    ra, rb = _names(a, ast.Load), _names(b, ast.Load)
    if isinstance(a, ast.AugAssign) or isinstance(b, ast.AugAssign):
        return False
    # no subscript/attribute stores (they change shared objects), no shared names
    for s in (a, b):
        targets = s.targets if isinstance(s, ast.Assign) else [s.target]
        if any(not isinstance(t, (ast.Name, ast.Tuple)) for t in targets):
            return False
    return not (wa & (rb | wb) or wb & ra)


class _Reorder(ast.NodeTransformer):
    def __init__(self, rng):
        self.rng, self.swaps = rng, 0

    def generic_visit(self, node):
        super().generic_visit(node)
        for field in ("body", "orelse", "finalbody"):
            body = getattr(node, field, None)
            if isinstance(body, list) and len(body) > 1:
                i = 0
                while i < len(body) - 1:
                    if _independent(body[i], body[i + 1]) and (not self.swaps
                                                                or self.rng.random() < 0.7):
                        body[i], body[i + 1] = body[i + 1], body[i]
                        self.swaps += 1
                        i += 2
                    else:
                        i += 1
        return node


def _append_loop(loop):
    """`for t in it: x.append(e)` (or with one `if c:`) -> (x, comprehension), else None."""
    if not isinstance(loop, ast.For) or loop.orelse or len(loop.body) != 1:
        return None
    stmt, conds = loop.body[0], []
    if isinstance(stmt, ast.If) and not stmt.orelse and len(stmt.body) == 1:
        conds, stmt = [stmt.test], stmt.body[0]
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
            and isinstance(stmt.value.func, ast.Attribute) and stmt.value.func.attr == "append"
            and isinstance(stmt.value.func.value, ast.Name) and len(stmt.value.args) == 1
            and not stmt.value.keywords):
        return None
    target = stmt.value.func.value.id
    comp = ast.ListComp(stmt.value.args[0], [ast.comprehension(loop.target, loop.iter, conds, 0)])
    return target, comp


class _Loops(ast.NodeTransformer):
    """x = [] + for ... x.append(e)  <->  x = [e for ...]."""

    def __init__(self, rng):
        self.rng, self.changed = rng, 0

    def generic_visit(self, node):
        super().generic_visit(node)
        for field in ("body", "orelse"):
            body = getattr(node, field, None)
            if not isinstance(body, list):
                continue
            out, i = [], 0
            while i < len(body):
                s = body[i]
                nxt = body[i + 1] if i + 1 < len(body) else None
                made = _append_loop(nxt) if nxt is not None else None
                if (isinstance(s, ast.Assign) and len(s.targets) == 1
                        and isinstance(s.targets[0], ast.Name) and isinstance(s.value, ast.List)
                        and not s.value.elts and made and made[0] == s.targets[0].id):
                    out.append(ast.Assign([ast.Name(made[0], ast.Store())], made[1], lineno=0))
                    self.changed += 1
                    i += 2
                    continue
                if (isinstance(s, ast.Assign) and len(s.targets) == 1
                        and isinstance(s.targets[0], ast.Name) and isinstance(s.value, ast.ListComp)
                        and len(s.value.generators) == 1 and not s.value.generators[0].is_async
                        and len(s.value.generators[0].ifs) <= 1):
                    g, name = s.value.generators[0], s.targets[0].id
                    append = ast.Expr(ast.Call(ast.Attribute(ast.Name(name, ast.Load()), "append",
                                                             ast.Load()), [s.value.elt], []))
                    inner = ast.If(g.ifs[0], [append], []) if g.ifs else append
                    out += [ast.Assign([ast.Name(name, ast.Store())], ast.List([], ast.Load()),
                                       lineno=0),
                            ast.For(g.target, g.iter, [inner], [], lineno=0)]
                    self.changed += 1
                    i += 1
                    continue
                out.append(s)
                i += 1
            setattr(node, field, out)
        return node


class _Substitute(ast.NodeTransformer):
    def __init__(self, mapping):
        self.mapping = mapping

    def visit_Name(self, node):
        if node.id in self.mapping and isinstance(node.ctx, ast.Load):
            return copy.deepcopy(self.mapping[node.id])
        return node


class _Inline(ast.NodeTransformer):
    def __init__(self, helpers):
        self.helpers, self.done = helpers, 0

    def visit_Call(self, node):
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id in self.helpers and not node.keywords:
            params, expr = self.helpers[node.func.id]
            if len(params) == len(node.args) and not any(isinstance(a, ast.Starred)
                                                          for a in node.args):
                self.done += 1
                return _Substitute(dict(zip(params, node.args))).visit(copy.deepcopy(expr))
        return node


def inline(tree, keep: set[str]):
    """Helpers `def h(a, b): return e` (top level, not a graded name) inlined where called."""
    helpers = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name not in keep \
                and not node.decorator_list and not node.args.defaults \
                and not node.args.vararg and not node.args.kwarg and not node.args.kwonlyargs:
            body = [s for s in node.body if not (isinstance(s, ast.Expr)
                                                 and isinstance(s.value, ast.Constant))]
            if len(body) == 1 and isinstance(body[0], ast.Return) and body[0].value is not None:
                helpers[node.name] = ([a.arg for a in node.args.args], body[0].value)
    if not helpers:
        return tree, 0
    inliner = _Inline(helpers)
    tree.body = [n for n in tree.body if not (isinstance(n, ast.FunctionDef) and n.name in helpers)]
    tree = inliner.visit(tree)
    return tree, inliner.done


def _layout(text: str, rng: random.Random) -> str:
    """Other comments and blank lines: some statements get a comment above them, some a blank
    line (never inside a string)."""
    starts = {node.lineno for node in ast.walk(ast.parse(text)) if isinstance(node, ast.stmt)}
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        stripped = line.lstrip()
        if n in starts and n > 1:
            if rng.random() < 0.15:
                out.append("")
            if rng.random() < 0.2:
                out.append(line[:len(line) - len(stripped)] + rng.choice(COMMENTS))
        out.append(line)
    return "\n".join(out) + "\n"


def disguise(code: str, added: str, keep: set[str], seed: int = 0) -> tuple[str, str, list[str]]:
    """A disguised copy of an answer cell `code` and the added cell `added` (may be ""); `keep`:
    names that must stay (the graded function or class). Returns (code, added, what was done)."""
    rng = random.Random(seed)
    done = []
    tree = ast.parse(code)
    extra = ast.parse(added) if added.strip() else ast.Module([], [])
    # inline the added cell's one-line helpers into the answer (the copier merges the cells)
    merged = ast.Module(extra.body + tree.body, [])
    merged, inlined = inline(merged, keep)
    if inlined:
        done.append(f"{inlined} helper call(s) inlined")
    answer_names = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    moved = [n for n in merged.body if not (isinstance(n, (ast.FunctionDef, ast.ClassDef))
                                           and n.name in answer_names)
             and n in extra.body]
    loops = _Loops(rng)
    merged = loops.visit(merged)
    if loops.changed:
        done.append(f"{loops.changed} loop(s) <-> comprehension(s)")
    reorder = _Reorder(rng)
    merged = reorder.visit(merged)
    if reorder.swaps:
        done.append(f"{reorder.swaps} independent statement pair(s) swapped")
    merged = rename(merged, keep, rng)
    done.append("identifiers renamed")
    _strip_docstrings(merged, keep)
    ast.fix_missing_locations(merged)
    extra_nodes = [n for n in merged.body if n in moved]
    answer_nodes = [n for n in merged.body if n not in moved]
    done.append("comments and blank lines changed")
    new_added = _layout(ast.unparse(ast.Module(extra_nodes, [])), rng) if extra_nodes else ""
    return _layout(ast.unparse(ast.Module(answer_nodes, [])), rng), new_added, done


def _strip_docstrings(tree, keep):
    """The graded function's docstring stays (it is the release's); helpers' go."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name not in keep \
                and node.name not in ("forward", "backward") and len(node.body) > 1 \
                and isinstance(node.body[0], ast.Expr) \
                and isinstance(node.body[0].value, ast.Constant) \
                and isinstance(node.body[0].value.value, str):
            node.body = node.body[1:]

"""What a mutation says (autograder/grade/mutation.py): the sentence of a change in the
solution's own names ("in `grad_W1 = …`, the factor `2` is missing"), the line it is in, the
changed part of an expression, and the one-line diff `make mutants` prints."""

from __future__ import annotations

import ast
import difflib
import io
import tokenize


def short(node_or_text, limit: int = 48) -> str:
    text = node_or_text if isinstance(node_or_text, str) else ast.unparse(node_or_text)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 1].rstrip() + "…"


def _tokens(text: str) -> list[str]:
    try:
        return [t.string for t in tokenize.generate_tokens(io.StringIO(text).readline)
                if t.type not in (tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER,
                                  tokenize.INDENT, tokenize.DEDENT) and t.string]
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return text.split()


def _join(tokens: list[str]) -> str:
    out = ""
    for t in tokens:
        glue = not out or out[-1] in "([.~" or t in ")],.:[(" or (t == "(" and out[-1].isalnum())
        out += t if glue else " " + t
    return out


def differing(old: str, new: str) -> tuple[str, str]:
    """The parts of two expressions that differ, common tokens at both ends left out; a part
    that would be a lone operator or dot keeps its neighbouring name."""
    a, b = _tokens(old), _tokens(new)
    i = 0
    while i < min(len(a), len(b)) and a[i] == b[i]:
        i += 1
    j = 0
    while j < min(len(a), len(b)) - i and a[-1 - j] == b[-1 - j]:
        j += 1
    lo, hi_a, hi_b = i, len(a) - j, len(b) - j
    # `grad_z1.T` -> `grad_z1`: show the name with and without its attribute
    while lo > 0 and ((a[lo:hi_a] or b[lo:hi_b] or ["."])[0] in (".", "(", "[") or
                      not (a[lo:hi_a] and b[lo:hi_b]) and a[lo - 1] in (".",)):
        lo -= 1
    while not (_balanced(a[lo:hi_a]) and _balanced(b[lo:hi_b])):
        if hi_a < len(a) and hi_b < len(b):
            hi_a, hi_b = hi_a + 1, hi_b + 1
        elif lo > 0:
            lo -= 1
        else:
            break
    return _join(a[lo:hi_a]), _join(b[lo:hi_b])


def _balanced(tokens: list[str]) -> bool:
    depth = 0
    for t in tokens:
        depth += t in "([{" and t != ""
        depth -= t in ")]}" and t != ""
        if depth < 0:
            return False
    return depth == 0


def where(stmt: ast.stmt, node: ast.AST | None = None) -> str:
    """Which line of the solution, by what it computes: "`grad_W1 = …`", "the returned value"."""
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        target, value = stmt.targets[0], stmt.value
        if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) \
                and len(target.elts) == len(value.elts) and node is not None:
            for t, v in zip(target.elts, value.elts):
                if any(n is node for n in ast.walk(v)):
                    return f"`{short(t)} = …`"
        return f"`{short(target)} = …`"
    if isinstance(stmt, ast.AugAssign):
        return f"`{short(stmt.target)} {_OPS[type(stmt.op)]}= …`"
    if isinstance(stmt, ast.Return):
        return "the returned value"
    if isinstance(stmt, ast.For):
        return f"the loop `for {short(stmt.target)} in {short(stmt.iter, 30)}`"
    if isinstance(stmt, (ast.If, ast.While)):
        return f"the condition `{short(stmt.test, 30)}`"
    return f"`{short(stmt, 40)}`"


_OPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.MatMult: "@", ast.Pow: "**",
        ast.FloorDiv: "//", ast.Mod: "%", ast.BitAnd: "&", ast.BitOr: "|"}


def _expression_sentence(kind: str, old: ast.expr, new: ast.expr) -> str:
    if kind == "drop-factor":
        dropped = old.right if new is old.left or ast.dump(new) == ast.dump(old.left) else old.left
        if isinstance(old.op, ast.Div) and dropped is old.right:
            return f"the division by `{short(dropped)}` is missing"
        if isinstance(old.op, ast.Pow):
            return f"the power `** {short(old.right)}` is missing"
        return f"the factor `{short(dropped)}` is missing"
    if kind == "drop-term":
        dropped = old.right if ast.dump(new) == ast.dump(old.left) else old.left
        sign = "-" if isinstance(old.op, ast.Sub) and dropped is old.right else ""
        return f"the term `{sign}{short(dropped)}` is missing"
    if kind == "operands":
        return (f"the operands of `{_OPS.get(type(old.op), '?')}` are swapped: "
                f"`{short(new)}` where `{short(old)}` belongs")
    if kind == "arguments":
        return f"the first two arguments are swapped: `{short(new)}` where `{short(old)}` belongs"
    if kind == "operator":
        return f"`{_OPS[type(new.op)]}` where `{_OPS[type(old.op)]}` belongs"
    was, now = differing(ast.unparse(old), ast.unparse(new))
    if not now:
        return f"`{short(was)}` is missing"
    if not was:
        return f"`{short(now)}` is extra"
    return f"`{short(now)}` where `{short(was)}` belongs"


def describe(original: str, mutated: str) -> str:
    """The changed lines, one line: `old` -> `new` (stripped; `a / b` for several lines)."""
    a, b = original.splitlines(), mutated.splitlines()
    parts = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        old = " / ".join(line.strip() for line in a[i1:i2])
        new = " / ".join(line.strip() for line in b[j1:j2])
        if tag == "replace":
            parts.append(f"`{old}` -> `{new}`")
        elif tag == "delete":
            parts.append(f"removed `{old}`")
        elif tag == "insert":
            parts.append(f"added `{new}`")
    return "; ".join(parts)

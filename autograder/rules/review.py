"""Constructs no exercise needs, found in the learner's code: flagged for the instructor.

By-hand answers are not flagged: what they may use is decided, and refused, from their code
(autograder/rules/subset/). Flags are for the rest: the answers of exercises whose subject is autograd
or torch itself (04, 07's FakeQuantize, train_quantized, record_ops, 06's layer_grad_norms) and
the cells a learner added.

Runs in the grader, never in the learner's process: it reads the notebook's code with `ast`
(nothing is executed). A flag does not change the score. It names what could reach into the
grader's side of the learner's process, or switch off the check of what their code used:
frames and the garbage collector (which find any live object), `sys.modules`, imports by
string, builtins patching, `__subclasses__`, function internals, the grader's own modules,
torch's mode-stack internals, monkeypatching torch, and the grader's socket. Each flag becomes
a test entry worth 0 points that only instructors see (`TestResult.review`), a "needs review"
line in the class report, and a comment on the cell's grade in nbgrader.
"""

from __future__ import annotations

import ast

from autograder.rules.subset import Finding, lines_of

MAX_LINE = 200
"""Characters of a flagged line quoted in a flag."""

_MODULES = {"ctypes": "ctypes (raw memory)",
            "pickle": "pickle (its data names functions to call: any module, gc's included)",
            "marshal": "marshal (code objects from bytes)",
            "_pickle": "pickle (its data names functions to call: any module, gc's included)",
            "importlib": "importlib (imports by string)",
            "builtins": "builtins (patching Python's builtins)",
            "inspect": "inspect (frames of the running code)",
            "socket": "socket (the grader's connection)",
            "multiprocessing": "multiprocessing (the grader's connection)",
            "subprocess": "subprocess (another process: what it computes cannot be checked)"}
"""Top-level modules whose import is flagged, and why."""
_NAMES = {
    "__import__": "__import__ (imports by string)",
    "__builtins__": "__builtins__ (patching Python's builtins)",
    "__subclasses__": "__subclasses__ (reaches classes by walking the type tree)",
    "_getframe": "sys._getframe (frames of the running code)",
    "f_back": "a frame's f_back (frames of the running code)",
    "f_globals": "a frame's f_globals (frames of the running code)",
    "f_locals": "a frame's f_locals (frames of the running code)",
    "tb_frame": "a traceback's tb_frame (frames of the running code)",
    "gi_frame": "a generator's gi_frame (frames of the running code)",
    "cr_frame": "a coroutine's cr_frame (frames of the running code)",
    "currentframe": "inspect.currentframe (frames of the running code)",
    "getouterframes": "inspect.getouterframes (frames of the running code)",
    "__closure__": "__closure__ (a function's captured variables)",
    "cell_contents": "cell_contents (a function's captured variables)",
    "__globals__": "__globals__ (another module's variables)",
    "__code__": "__code__ (rewriting a function's code)",
    "get_objects": "gc.get_objects (every live object)",
    "get_referrers": "gc.get_referrers (every live object)",
    "get_referents": "gc.get_referents (the objects an object holds)",
    "fork": "os.fork (another process: what it computes cannot be checked)",
    "forkpty": "os.forkpty (another process: what it computes cannot be checked)",
    "posix_spawn": "os.posix_spawn (another process: what it computes cannot be checked)",
}
"""Identifiers (names, attributes, getattr strings) flagged wherever they appear."""
_MODE_STACK = {
    "_pop_torch_dispatch_stack", "_push_on_torch_dispatch_stack", "_pop_torch_function_stack",
    "_push_on_torch_function_stack", "_pop_mode", "_push_mode", "_pop_mode_temporarily",
    "_disable_current_modes", "_DisableTorchDispatch", "DisableTorchFunction",
    "_DisableTorchFunction", "DisableTorchFunctionSubclass", "_ExcludeDispatchKeyGuard",
    "_set_dispatch_mode", "_unset_dispatch_mode", "_pop_mode_from_pre_dispatch",
    "_set_mode_pre_dispatch", "_DisablePythonDispatcher", "redispatch", "_op_dk",
    "_ForceDispatchKeyGuard", "_IncludeDispatchKeyGuard", "_get_current_dispatch_mode",
    "_get_current_dispatch_mode_stack", "_get_current_function_mode",
    "_get_current_function_mode_stack", "_len_torch_dispatch_stack", "_get_dispatch_stack_at",
    "_len_torch_function_stack", "_get_function_stack_at",
}
"""torch's mode-stack internals: popping, disabling or bypassing the modes that record what a
call runs. None is needed by any exercise (07's record_ops enters a TorchDispatchMode with
`with`, which is allowed; reading the stack is allowed there too)."""
_READ_STACK = {"_get_current_dispatch_mode", "_get_current_dispatch_mode_stack",
               "_len_torch_dispatch_stack", "_get_dispatch_stack_at"}
MODE_CELL = "record_ops"
"""The answer cell whose exercise is a TorchDispatchMode: reading the mode stack is fine there."""
_PATCHED_ROOTS = {"torch", "F", "nn", "wire"}
_SOCKET_CALLS = {"write", "dup", "dup2", "fdopen", "writev", "sendfile"}


def _root(node) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _identifier(name: str, cell: str) -> str | None:
    if "autograder" in name.lower():
        return "autograder (the grader's own modules)"
    if name in _NAMES:
        return _NAMES[name]
    if name in _MODE_STACK and not (cell == MODE_CELL and name in _READ_STACK):
        return f"{name} (torch's mode stack: switching off the check of what a call runs)"
    return None


def flags_in(source: str, cell: str) -> list[Finding]:
    """What `source` (one cell) uses that no exercise needs; [] for code that does not parse."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    lines = lines_of(source)
    found: dict[tuple[int, str], Finding] = {}

    def flag(node, what: str) -> None:
        line = getattr(node, "lineno", 1)
        text = lines[line - 1].strip() if 0 < line <= len(lines) else ""
        if len(text) > MAX_LINE:
            text = text[:MAX_LINE] + " ..."
        found.setdefault((line, what), Finding(cell, line, text, what))

    # A string on its own (a docstring, a note) runs nothing; a string used as a value may name
    # a module or attribute to look up (sys.modules["..."], getattr(x, "..."), import_module).
    notes = {id(n.value) for n in ast.walk(tree)
             if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
    for node in ast.walk(tree):
        if id(node) in notes:
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) \
                else [node.module or ""]
            for module in modules:
                top = module.split(".")[0]
                if top in _MODULES:
                    flag(node, _MODULES[top])
                if "autograder" in module:
                    flag(node, "autograder (the grader's own modules)")
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    what = _identifier(alias.name, cell)
                    if what:
                        flag(node, what)
                    if node.module == "sys" and alias.name == "modules":
                        flag(node, "sys.modules (the loaded modules, the grader's included)")
        elif isinstance(node, ast.Name):
            what = _identifier(node.id, cell)
            if what:
                flag(node, what)
        elif isinstance(node, ast.Attribute):
            what = _identifier(node.attr, cell)
            if what:
                flag(node, what)
            if node.attr == "modules" and _root(node.value) == "sys":
                flag(node, "sys.modules (the loaded modules, the grader's included)")
            if node.attr in _SOCKET_CALLS and _root(node.value) == "os":
                flag(node, f"os.{node.attr} (writing to the grader's connection)")
            if isinstance(node.ctx, (ast.Store, ast.Del)) and _root(node) in _PATCHED_ROOTS:
                flag(node, "patches torch (replaces a torch function or class attribute)")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            what = _identifier(node.value.strip(), cell) if len(node.value) < 100 else None
            if what is None and "autograder" in node.value.lower():
                what = "autograder (the grader's own modules)"
            if what:
                flag(node, what)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id in ("setattr", "delattr") and node.args \
                and _root(node.args[0]) in _PATCHED_ROOTS:
            flag(node, "patches torch (replaces a torch function or class attribute)")
    return sorted(found.values(), key=lambda f: (f.line, f.what))

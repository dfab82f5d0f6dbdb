"""The `student` object hidden tests receive: the learner's functions, called in the sandbox."""

from __future__ import annotations

import re

import torch

from autograder.grade.compare import alternatives, fail, note_inputs, raised_hint
from autograder.course import _source, base_name
from autograder.grade import causes
from autograder.grade.errors import describing, own_check
from autograder.grade.submission import Submission, defined_names
from autograder.jail.sandbox import Reply, Sandbox
from autograder.jail.inside.wire import Recipe

_BANNED_SPELLING = {"__matmul__": "`@`", "__rmatmul__": "`@`", "matmul": "`@` / torch.matmul",
                    "linear": "F.linear / nn.Linear", "grad": "torch.autograd.grad (directly, or through torch.func or "
                            "torch.autograd.functional, which call it)",
                    "backward": ".backward()", "optimizer_step": "torch.optim (an optimizer's step)",
                    "relu": "torch.relu / F.relu",
                    "sigmoid": "torch.sigmoid", "addmv": "torch.addmv", "baddbmm": "torch.baddbmm",
                    "addbmm": "torch.addbmm", "vecdot": "torch.linalg.vecdot", "bilinear": "F.bilinear",
                    "multi_dot": "torch.linalg.multi_dot", "elu": "F.elu", "selu": "F.selu", "celu": "F.celu",
                    "leaky_relu": "F.leaky_relu", "logsigmoid": "F.logsigmoid", "glu": "F.glu",
                    "softmax": "torch.softmax / F.softmax (the library's sigmoid in disguise: "
                               "σ(z) = softmax((z, 0))[0])",
                    "log_softmax": "torch.log_softmax / F.log_softmax (the library's sigmoid in disguise)",
                    "softmin": "F.softmin (the library's sigmoid in disguise)",
                    "softplus": "F.softplus (the library's sigmoid in disguise: σ(z) = exp(-softplus(-z)))",
                    **{name: f"torch.{name} (softplus in disguise, so the library's sigmoid: "
                             f"σ(z) = exp(-softplus(-z)) and softplus(-z) = logaddexp(0, -z) = "
                             f"logsumexp((0, -z)))"
                       for name in ("logsumexp", "logcumsumexp", "logaddexp", "logaddexp2")},
                    "vjp": "torch.func.vjp (autograd: torch.func calls torch.autograd.grad)",
                    "jvp": "a jvp (autograd by forward-mode AD: torch.func.jvp or "
                           "torch.autograd.functional.jvp)",
                    "jacobian": "torch.autograd.functional.jacobian (autograd)",
                    "hessian": "torch.autograd.functional.hessian (autograd)",
                    **dict.fromkeys(("_make_dual", "_unpack_dual"),
                                    "forward-mode AD (torch.autograd.forward_ad's make_dual / "
                                    "unpack_dual, or torch.func.jvp: autograd by another name)"),
                    "grad_fn.__get__": "an autograd node called by hand (`.grad_fn(...)` runs the "
                                       "library's own gradient formula: autograd without its engine)",
                    "numpy": "`.numpy()` (leaving torch for numpy: the check cannot see what numpy "
                             "computes, such as numpy's own `@`; stay in torch, or use plain Python "
                             "on `.tolist()`)",
                    "__array__": "numpy on a tensor (np.asarray, np.array, np.dot, ...: leaving torch "
                                 "for numpy, the check cannot see what numpy computes, such as numpy's "
                                 "own `@`; stay in torch, or use plain Python on `.tolist()`)"}
_BANNED_SPELLING |= dict.fromkeys(
    ("__dlpack__", "data_ptr", "untyped_storage", "storage", "_typed_storage", "__reduce_ex__", "_cdata"),
    "the tensor's raw memory (DLPack, untyped_storage, data_ptr, pickling: leaving torch, where the "
    "check cannot see what is computed; stay in torch, or use plain Python on `.tolist()`)")
_BANNED_SPELLING |= {name: f"F.{name} (a convolution's sums of products make a matrix product)"
                     for name in ("conv1d", "conv2d", "conv3d", "conv_transpose1d",
                                  "conv_transpose2d", "conv_transpose3d")}
_BANNED_SPELLING |= {"embedding_bag": "F.embedding_bag (its weighted sums of rows make a matrix product)",
                     "_sparse_mm": "torch.sparse.mm (a matrix product)"}
_OPERATOR_SPELLING = {"mm": "a built-in matrix product (torch.mm, `@`, torch.matmul, ...)",
                      "convolution": "a convolution (F.conv1d, F.conv2d, ...: its sums of products "
                                     "make a matrix product)",
                      "_embedding_bag_forward_only": "F.embedding_bag (its weighted sums of rows make "
                                                     "a matrix product)",
                      "_embedding_bag": "F.embedding_bag (its weighted sums of rows make a matrix product)",
                      "_sparse_addmm": "a sparse matrix product (torch.sparse.mm)",
                      "addmm": "a built-in matrix product (torch.addmm, F.linear, ...)",
                      "bmm": "a built-in matrix product (torch.bmm, torch.einsum, ...)",
                      "dot": "torch.dot", "vdot": "torch.vdot", "mv": "torch.mv (a matrix-vector product)",
                      "autograd_engine": "autograd (.backward(), torch.autograd.grad or torch.func)",
                      "optimizer_step": "torch.optim (an optimizer's step)",
                      "_record_function_enter_new": "torch.optim (an optimizer's step) or the profiler",
                      "_has_same_storage_numel": "forward-mode AD (make_dual: autograd by another name)",
                      "_make_dual": "forward-mode AD (make_dual: autograd by another name)",
                      "_unpack_dual": "forward-mode AD (unpack_dual: autograd by another name)",
                      "_slow_conv2d_forward": "a convolution's CPU kernel (aten._slow_conv2d_forward: "
                                              "its sums of products make a matrix product)",
                      "slow_conv3d_forward": "a convolution's CPU kernel (aten.slow_conv3d_forward: "
                                             "its sums of products make a matrix product)",
                      "mkldnn_convolution": "a convolution's oneDNN kernel (aten.mkldnn_convolution: "
                                            "its sums of products make a matrix product)",
                      "threshold_backward": "ReLU's own backward kernel (aten.threshold_backward)",
                      "sigmoid_backward": "the sigmoid's own backward kernel (aten.sigmoid_backward)",
                      "functorch_transform": "a torch.func transform",
                      "another_process": "another process (os.fork, subprocess, multiprocessing, "
                                         "os.system: what it computes cannot be checked; compute in "
                                         "the function's own process)",
                      "relu": "the library's ReLU (torch.relu, F.relu, nn.ReLU)",
                      "sigmoid": "the library's sigmoid (torch.sigmoid, F.sigmoid, nn.Sigmoid, expit)",
                      "_softmax": "a softmax (torch.softmax, F.softmax, F.softmin: the library's "
                                  "sigmoid in disguise)",
                      "_log_softmax": "a log-softmax (torch.log_softmax: the library's sigmoid in disguise)",
                      "softplus": "F.softplus (the library's sigmoid in disguise)",
                      "logsumexp": "torch.logsumexp (softplus, the library's sigmoid, in disguise)",
                      "logcumsumexp": "torch.logcumsumexp (softplus, the library's sigmoid, in disguise)",
                      "logaddexp": "torch.logaddexp (softplus, the library's sigmoid, in disguise)",
                      "logaddexp2": "torch.logaddexp2 (softplus, the library's sigmoid, in disguise)",
                      "log_sigmoid_forward": "F.logsigmoid", "elu": "F.elu / F.selu",
                      "leaky_relu": "F.leaky_relu"}


_MARKERS = ("autograd.", "func.", "optim.", "process.", "other.")
"""What the child records besides `aten.<operator>` and Python names: autograd's engine at work,
a torch.func transform, an optimizer's step, another process at work (never on an allowlist)."""


def _recorded(used: list[str], section: str = "") -> tuple[set[str], set[str]]:
    """(Python-level base names, ATen operators and markers) in `used`; only those recorded inside
    `section` of a class's run ("backward:aten.mul") when a section is given."""
    if section:
        used = [u[len(section) + 1:] for u in used if u.startswith(section + ":")]
    names, operators = set(), set()
    for u in used:
        if u.startswith(("aten.", *_MARKERS)):
            operators.add(u.split(".")[1])  # "aten.lift_fresh.default" -> "lift_fresh"
        elif ":" not in u:
            names.add(base_name(u))
    return names, operators


def banned_uses(used: list[str], banned: frozenset[str], allowed: frozenset[str] | None = None,
                section: str = "") -> str:
    """What the learner ran that the exercise does not allow, in their spelling where we know it;
    "" if nothing. `banned`: Python-level names refused; `allowed`: the ATen operators allowed
    (None: any), every other operator and marker refused."""
    names, operators = _recorded(used, section)
    by_name = sorted(names & banned)
    if by_name:
        return ", ".join(dict.fromkeys(_BANNED_SPELLING.get(u, f"torch {u}") for u in by_name))
    if allowed is None:
        return ""
    outside = sorted((op for op in operators - allowed if not allowed_operator(op, allowed)),
                     key=lambda op: (op not in _OPERATOR_SPELLING, op))
    return ", ".join(dict.fromkeys(_operator_words(op) for op in outside[:3]))


def allowed_operator(op: str, allowed: frozenset[str]) -> bool:
    """Whether `op` is on the list, or is torch's multi-tensor form of one that is
    (`_foreach_add_`, what torch.optim.SGD(foreach=True) runs, of `add_`)."""
    return op in allowed or (op.startswith("_foreach_") and op[len("_foreach_"):] in allowed)


def _operator_words(op: str) -> str:
    if "::" in op:
        return (f"the operator {op}, registered outside PyTorch's own (torch.library): grading "
                "cannot see what its kernel runs")
    return _OPERATOR_SPELLING.get(op, f"torch's operator aten.{op} (not one a by-hand answer needs)")


def describe(value) -> str:
    """Short description of an argument for messages: shape and dtype of tensors."""
    if isinstance(value, torch.Tensor):
        shape = "(" + ", ".join(map(str, value.shape)) + ("," if value.dim() == 1 else "") + ")"
        return f"{shape} {str(value.dtype).removeprefix('torch.')}"
    if isinstance(value, Recipe):
        return value.label or value.name
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, torch.Tensor) for v in value):
        return f"[{len(value)} tensors]"
    if isinstance(value, dict):
        return "{" + ", ".join(value) + "}"
    return repr(value)


def _argument_name(origin: str, params: list[str]) -> str:
    """"arg0[2]" -> "W[2]" (the learner's parameter name), as the child names what was passed."""
    head, _, rest = origin.partition("[")
    if head.startswith("arg") and head[3:].isdigit() and int(head[3:]) < len(params):
        return params[int(head[3:])] + (f"[{rest}" if rest else "")
    return origin


def _an_argument(value, params: list[str]) -> str:
    """How a returned value is (part of) an argument: "its input z itself", "a view of its input
    z (...)"; "" when every tensor in it is new."""
    if isinstance(value, (list, tuple)):
        return next((said for v in value if (said := _an_argument(v, params))), "")
    info = getattr(value, "info", None) if isinstance(value, torch.Tensor) else None
    if info is None:
        return ""
    if info.origin:
        return f"its input {_argument_name(info.origin, params)} itself"
    if info.shares:
        return (f"a view of its input {_argument_name(info.shares, params)} (a new tensor object "
                "sharing its memory: changing one changes the other)")
    return ""


class Student:
    """Calls the learner's functions; `student.matmul(A, B)` returns their result or fails the test."""

    def __init__(self, submission: Submission, sandbox: Sandbox,
                 references: dict[str, str] | None = None):
        self.submission = submission
        self.assignment = submission.assignment
        self.sandbox = sandbox
        self.references = references or {}
        """Trusted source of graded functions that others may call (matmul for linear_forward)."""
        self._replay = None
        """(function, a call that repeats the last call or drive) for a replay in a fresh child."""
        self._codes: dict[str, str] = {}
        """function -> the learner's code for it (`_code`)."""

    def call(self, name: str, *args, **kwargs) -> Reply:
        """Raw call: a `Reply` whatever happened (for tests of exceptions and in-place work)."""
        others = {k: v for k, v in self.references.items() if k != name}
        self._replay = (name, lambda: self.call(name, *args, **(kwargs or {})))
        reply = self.sandbox.call(name, args, kwargs, references=others)
        names = [p if p.isidentifier() else f"argument {i + 1}"
                 for i, p in enumerate(reply.params[:len(args)])]
        names += [f"argument {i + 1}" for i in range(len(names), len(args))]
        note_inputs([*zip(names, args), *(kwargs or {}).items()])
        causes.note_call(causes.Call(self.assignment.id, name, args, dict(kwargs or {}),
                                     self._code(name)))
        return reply

    def _code(self, name: str) -> str:
        """The learner's code that runs for `name` (its program without the setup cells), built
        once per function: every call of it notes it."""
        if name not in self._codes:
            setup = set(_source(self.assignment.id).setup)
            program = dict(self.submission.programs).get(name) or self.submission.cells
            self._codes[name] = "\n\n".join(c["source"] for c in program if c["source"] not in setup)
        return self._codes[name]

    def drive(self, name: str, driver: Recipe, *args) -> Reply:
        """Raw call of a class the learner completed: the trusted `driver(cls, *args)` runs it."""
        others = {k: v for k, v in self.references.items() if k != name}
        self._replay = (name, lambda: self.drive(name, driver, *args))
        causes.note_call(None)
        return self.sandbox.call(name, args, {}, references=others, driver=driver)

    def __getattr__(self, name: str):
        if name.startswith("_") or name not in self.assignment.functions:
            raise AttributeError(name)

        def proxy(*args, **kwargs):
            __tracebackhide__ = True
            return self.result(name, self.call(name, *args, **kwargs), args, kwargs)
        return proxy

    def _defined_below_check(self, name: str) -> bool:
        """Whether a cell that runs only after `name`'s check cell defines `name`."""
        below = self.submission.cells[self.submission.cells_for(name):]
        return any(name in defined_names(cell["source"]) for cell in below)

    def signature(self, name: str, args=(), kwargs=None) -> str:
        parts = [describe(a) for a in args] + [f"{k}={describe(v)}" for k, v in (kwargs or {}).items()]
        return f"{name}({', '.join(parts)})"

    def result(self, name: str, reply: Reply, args=(), kwargs=None, hint: str = "",
               about: str = ""):
        """The returned value, after failing the test for anything but a clean, allowed call.

        When the call raised: `hint` names the mistake that raises exactly this error on this
        input (compare.raised_mistakes, compare.raised_hint; never a default), and `about`, a
        plain sentence, says what this test's input has that is special (a fact, not a
        diagnosis: it is not shown as a hint).
        """
        __tracebackhide__ = True
        call = self.signature(name, args, kwargs)
        if reply.status == "missing":
            if self._defined_below_check(name):
                fail(f"{name} is defined only below its check cell. Grading runs the notebook "
                     f"from the top, as Restart & Run All does, and checks {name} where its "
                     f"check cell stands: define it in its answer cell, above the check.")
            errors = self.sandbox.load_report.errors if self.sandbox.load_report else []
            why = f" Running your answer cells raised: {errors[0]}" if errors else ""
            fail(f"{name} is not defined. Keep the `def {name}(...)` line in its answer cell "
                 f"and make sure the cell runs.{why}")
        if reply.status == "timeout":
            fail(f"{call} did not finish in time ({reply.detail}): an endless loop, or far too "
                 "slow; write it with tensor operations.")
        if reply.status == "crashed":
            fail(f"{call} crashed the Python process running it ({reply.detail}).")
        if reply.status == "exception":
            exc = reply.exception
            if exc.is_a("NotImplementedError"):
                later = (f" (a cell below its check cell defines {name} again, but grading, "
                         f"like Restart & Run All, checks the definition above the check: "
                         f"write it in its answer cell)" if self._defined_below_check(name) else "")
                fail(f"{name} is not written yet: it still raises NotImplementedError{later}.")
            if exc.is_a("SystemExit"):
                fail(f"{call} called exit() / sys.exit(): return the result instead.")
            if exc.is_a("MemoryError") or "can't allocate memory" in exc.message:
                fail(f"{call} ran out of memory: it tried to allocate far more than the inputs need.")
            where = f"\n{exc.where.rstrip()}" if exc.where else ""
            hint = hint or self._raised_cause(exc) or raised_hint(reply) \
                or self._raised_only_after_earlier_calls(name, reply, args, kwargs) \
                or self._own_check(name, exc) or self._not_run_hint(exc)
            # with no cause named, what the error itself means (a description, not a hint)
            meaning = "" if hint else describing(exc.message)
            fail(f"{call} raised {exc.type}: {exc.message}{where}{chr(10) + about if about else ''}"
                 f"{chr(10) + 'Hint: ' + hint if hint else ''}"
                 f"{chr(10) + 'What the error means: ' + meaning if meaning else ''}")
        a = self.assignment
        names = banned_uses(reply.used, a.banned.get(name, frozenset()), a.allowed.get(name),
                            a.allowed_section.get(name, ""))
        if names:
            reason = a.banned_reason.get(name, "write the formula yourself")
            fail(f"{call} uses {names}, which this exercise does not allow: {reason}.")
        if reply.mutated and name not in self.assignment.in_place:
            fail(f"{call} changed its input{'s' if len(reply.mutated) > 1 else ''} "
                 f"{', '.join(reply.mutated)} in place. Leave inputs untouched: build new tensors "
                 "(e.g. `z.clone()`, or out-of-place operations such as `a + b`).")
        if name in a.new_tensor:
            alias = _an_argument(reply.value, reply.params)
            if alias:
                fail(f"{call} returned {alias}; the exercise asks for a new tensor, whatever the "
                     "input holds (even when no entry needs to change): build the result, e.g. "
                     "with torch.where(...) or z.clone() followed by changes to the clone.")
        return reply.value

    def _own_check(self, name: str, exc) -> str:
        """When the call ended in a `raise` or an `assert` of the learner's own code (the last
        frame the child reports is in one of the learner's cells), the check that refused these
        valid arguments (errors.own_check), read from the grader's copy of that cell."""
        frames = re.findall(r'File "<notebook cell (\d+)>", line (\d+)', exc.where or "")
        if not frames:
            return ""
        cell, line = (int(x) for x in frames[-1])
        cells = self.sandbox._cells_of(name)
        if not len(_source(self.assignment.id).setup) < cell <= len(cells):
            return ""   # the notebook's own setup cells, or no cell of this child
        return own_check(cells[cell - 1]["source"], line)

    def _not_run_hint(self, exc) -> str:
        """For an error a missing entry or name gives: the statements of the learner's added
        cells that grading did not run (`Submission.not_run`), as in the kernel they did."""
        lines = self.submission.not_run
        if not lines or not any(exc.is_a(kind) for kind in (
                "KeyError", "IndexError", "NameError", "AttributeError", "UnboundLocalError")):
            return ""
        shown = "; ".join(f"`{line}`" for line in lines[:3])
        return (f"grading runs, of the cells you added, the statements that bind a name your "
                f"functions use and the ones that fill it by an assignment or a dropped call; "
                f"these ran in your notebook but not in grading: {shown}. Fill the value where "
                f"you bind it (K = {{...}}).")

    @staticmethod
    def _raised_cause(exc) -> str:
        """The causes of this error the error model finds in the learner's code
        (causes.explain_raised), as a hint."""
        try:
            said = causes.explain_raised(exc.type, exc.message)
        except Exception:  # noqa: BLE001 - a cause is extra; the message stands without it
            return ""
        return alternatives(said).removeprefix("\nHint: ") if said else ""

    def _raised_only_after_earlier_calls(self, name: str, reply: Reply, args, kwargs) -> str:
        """For a call that raised after earlier calls in the same process: the same call in a
        fresh process. When it then does not raise that error, the error comes from what the
        earlier calls left behind, and the hint says so (computed, whatever the state is)."""
        replay = getattr(self, "_replay", None)
        if self.sandbox.earlier_calls == 0 or reply.exception.is_a("NotImplementedError") \
                or replay is None or replay[0] != name:
            return ""
        self.sandbox.fresh()
        again = replay[1]()
        if again.status == "exception" and again.exception.type == reply.exception.type \
                and again.exception.message == reply.exception.message:
            return ""
        if again.status not in ("ok", "exception"):
            return ""
        return (f"called with the same inputs in a fresh process, {name} does not raise this: "
                "the error comes from something an earlier call left behind (a dict, list or "
                "global kept between calls, a default argument such as cache={}, an attribute "
                "set on the function). Compute everything from the arguments of each call.")

    def expect_raises(self, name: str, exception: str, *args, why: str = "",
                      valid: tuple | None = None) -> None:
        """Fail unless the learner's function raises `exception` (or a subclass) for these args,
        and, given `valid` (arguments it must accept), returns for those: a function that raises
        whatever it is given has rejected nothing."""
        __tracebackhide__ = True
        reply = self.call(name, *args)
        if reply.status == "exception" and reply.exception.is_a(exception):
            if valid is not None:
                accepted = self.call(name, *valid)
                if accepted.status == "exception" and accepted.exception.is_a(exception):
                    fail(f"{self.signature(name, valid)} raised {exception} too, and those sizes "
                         f"are fine: raise it only when {why or 'the inputs are wrong'}, and "
                         f"compute the result otherwise.")
            return
        call = self.signature(name, args)
        if reply.status == "ok":
            fail(f"{call} should raise {exception}{' (' + why + ')' if why else ''}, but it "
                 "returned a value.")
        if reply.status == "exception" and not reply.exception.is_a("NotImplementedError"):
            fail(f"{call} should raise {exception}{' (' + why + ')' if why else ''}; it raised "
                 f"{reply.exception.type}: {reply.exception.message}")
        self.result(name, reply, args)

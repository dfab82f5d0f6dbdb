"""One learner process: runs the learner's cells, then answers calls of their functions.

Forked by the jailed `server` for one (submission, graded function); it gets a
fresh copy of a process that has torch loaded and has never held another
learner's code. Everything it reports is the learner's to forge: the grader
treats it as data and decides every score itself.
"""

from __future__ import annotations

import _thread
import functools
import inspect
import operator
import os
import resource
import sys
import traceback
import types
from multiprocessing.connection import Connection

import torch
from torch.overrides import TorchFunctionMode, resolve_name
from torch.utils._python_dispatch import TorchDispatchMode

from autograder.jail.inside import wire

_CELL = "<notebook cell {}>"
_get_ident = _thread.get_ident
AUTOGRAD_ENGINE = "autograd.autograd_engine"
"""Recorded when autograd's engine runs (backward(), autograd.grad, torch.func.grad, ...)."""
FUNCTORCH = "func.functorch_transform"
"""Recorded when an operator runs inside a torch.func transform (jvp, vmap of grad, ...)."""
PROCESS = "process.another_process"
"""Recorded when learner code starts a process during a call, or one its cells started is alive."""


class _Recorder:
    """What the learner's code ran: torch functions by name, and every ATen operator.

    The function-level names let messages say what the learner wrote; the
    dispatch level catches every spelling of an operation (`torch.mm` resolves
    to the name "torch.spmm", but any matrix product reaches `aten.mm` or a
    relative), and autograd at work (the engine runs backward's operators
    inside a graph task). `paused` is set while trusted grader code runs.
    """

    OPTIMIZER_STEP = "optim.optimizer_step"
    """Recorded when a torch.optim optimizer's step() runs (seen through its profiler record)."""

    def __init__(self, into=None):
        """`into()`: the recorder to record in (this one by default; a learner thread's modes
        record in the recorder of the call under way, if any: `_Elsewhere`)."""
        self.seen: set[str] = set()
        self.paused: dict[int, int] = {}
        """thread ident -> depth of trusted grader code running in that thread: only that
        thread's operations go unrecorded (a learner's thread is recorded meanwhile)."""
        self.section = ""
        """"backward:" while the driver runs the learner's backward (`within`), "" otherwise."""
        into = into or (lambda: self)

        class Functions(TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                recorder = into()
                if recorder is not None and not recorder.paused.get(_get_ident()):
                    try:
                        recorder.seen.add(recorder.section + (resolve_name(func) or func.__qualname__))
                    except Exception:  # noqa: BLE001 - a name we cannot read is no evidence
                        pass
                return func(*args, **(kwargs or {}))

        class Operators(TorchDispatchMode):
            @classmethod
            def _should_skip_dynamo(cls):
                # Otherwise torch wraps __torch_dispatch__ in torch._dynamo.disable, whose first
                # call imports torch._dynamo: about 1.2 s of every cold start, for a mode that
                # never runs under torch.compile.
                return False

            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                recorder = into()
                if recorder is not None and not recorder.paused.get(_get_ident()):
                    section = recorder.section
                    namespace = func.namespace
                    if namespace in ("aten", "prim", "profiler"):
                        recorder.seen.add(f"{section}aten.{func._overloadpacket.__name__}")
                    else:  # an operator registered elsewhere (torch.library): its kernel is unseen
                        recorder.seen.add(f"{section}other.{namespace}::{func._overloadpacket.__name__}")
                    if func.namespace == "profiler" and args and isinstance(args[0], str) \
                            and args[0].startswith("Optimizer.step#"):
                        # torch.optim's Optimizer.step runs inside record_function("Optimizer.step#SGD.step")
                        recorder.seen.add(section + recorder.OPTIMIZER_STEP)
                    if torch._C._current_graph_task_id() != -1:
                        recorder.seen.add(section + AUTOGRAD_ENGINE)
                    if torch._C._functorch.maybe_current_level() is not None:
                        recorder.seen.add(section + FUNCTORCH)
                return func(*args, **(kwargs or {}))

        self.modes = (Functions(), Operators())

    def __enter__(self):
        self._depths = (_FUNCTION_STACK[0](), _DISPATCH_STACK[0]())
        _WATCH.guarded = self.modes[1]
        _WATCH.popped = False
        for mode in self.modes:
            mode.__enter__()
        return self

    def intact(self) -> bool:
        """Whether the recorder's modes were on torch's mode stacks for the whole call: nothing
        but the recorder popped its dispatch mode (every operator passes through it), and both
        modes are still where it put them, with nothing left above them; no dispatch key that
        routes operators to the modes is excluded."""
        functions, dispatch = _FUNCTION_STACK, _DISPATCH_STACK
        f, d = self._depths
        try:
            return (not _WATCH.popped and functions[0]() == f + 1 and dispatch[0]() == d + 1
                    and functions[1](f) is self.modes[0] and dispatch[1](d) is self.modes[1]
                    and not any(_EXCLUDED(key) for key in _ROUTING_KEYS))
        except Exception:  # noqa: BLE001 - a stack torch cannot read is not intact
            return False

    def __exit__(self, *exc):
        _WATCH.exiting = True
        try:
            if self.intact():
                for mode in reversed(self.modes):
                    mode.__exit__(*exc)
            else:  # back to the stacks as they were before the call, whatever the learner left
                f, d = self._depths
                while _FUNCTION_STACK[0]() > f:
                    _FUNCTION_STACK[2]()
                while _DISPATCH_STACK[0]() > d:
                    _DISPATCH_STACK[2](None)
        finally:
            _WATCH.exiting = False
            _WATCH.guarded = None

    def within(self, section: str, function):
        """`function` runs the learner's code of one part of a class (the driver's call of
        LinearFunction's backward): what it runs is recorded as "<section>:<name>"."""
        def run(*args, **kwargs):
            saved, self.section = self.section, f"{section}:"
            try:
                return function(*args, **kwargs)
            finally:
                self.section = saved
        return run

    def trusted(self, function, plain=None):
        """`function` (grader code) runs unrecorded: its operations are not the learner's. With
        `plain` (a stand-in the learner's code calls), only when its arguments are plain values
        (`plain(args, kwargs)`): an object of the learner's own could run their code inside it
        (a `.dim()`, a `__torch_function__`), which is then recorded like the rest."""
        def run(*args, **kwargs):
            if plain is not None and not plain(args, kwargs):
                return function(*args, **kwargs)
            me = _get_ident()
            self.paused[me] = self.paused.get(me, 0) + 1
            try:
                return function(*args, **kwargs)
            finally:
                self.paused[me] -= 1
        return run


class _Watch:
    """Whether anything but the recorder popped the recorder's dispatch mode during a call.

    Learner code could pop it (`torch.utils._python_dispatch._pop_mode_temporarily()`,
    `torch._C._pop_torch_dispatch_stack()`), run banned operators unseen and push it back;
    `install` puts a wrapper that notices in place of every name torch pops through.
    """

    def __init__(self):
        self.guarded = None
        self.popped = False
        self.exiting = False
        self.printing = 0

    def install(self) -> None:
        import torch.utils._python_dispatch as python_dispatch
        original = _DISPATCH_STACK[2]
        watch = self

        def pop(*args):
            mode = original(*args)
            if mode is not None and mode is watch.guarded and not watch.exiting and not watch.printing:
                watch.popped = True
            return mode

        torch._C._pop_torch_dispatch_stack = pop
        python_dispatch._pop_torch_dispatch_stack = pop
        # Printing a tensor (repr, str, print, an error message holding one: gradcheck's) pops every
        # mode while torch formats it, and pushes them back: allowed for torch's own tensors while
        # the names the formatting runs through are torch's own (a subclass, or a torch function
        # the learner replaced, could run the learner's code there, unseen).
        import torch._tensor_str as tensor_str
        formatted = tensor_str._str

        def untouched() -> bool:
            return all(vars(space).get(k) is v for space, names in originals for k, v in names.items())

        def format_tensor(self, *args, **kwargs):
            plain = type(self) in (torch.Tensor, torch.nn.Parameter) and untouched()
            watch.printing += plain
            try:
                return formatted(self, *args, **kwargs)
            finally:
                watch.printing -= plain
        tensor_str._str = format_tensor
        originals = [(space, dict(vars(space)))
                     for space in (tensor_str, torch, torch.Tensor, torch._C.TensorBase)]
        # Guards that turn off the dispatch to modes without popping them: nothing the exercises
        # run uses them (torch uses them for fake tensors, Triton kernels, debugging modes).
        import torch.utils._mode_utils as mode_utils
        # Likewise popping the function modes by torch._C's name (torch's own code pops them
        # through torch.overrides, which holds its own reference).
        for owner, name in ((torch._C, "_DisableTorchDispatch"), (torch._C, "DisableTorchFunction"),
                            (torch._C, "_DisableTorchFunction"), (mode_utils, "no_dispatch"),
                            (torch._C, "_pop_torch_function_stack")):
            if hasattr(owner, name):
                setattr(owner, name, self._noticed(getattr(owner, name)))
        # And excluding a dispatch key that routes operators to the modes (torch's own code
        # excludes others, ADInplaceOrView, through the same function).
        exclude = torch._C._dispatch_tls_set_dispatch_key_excluded

        def excluded(key, *rest):
            if key in _ROUTING_KEYS and watch.guarded is not None and not watch.exiting:
                watch.popped = True
            return exclude(key, *rest)
        torch._C._dispatch_tls_set_dispatch_key_excluded = excluded

    def _noticed(self, guard):
        watch = self

        def noticed(*args, **kwargs):
            if watch.guarded is not None and not watch.exiting:
                watch.popped = True
            return guard(*args, **kwargs)
        return noticed


class _Elsewhere:
    """What learner code runs outside the calling thread is the call's too.

    torch's modes are per thread: an operator run by a thread the learner started (threading,
    a ThreadPoolExecutor, `_thread`) would pass no recorder. Every thread learner code starts
    runs its target inside modes of its own that record in the recorder of the call under way
    (`active`), so a by-hand function may use threads for what it may use anyway, and autograd
    in a worker thread is autograd. What another process computes cannot be recorded at all:
    a process started during a call (the audit events of fork, exec, spawn, os.system,
    subprocess; and multiprocessing's fork_exec) is recorded as PROCESS, and so is a call made
    while a process the cells started is still alive (in the jail's PID namespace, anything
    but its init, the server and this child).
    """

    EVENTS = frozenset(("os.fork", "os.forkpty", "os.system", "os.exec", "os.posix_spawn",
                        "os.spawn", "subprocess.Popen", "pty.spawn"))

    def __init__(self):
        self.active = None
        self.started = False
        """Whether learner code ever started a process (then calls look for live ones)."""

    def install(self, jailed: bool) -> None:
        import _posixsubprocess
        import _thread
        import sys
        import threading
        elsewhere, recorder_class, events = self, _Recorder, self.EVENTS
        def recorded(original):
            def start(function, *rest, **kwargs):
                return original(wrap(function), *rest, **kwargs)
            return start

        def wrap(function):
            def run(*a, **k):
                modes = recorder_class(into=lambda: elsewhere.active).modes
                for mode in modes:
                    mode.__enter__()
                try:
                    return function(*a, **k)
                finally:
                    for mode in reversed(modes):
                        try:
                            mode.__exit__(None, None, None)
                        except BaseException:  # noqa: BLE001 - the learner's thread left its stack so
                            pass
            return run

        # Every way a thread starts: _thread's (3.13's threading calls start_joinable_thread)
        # and threading's own references to them.
        for owner, name in ((_thread, "start_new_thread"), (_thread, "start_new"),
                            (_thread, "start_joinable_thread"), (threading, "_start_new_thread"),
                            (threading, "_start_joinable_thread")):
            if hasattr(owner, name):
                setattr(owner, name, recorded(getattr(owner, name)))

        def process_started() -> None:
            elsewhere.started = True
            recorder = elsewhere.active
            if recorder is not None:
                recorder.seen.add(recorder.section + PROCESS)

        def hook(event, args):
            if event in events:
                process_started()

        sys.addaudithook(hook)  # for good: an audit hook cannot be removed
        fork_exec = _posixsubprocess.fork_exec

        def fork_exec_noticed(*args, **kwargs):
            process_started()
            return fork_exec(*args, **kwargs)
        _posixsubprocess.fork_exec = fork_exec_noticed
        self._jailed = jailed

    def others_alive(self) -> bool:
        """Whether any process but the jail's init, the server and this child is alive (only in
        the jail's PID namespace): one the learner started, however (a raw fork through ctypes
        raises no audit event), or one left by whatever ran in the jail before."""
        if not self._jailed:
            return False
        known = {"1", str(os.getpid()), str(os.getppid())}
        try:
            return any(p.isdigit() and p not in known for p in os.listdir("/proc"))
        except OSError:
            return False


_WATCH = _Watch()
_ELSEWHERE = _Elsewhere()
_FUNCTION_STACK = (torch._C._len_torch_function_stack, torch._C._get_function_stack_at,
                   torch._C._pop_torch_function_stack)
_DISPATCH_STACK = (torch._C._len_torch_dispatch_stack, torch._C._get_dispatch_stack_at,
                   torch._C._pop_torch_dispatch_stack)
"""torch's own functions, taken before learner code runs (which may replace torch's names)."""
_EXCLUDED = torch._C._dispatch_tls_is_dispatch_key_excluded
_ROUTING_KEYS = tuple(getattr(torch._C.DispatchKey, k) for k in ("Python", "PythonTLSSnapshot")
                      if hasattr(torch._C.DispatchKey, k))
"""The dispatch keys through which operators reach the dispatch modes: excluded, no mode sees
an operator (and a call that ends with one excluded was not watched)."""
SWITCHED_OFF = ("the check of what your code used was switched off during the call (a torch "
                "mode was popped or left on torch's mode stack, or torch's dispatch to modes was "
                "disabled); grading cannot tell what it ran")


def warm_up() -> None:
    """Run what every call runs once, in the server: its lazy imports then happen only once.

    Not torch.func: its first use imports torch._dynamo (about 1.2 s, on every cold start's
    critical path), and only learner code that is then told it may not use it calls it.
    """
    x = torch.ones(2, requires_grad=True)
    with _Recorder():
        (x * 2).sum().backward()
    wire.encode((x, x.grad, torch.float64, 1.5), lambda t: (None, None))
    inspect.signature(warm_up)
    _plain((x, [1.5], {"a": None}))


def bound(memory_limit: int, cpu_seconds: int, processes: int, file_bytes: int) -> None:
    """Hard limits on what this process and everything it starts may take: address space on top
    of what it holds now, CPU seconds, processes of its uid, file size; no core files."""
    with open("/proc/self/status") as status:
        vm = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmSize"))
    for name, value in (("RLIMIT_AS", vm + memory_limit), ("RLIMIT_CPU", cpu_seconds),
                        ("RLIMIT_NPROC", processes), ("RLIMIT_FSIZE", file_bytes),
                        ("RLIMIT_CORE", 0)):
        resource.setrlimit(getattr(resource, name), (value, value))


def limit_resources(memory_limit: int, cpu_seconds: int, processes: int, file_bytes: int) -> None:
    """Bound what this process and everything it starts may take; its output goes nowhere."""
    bound(memory_limit, cpu_seconds, processes, file_bytes)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # learner prints must not reach the grader
        os.dup2(devnull, fd)
    os.close(devnull)


def _exception(error: BaseException) -> dict:
    frames = [f for f in traceback.extract_tb(error.__traceback__)
              if f.filename.startswith("<notebook cell")]
    where = "".join(traceback.format_list(frames[-3:]))[-1500:]
    try:
        message = str(error)[:2000]
    except BaseException:  # noqa: BLE001 - a hostile __str__
        message = "(the error's message could not be read)"
    return {"type": type(error).__name__[:100],
            "bases": [c.__name__[:100] for c in type(error).__mro__],
            "message": message, "where": where}


def _tensors(value, path, out):
    """(path, tensor) for tensors inside args (lists, tuples, dicts, modules)."""
    if isinstance(value, torch.Tensor):
        out.append((path, value))
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _tensors(v, f"{path}[{i}]", out)
    elif isinstance(value, dict):
        for k, v in value.items():
            _tensors(v, f"{path}[{k!r}]", out)
    elif isinstance(value, torch.nn.Module):
        for k, v in value.named_parameters():
            out.append((f"{path}.{k}", v))
    return out


def run_cells(cells: list[dict], started=lambda i: None) -> tuple[dict, list[str]]:
    """Run the cells in one namespace, as the notebook would; a cell that raises does not stop the rest.

    `started(i)` is told before cell i runs, so that a cell that kills or hangs the process
    can be named and left out.
    """
    namespace = {"__name__": "__main__"}
    errors = []
    for i, cell in enumerate(cells, 1):
        started(i - 1)
        source = cell["source"]
        try:
            exec(compile(source, _CELL.format(i), "exec"), namespace)
        except BaseException as error:  # noqa: BLE001 - learner code may raise anything
            try:
                errors.append(f"{type(error).__name__}: {error}"[:500])
            except BaseException:  # noqa: BLE001
                errors.append(type(error).__name__[:100])
    return namespace, errors


@functools.lru_cache(maxsize=256)
def _trusted_code(source: str, filename: str):
    """The grader's drivers, recipes and references, compiled once per child (calls repeat them)."""
    return compile(source, filename, "exec")


def _caller():
    """The function that answers one call request, made before learner code runs.

    Everything it relies on (the recorder class, wire's encoder and decoder, the helpers) is
    bound here as a local of this closure, not looked up in a module at call time: once `main`
    has dropped the grader's modules from sys.modules, learner code that imports
    `autograder.jail.inside.child` or `.wire` gets a new copy, and patching it changes nothing here.
    """
    Recorder, encode, decode, tensors, exception = _Recorder, wire.encode, wire.decode, _tensors, _exception
    trusted_code, signature, partial, equal = _trusted_code, inspect.signature, functools.partial, torch.equal
    restore_builtins, elsewhere, plain = _builtins_keeper(), _ELSEWHERE, _plain
    restore_torch, hooks_off, originals = _namespace_keeper(), _hooks_keeper(), _originals()
    storage_of, numel_of, detach = torch.Tensor.untyped_storage, torch.Tensor.numel, torch.Tensor.detach
    only_plain = _only_plain

    def call(namespace: dict, request: dict) -> dict:
        restore_builtins()  # the cells may have replaced some: this code relies on them
        restore_torch()  # and torch's names, and the standard modules' (a cell's patch of one)
        hooks_off()  # a profile or trace hook set by the cells would run during the call's report
        function = namespace.get(request["call"])
        if not callable(function):
            return {"status": "missing"}
        named: dict = {}
        recorder = Recorder()
        if request.get("driver"):
            # A class the learner completes (an autograd.Function) is run by trusted grader code:
            # `driver(LearnerClass, *args)` calls its forward and backward; `TRUSTED(f)` wraps the
            # driver's own use of autograd so that it is not counted as the learner's;
            # `SECTION("backward", f)` marks what f runs as that part of the class (course.allowed_section).
            scope = {"torch": torch, "NAMED": named, "TRUSTED": recorder.trusted,
                     "SECTION": recorder.within}
            exec(trusted_code(request["driver"]["source"], "<grader driver>"), scope)
            function = partial(scope[request["driver"]["name"]], function)

        def build(recipe: dict):
            scope = {"torch": torch, "NAMED": named}
            exec(trusted_code(recipe["source"], "<grader recipe>"), scope)
            return scope[recipe["name"]](*decode(recipe["args"], live=True))

        args = decode(request["args"], live=True, build=build)
        kwargs = decode(request["kwargs"], live=True, build=build)
        try:
            params = [str(p) for p in signature(function).parameters]
        except (TypeError, ValueError):
            params = []
        passed = [pt for i, a in enumerate(args) for pt in tensors(a, f"arg{i}", [])]
        passed += [pt for key, obj in named.items() for pt in tensors(obj, key, [])]
        origins = {id(t): p for p, t in passed}  # positional origin ("arg0[2]"), not the learner's names
        memory = {}  # the address of each passed tensor's data -> its origin (the first, for aliases)
        for p, t in passed:
            if numel_of(t):
                memory.setdefault(storage_of(t).data_ptr(), p)
        # Learner's parameter names for messages ("W", "params[2]"); the grader checks the
        # tensors it sent itself, this covers the objects recipes built in here.
        before = []
        for i, a in enumerate(args):
            label = params[i] if i < len(params) else f"argument {i + 1}"
            before += [(label + p[len(f"arg{i}"):], t, t.detach().clone())
                       for p, t in tensors(a, f"arg{i}", [])]
        before += [(p, t, t.detach().clone()) for k, v in kwargs.items() for p, t in tensors(v, k, [])]

        def origin_of(t):
            """(the passed object t is, the passed tensor whose memory t shares): a new tensor
            object that is a view or detach() of an argument is still that argument's data."""
            if id(t) in origins:
                return origins[id(t)], None
            try:
                return None, memory.get(storage_of(t).data_ptr()) if numel_of(t) else None
            except Exception:  # noqa: BLE001 - no storage to compare (a learner's tensor subclass)
                return None, None

        # The grader's own versions of the other graded functions stand in for the
        # learner's while this one runs, so one broken function costs only its own points.
        for name, source in request.get("references", {}).items():
            # torch's functions as they were before any learner code ran, whatever it rebound
            scope = dict(originals)
            exec(trusted_code(source, "<grader reference>"), scope)
            # A class (an autograd.Function) stays a class; its methods run as recorded code.
            namespace[name] = scope[name] if isinstance(scope[name], type) \
                else recorder.trusted(scope[name], plain=only_plain)
        intact = False
        if elsewhere.others_alive():
            recorder.seen.add(PROCESS)
        elsewhere.active = recorder
        encoded, unreadable = None, None
        try:
            with recorder:
                try:
                    value = function(*args, **kwargs)
                finally:
                    intact = recorder.intact()
            # The report is made while the call is still the active one (what a learner's thread
            # runs meanwhile is recorded as the call's), and nothing learner code set up runs in
            # this thread while the grader reads the result: builtins and torch's names put
            # back, hooks removed (setting one during the call switched the recorder off),
            # only plain objects read (no tensor subclass), through functions bound before any
            # learner code ran.
            restore_builtins()
            restore_torch()
            intact = hooks_off() and intact
            try:
                encoded = [encode(plain(v), origin_of) for v in (
                    value, tuple(args),
                    {k: v for k, v in named.items() if not isinstance(v, torch.nn.Module)}
                    | {f"{k}.{n}": p for k, v in named.items()
                       if isinstance(v, torch.nn.Module) for n, p in v.named_parameters()})]
            except BaseException as error:  # noqa: BLE001 - a hostile return value
                unreadable = str(error)[:200] if isinstance(error, _NotPlain) else ""
            intact = hooks_off() and intact
            status, exc = "ok", None
        except BaseException as error:  # noqa: BLE001
            status, value, exc = "exception", None, exception(error)
            intact = hooks_off() and intact
        elsewhere.active = None
        if elsewhere.others_alive():
            recorder.seen.add(PROCESS)
        restore_builtins()
        if not intact:
            status, value, exc = "exception", None, {
                "type": "RecorderSwitchedOff", "bases": ["RecorderSwitchedOff"],
                "message": SWITCHED_OFF, "where": ""}
        mutated = [p for p, t, old in before
                   if t.shape != old.shape or t.dtype != old.dtype or not equal(detach(t), old)]
        reply = {"status": status, "exception": exc, "used": sorted(recorder.seen),
                 "params": params, "mutated": mutated}
        if status == "ok" and encoded is not None:
            reply["value"], reply["args_after"], reply["named_after"] = encoded
        elif status == "ok":
            reply.update(status="exception", value=None, args_after=None, named_after=None,
                         exception={"type": "UnreadableResult", "bases": ["UnreadableResult"],
                                    "message": unreadable or "the returned value could not be read",
                                    "where": ""})
        return reply


    return call


_PLAIN_VALUES = (torch.Tensor, torch.nn.Parameter, int, float, bool, complex, str, type(None),
                 torch.dtype, torch.Size, torch.device, slice)


def _only_plain(args, kwargs, depth: int = 0) -> bool:
    """Whether a call's arguments hold only values of exact plain types (tensors, numbers, strings,
    dtypes; lists, tuples and dicts of them): nothing that runs code of the learner's when read."""
    stack = [(args, 0), (kwargs, 0)]
    while stack:
        value, depth = stack.pop()
        kind = type(value)
        if kind in _PLAIN_VALUES:
            continue
        if depth > 20 or kind not in (list, tuple, dict):
            return False
        stack.extend((v, depth + 1) for v in (dict.values(value) if kind is dict else value))
    return True


class _NotPlain(TypeError):
    """A returned value holds an object of a type the grader does not read (its message says which)."""


_PLAIN_TENSORS = (torch.Tensor, torch.nn.Parameter)


def _plain(value, depth: int = 0):
    """`value` checked to hold only exact plain types (a tensor subclass, or a list subclass, could
    run learner code while the grader reads it): tensors, numbers, strings, None, dtypes,
    torch.Size, and lists, tuples and str-keyed dicts of them; other objects are left for the
    encoder to report as unsupported, never called."""
    kind = type(value)
    if depth > 50:
        raise _NotPlain("the returned value is nested too deeply")
    if kind in _PLAIN_TENSORS:
        return value
    if isinstance(value, torch.Tensor):
        raise _NotPlain(f"the returned value holds a {kind.__name__[:80]}, a subclass of "
                        "torch.Tensor: return a plain tensor")
    if value is None or kind in (bool, int, float, str, torch.dtype, torch.Size):
        return value
    # Containers, subclasses too (torch.max's named tuple), read through the base type's own
    # methods, never the subclass's.
    if isinstance(value, (list, tuple)):
        base = list if isinstance(value, list) else tuple
        return base(_plain(base.__getitem__(value, i), depth + 1) for i in range(base.__len__(value)))
    if isinstance(value, dict):
        items = dict.items(value)
        if not all(type(k) is str for k, _ in items):
            return wire.Unsupported("dict")
        return {str.__str__(k): _plain(v, depth + 1) for k, v in items}
    # a subclass of a number or string (numpy's float64 is one): its plain value, read by the
    # base type's own method, never the subclass's
    for base in (int, float, str):
        if isinstance(value, base) and kind is not bool:
            return getattr(base, f"__{base.__name__}__")(value)
    return wire.Unsupported(kind.__qualname__[:80])


def _namespace_keeper():
    """A function that puts torch's namespaces back as they were now (before learner code):
    learner code may rebind torch.relu or Tensor.detach, which the stand-ins and the report
    rely on. Names torch adds by itself later (a submodule imported lazily) are left alone."""
    import copy
    import itertools
    import math
    import typing
    # torch's, and the standard modules a by-hand answer may use (subset.MODULES): a cell that
    # replaced functools.reduce changes nothing in a call
    owners = [torch, torch.nn, torch.nn.functional, torch.autograd, torch.Tensor,
              torch._C.TensorBase, torch.nn.Parameter, torch.linalg,
              math, itertools, functools, operator, copy, typing]
    saved = [(owner, dict(vars(owner))) for owner in owners]
    keys = {id(owner): (tuple(names), tuple(names.values())) for owner, names in saved}
    setter, deleter, is_, all_, map_, len_ = setattr, delattr, operator.is_, all, map, len

    def restore() -> None:
        for owner, names in saved:
            now = vars(owner)
            k, v = keys[id(owner)]
            if len_(now) == len_(k) and all_(map_(is_, map_(now.get, k), v)):
                continue  # (identity only, in C: a learner's __eq__ is never asked)
            for k, v in names.items():
                if now.get(k) is not v:
                    try:
                        setter(owner, k, v)
                    except (AttributeError, TypeError):
                        pass
            for k in [k for k in now if k not in names and not isinstance(now[k], types.ModuleType)]:
                try:
                    deleter(owner, k)
                except (AttributeError, TypeError):
                    pass
    return restore


def _hooks_keeper():
    """A function that removes every profile, trace and monitoring hook (they run code at each
    function call, the grader's included) and says whether none was set."""
    import threading
    setprofile, settrace, getprofile, gettrace = sys.setprofile, sys.settrace, sys.getprofile, sys.gettrace
    monitoring = getattr(sys, "monitoring", None)
    tools = range(6)
    threading_off = [getattr(threading, n) for n in ("setprofile", "settrace") if hasattr(threading, n)]
    all_threads = [getattr(threading, n) for n in ("setprofile_all_threads", "settrace_all_threads")
                   if hasattr(threading, n)]
    own = {tool for tool in tools if monitoring is not None and monitoring.get_tool(tool) is not None}

    def off() -> bool:
        clean = getprofile() is None and gettrace() is None
        setprofile(None)
        settrace(None)
        for f in threading_off:
            f(None)
        for f in all_threads:
            f(None)
        if monitoring is not None:
            for tool in tools:
                if tool not in own and monitoring.get_tool(tool) is not None:
                    clean = False
                    monitoring.set_events(tool, 0)
                    monitoring.free_tool_id(tool)
        return clean
    return off


def _originals() -> dict:
    """What the grader's stand-ins see as `torch` and `F`: copies of the modules' namespaces
    taken before learner code runs (`torch.relu = torch.sigmoid` in a cell changes nothing)."""
    def copy(module, **extra):
        twin = types.ModuleType(module.__name__)
        vars(twin).update(vars(module))
        vars(twin).update(extra)
        return twin
    functional = copy(torch.nn.functional)
    nn = copy(torch.nn, functional=functional)
    return {"torch": copy(torch, nn=nn), "F": functional, "nn": nn}


def _builtins_keeper():
    """A function that puts back Python's builtins as they were now (learner code may replace
    `isinstance`, `sorted`, ... which the report of a call relies on)."""
    import builtins
    table = builtins.__dict__
    saved = dict(table)

    def restore() -> None:
        if table != saved:
            table.clear()
            table.update(saved)
    return restore


def _forget_grader_modules() -> None:
    """Drop the grader's modules from sys.modules: an import in learner code then loads a new
    copy, never the objects this process runs (which `_caller` holds by reference)."""
    import sys
    for name in [n for n in sys.modules if n == "autograder" or n.startswith("autograder.")]:
        del sys.modules[name]


def main(fd: int, limits: dict) -> None:
    """Child entry point: receive the cells, run them, then answer calls until the socket closes."""
    conn = Connection(fd)
    limit_resources(**limits)
    # From here on this function holds all it uses as locals: learner code runs next.
    _WATCH.install()
    _ELSEWHERE.install(jailed=bool(os.environ.get("AUTOGRADER_SCRATCH")))
    call, dumps, loads, report, run = _caller(), wire.dumps, wire.loads, _exception, run_cells
    send, receive, leave = conn.send_bytes, conn.recv_bytes, os._exit
    _forget_grader_modules()
    try:
        cells = loads(receive(64 << 20))
        namespace, errors = run(cells, lambda i: send(dumps({"status": "running", "cell": i})))
        defined = sorted(k for k, v in namespace.items()
                         if not k.startswith("__") and callable(v))[:1000]
        send(dumps({"status": "loaded", "defined": defined, "errors": errors[:50]}))
    except BaseException:  # noqa: BLE001 - the grader sees the socket close
        leave(3)
    while True:
        try:
            request = loads(receive(256 << 20))
        except BaseException:  # noqa: BLE001 - the grader closed the socket
            leave(0)
        try:
            reply = call(namespace, request)
        except BaseException as error:  # noqa: BLE001
            reply = {"status": "exception", "exception": report(error), "used": []}
        if isinstance(request, dict) and "nonce" in request:
            reply["nonce"] = request["nonce"]  # what learner code writing to the socket cannot know
        try:
            send(dumps(reply))
        except BaseException:  # noqa: BLE001
            leave(3)

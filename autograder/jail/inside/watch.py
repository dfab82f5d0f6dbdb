"""The recorder of a learner's call, and the watchers that keep it honest.

`_Recorder` notes every torch function and ATen operator the learner's code runs during a
call; `_Watch` notices learner code taking the recorder's modes off torch's stacks (or turning
off the dispatch to them); `_Elsewhere` records what the call's code runs in threads it starts,
and notes processes it starts. Everything taken from torch here is taken when this module is
imported, in the server, before any learner code runs (`child` imports it).
"""

from __future__ import annotations

import _thread
import os

import torch
from torch.overrides import TorchFunctionMode, resolve_name
from torch.utils._python_dispatch import TorchDispatchMode

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

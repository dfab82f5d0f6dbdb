"""One learner process: runs the learner's cells, then answers calls of their functions.

Forked by the jailed `server` for one (submission, graded function); it gets a
fresh copy of a process that has torch loaded and has never held another
learner's code. Everything it reports is the learner's to forge: the grader
treats it as data and decides every score itself.
"""

from __future__ import annotations

import functools
import inspect
import os
import resource
import traceback
from multiprocessing.connection import Connection

import torch

from autograder.jail.inside import wire
from autograder.jail.inside.keep import (_builtins_keeper, _forget_grader_modules, _hooks_keeper,
                                         _namespace_keeper, _originals)
from autograder.jail.inside.plain import _NotPlain, _only_plain, _plain
from autograder.jail.inside.watch import _ELSEWHERE, _WATCH, PROCESS, _Recorder

_CELL = "<notebook cell {}>"
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
    `autograder.jail.inside.child` or `.wire` (or `.watch`, `.keep`, `.plain`) gets a new copy,
    and patching it changes nothing here.
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

"""The jailed fork server: `python -m autograder.jail.inside.server FD [MODULE ...]`.

Started by the grader inside the jail (or, with `--no-jail`, as a plain
subprocess). It imports torch (and the MODULEs) once, then serves requests on the control
socket FD (one JSON message per datagram):

* `{"op": "spawn", "limits": {...}, "warm": [module, ...]}` with a socket attached:
  import the `warm` modules here (once; the grader names them), then fork a `child`
  that talks to the grader over that socket; reply `{"pid": ...}`;
* `{"op": "reap", "pid": p}`: how child p ended (waits up to a second);
* `{"op": "reset"}`: kill every process of the jail but this one, remove the IPC objects
  (System V, POSIX queues) they left, empty the scratch directory (reset.py); reply
  `{"done": true}` once nothing is left;
* `{"op": "kernel", "argv": [...], "warm": [module, ...]}`: import the `warm` modules (the
  notebook's lazy imports) once, then fork the learner's notebook kernel (nbgrader's feedback
  run: `notebook_kernel.forked`, ipykernel with a grading child's limits) on the connection
  file that argv names, in AUTOGRADER_KERNELS (bound into the jail); reply `{"pid": ...}`;
* `{"op": "signal", "pid": p, "signum": n}`: signal a child (a kernel's interrupt or kill);
  `{"op": "reap", "pid": p, "wait": 0}` polls without waiting.

The server never receives learner code (the child does, over its own
socket), so no child inherits another learner's cells in its memory. In the jail each child (a
grading child, a notebook kernel) starts in a user namespace and a session keyring of its own
(`_own_namespaces`, `_own_keyrings`): the keys a learner leaves (in @u, @us, @s, the persistent
keyring) go with the learner's last process, and no other learner can reach them meanwhile; the
IPC objects a learner leaves (System V, POSIX message queues) the reset removes.
"""

from __future__ import annotations

import ctypes
import gc
import importlib
import json
import os
import resource
import select
import signal
import socket
import sys
import threading

PR_SET_PDEATHSIG = 1


def _die_with(parent: int) -> None:
    """Die (SIGKILL) when process `parent` does, even if it is killed; exit now if it is gone."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:
        os._exit(3)


def _exit_when_grader_goes(fd: int, done: threading.Event) -> None:
    """While the server starts (imports torch: seconds), exit as soon as the grader's end of the
    control socket closes (the main loop sees that itself). The grader may die before bubblewrap
    has tied the jail to it (--die-with-parent takes effect only once the jail is set up)."""
    watch = select.poll()
    watch.register(fd, 0)  # only hang-up and errors
    while not done.is_set():
        if watch.poll(50):
            os._exit(0)


if os.environ.get("AUTOGRADER_GRADER_PID"):  # --no-jail (in the jail, bwrap --die-with-parent)
    _die_with(int(os.environ.pop("AUTOGRADER_GRADER_PID")))
_started = threading.Event()
_watcher = threading.Thread(target=_exit_when_grader_goes, args=(int(sys.argv[1]), _started),
                            daemon=True) if __name__ == "__main__" else None
if _watcher:
    _watcher.start()

import matplotlib  # noqa: E402

matplotlib.use("Agg")  # setup cells import pyplot: load it once here, headless
import matplotlib.pyplot  # noqa: E402,F401
import torch  # noqa: E402

from autograder.jail.inside import child  # noqa: E402
from autograder.jail.inside.reset import SCRATCH, _reset, _reset_children, _status  # noqa: E402

torch.set_num_threads(1)
child.warm_up()
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36


def _import(modules) -> None:
    """Import lazy imports every child would pay again, once; then freeze what the server holds
    (the children's garbage collections skip those objects, so they neither scan nor copy them)."""
    for name in modules:
        if name not in sys.modules:
            try:
                importlib.import_module(name)
            except ImportError:  # not in this version of torch or ipykernel: whoever needs it
                pass             # imports it, or fails, as without the server
    gc.freeze()


def _become_subreaper() -> None:
    """Orphans of the learner's processes (a daemon's parent exits) become our children."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # then bwrap's init reaps them, and _reset waits for /proc to show them gone


def _not_dumpable() -> None:
    """Learner processes run as the server's uid: without this they could ptrace the server,
    or read and write its memory through /proc/PID/mem, and so reach every child it forks for
    later learners. A process that is not dumpable can be traced only with CAP_SYS_PTRACE,
    which nothing in the jail has; children inherit the flag across fork (a learner may set it
    back on its own process, never on ours)."""
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")


_LIBC = ctypes.CDLL(None, use_errno=True)
_PRCTL, _UNSHARE, _SYSCALL = _LIBC.prctl, _LIBC.unshare, _LIBC.syscall
"""Looked up once, in the server: each object a new child first touches costs it a copy."""
_SYSCALL.restype = ctypes.c_long
_ID_MAPS = tuple((f"/proc/self/{name}", line.encode()) for name, line in (
    ("setgroups", "deny"), ("uid_map", f"{os.getuid()} {os.getuid()} 1"),
    ("gid_map", f"{os.getgid()} {os.getgid()} 1")))
"""The maps that map the jail's uid and gid (the server's, the child's) to themselves."""


def _first_to_go(processes: int | None) -> bool:
    """Offer this new process first to the OOM killer (the jail's cgroup full: a learner's
    process goes, not the server that forks the next learner's), and give it a user namespace
    of its own (`_own_namespaces`); whether it has one. Raising one's own score needs no privilege,
    and writing one's own uid map none beyond the new namespace's, but the files are root's while
    the process is not dumpable: it is made dumpable for the writes, before any learner code runs
    here (and after the reset that killed every other learner process, so nothing can trace it
    meanwhile)."""
    prctl = _PRCTL
    try:
        prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)
        try:
            with open("/proc/self/oom_score_adj", "w") as adj:
                adj.write("1000")
        except OSError:
            pass
        return _own_namespaces(processes)
    finally:
        if prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
            os._exit(3)


CLONE_NEWUSER = 0x10000000
NAMESPACES = os.environ.get("AUTOGRADER_CHILD_NAMESPACES", "1") != "0"
"""Whether children get a user namespace of their own (AUTOGRADER_CHILD_NAMESPACES=0 in the
grader's environment: not, as where the host forbids them; then `_own_keyrings` shuts the uid's
keyrings instead)."""


def _own_namespaces(processes: int | None) -> bool:
    """Move this new process into a user namespace of its own (no privilege needed: an
    unprivileged process may, where the host lets it), its uid and gid mapped to themselves (the
    learner sees the jail's uid, and the files, queues and segments it makes are the jail uid's,
    as before). The uid's keyrings (@u, @us, the persistent keyring) are then the namespace's own:
    the kernel drops them and their keys when the learner's last process goes (at the latest at
    the reset), and no other learner can name them (/proc/keys is hidden: jailer.HIDDEN).
    Capabilities in the new namespace reach nothing outside it: not the server (its memory's
    namespace is the jail's), nor a file, a limit, the jail's IPC objects (which stay in the
    jail's IPC namespace: the reset removes them at once, their memory with them; a namespace's
    would go only once the kernel frees it, after the next learner has started) or another
    learner's process.

    The child's limit on processes (`processes`, as child.bound sets it) is set first: a
    namespace keeps its creator's limit as the bound on the uid's processes in the whole jail,
    which is what the limit meant before. False where the host refuses namespaces."""
    if not NAMESPACES:
        return False
    if processes:
        try:
            _, hard = resource.getrlimit(resource.RLIMIT_NPROC)
            resource.setrlimit(resource.RLIMIT_NPROC, (min(processes, hard), hard))
        except (OSError, ValueError):
            pass
    if _UNSHARE(CLONE_NEWUSER) != 0:
        return False
    try:
        for name, line in _ID_MAPS:
            fd = os.open(name, os.O_WRONLY)
            try:
                os.write(fd, line)
            finally:
                os.close(fd)
    except OSError:
        pass  # still alone, though seen as the overflow uid
    return True


SYS_KEYCTL = {"x86_64": 250, "aarch64": 219, "riscv64": 219, "s390x": 280}.get(os.uname().machine)
KEYCTL_JOIN_SESSION_KEYRING, KEYCTL_SETPERM, KEYCTL_CLEAR, KEYCTL_GET_PERSISTENT = 1, 5, 7, 22
KEY_SPEC_SESSION_KEYRING, KEY_SPEC_USER_KEYRING, KEY_SPEC_USER_SESSION_KEYRING = -3, -4, -5
_own_session = False
"""Whether the server joined a session keyring of its own (`main`), which a child may shut."""


def _keyctl(*args: int | None) -> int:
    """keyctl(2) (no keyutils library in the jail); -1 where it fails or is unknown here."""
    if SYS_KEYCTL is None:
        return -1
    return _SYSCALL(SYS_KEYCTL, *[ctypes.c_long(a) if a is not None else None for a in args])


def _own_keyrings(alone: bool) -> None:
    """Give this new process a new, empty session keyring (@s): the server's, which every child
    would inherit, is no learner's to fill or read. If that fails (the uid's key quota full) the
    inherited one, if it is the server's own (`main`: never the grader's), is shut for good: no
    permission left to anyone.
    Without a user namespace of its own (`alone` False) the uid's keyrings are the jail's, shared by
    every learner: before any learner code, @u and @us are shut (the first child shuts them for
    every later one) and the persistent keyring, whose permissions no one may change, emptied."""
    if _keyctl(KEYCTL_JOIN_SESSION_KEYRING, None) < 0 and _own_session:
        _keyctl(KEYCTL_SETPERM, KEY_SPEC_SESSION_KEYRING, 0)
    if not alone:
        for ring in (KEY_SPEC_USER_KEYRING, KEY_SPEC_USER_SESSION_KEYRING):
            _keyctl(KEYCTL_SETPERM, ring, 0)
        persistent = _keyctl(KEYCTL_GET_PERSISTENT, -1, KEY_SPEC_SESSION_KEYRING)
        if persistent > 0:
            _keyctl(KEYCTL_CLEAR, persistent)


def _fork(control: socket.socket, jailed: bool, run, processes: int | None = None) -> int:
    """Fork a process, in a session of its own (in the jail: a user namespace and keyrings of its
    own too), that runs `run()` and never comes back to the server's loop; return its pid.
    `processes`: the limit on processes `run` sets (see `_own_namespaces`)."""
    server = os.getpid()
    pid = os.fork()
    if pid == 0:
        control.close()
        os.setsid()
        if jailed:
            _own_keyrings(_first_to_go(processes))
        if not jailed:  # in the jail, the PID namespace ends with the server
            _die_with(server)
        try:
            run()
        finally:
            os._exit(3)
    return pid


def main(fd: int) -> None:
    global _own_session
    control = socket.socket(fileno=fd)
    jailed = bool(SCRATCH)
    if jailed:
        _not_dumpable()
        _become_subreaper()
        # A session keyring of the server's own, not the grader's (which the jail inherited):
        # the one a child keeps if it cannot have one of its own (`_own_keyrings`).
        _own_session = _keyctl(KEYCTL_JOIN_SESSION_KEYRING, None) >= 0
    while True:
        try:
            message, fds, _, _ = socket.recv_fds(control, 1 << 16, 1)
        except OSError:
            os._exit(0)
        if not message:
            os._exit(0)  # the grader is gone
        request = json.loads(message)
        op = request.get("op")
        if op == "spawn":
            _import(request.get("warm", []))
            limits = request["limits"]
            pid = _fork(control, jailed, lambda: child.main(fds[0], limits),
                        limits.get("processes") if isinstance(limits, dict) else None)
            for f in fds:
                os.close(f)
            reply = {"pid": pid}
        elif op == "kernel":
            from autograder.jail.inside import notebook_kernel
            _import(notebook_kernel.WARM + tuple(request.get("warm", [])))
            argv = [str(a) for a in request.get("argv", [])]
            reply = {"pid": _fork(control, jailed, lambda: notebook_kernel.forked(argv),
                                  notebook_kernel.PROCESSES)}
        elif op == "signal":
            try:
                os.kill(int(request["pid"]), int(request["signum"]))
                reply = {"done": True}
            except (OSError, ValueError, KeyError) as error:
                reply = {"error": str(error)}
        elif op == "reap":
            reply = {"status": _status(int(request["pid"]), float(request.get("wait", 1.0)))}
        elif op == "reset":
            if jailed:
                _reset()
            else:  # not jailed: kill only our own children, never the operator's processes
                _reset_children()
            reply = {"done": True}
        else:
            reply = {"error": f"unknown op {op!r}"}
        control.send(json.dumps(reply).encode())


if __name__ == "__main__":
    _import(sys.argv[2:])  # an assignment's `warm` modules, while the grader starts too
    _started.set()
    _watcher.join()  # no other thread when the first child is forked
    main(int(sys.argv[1]))

"""The jailed fork server: `python -m autograder.jail.server FD [MODULE ...]`.

Started by the grader inside the jail (or, with `--no-jail`, as a plain
subprocess). It imports torch (and the MODULEs) once, then serves requests on the control
socket FD (one JSON message per datagram):

* `{"op": "spawn", "limits": {...}, "warm": [module, ...]}` with a socket attached:
  import the `warm` modules here (once; the grader names them), then fork a `child`
  that talks to the grader over that socket; reply `{"pid": ...}`;
* `{"op": "reap", "pid": p}`: how child p ended (waits up to a second);
* `{"op": "reset"}`: kill every process of the jail but this one, empty the
  scratch directory; reply `{"done": true}` once nothing is left;
* `{"op": "kernel", "argv": [...], "warm": [module, ...]}`: import the `warm` modules (the
  notebook's lazy imports) once, then fork the learner's notebook kernel (nbgrader's feedback
  run: `notebook_kernel.forked`, ipykernel with a grading child's limits) on the connection
  file that argv names, in AUTOGRADER_KERNELS (bound into the jail); reply `{"pid": ...}`;
* `{"op": "signal", "pid": p, "signum": n}`: signal a child (a kernel's interrupt or kill);
  `{"op": "reap", "pid": p, "wait": 0}` polls without waiting.

The server never receives learner code (the child does, over its own
socket), so no child inherits another learner's cells in its memory.
"""

from __future__ import annotations

import ctypes
import gc
import importlib
import json
import os
import select
import shutil
import signal
import socket
import stat
import sys
import threading
import time

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

from autograder.jail import child  # noqa: E402

torch.set_num_threads(1)
child.warm_up()
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
SCRATCH = os.environ.get("AUTOGRADER_SCRATCH", "")
"""The learner's writable directory, emptied between children ("" when not jailed)."""
KERNELS = os.environ.get("AUTOGRADER_KERNELS", "")
"""The folder of the kernels' socket folders (bound into the jail; never emptied here)."""


def _status(pid: int, wait: float) -> str:
    deadline = time.monotonic() + wait
    while True:
        try:
            done, code = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return "gone"
        if done:
            if os.WIFSIGNALED(code):
                return f"signal {signal.Signals(os.WTERMSIG(code)).name}"
            return f"exit {os.WEXITSTATUS(code)}"
        if time.monotonic() > deadline:
            return "running"
        time.sleep(0.01)


def _others() -> list[int]:
    me = os.getpid()
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, me)]


def _reset() -> None:
    """Kill what the learner left behind (children, their children, daemons) and reap it.

    One kill(-1) reaches every process of the jail's uid at once (a process that forks while
    it is killed gets no child), and as a subreaper the server inherits every orphan, so
    waiting for its own children waits for all of them; /proc is the check.
    """
    for _ in range(200):
        try:
            os.kill(-1, signal.SIGKILL)  # everything this uid may signal here, but this process
        except ProcessLookupError:
            pass
        while True:  # the killed processes are all ours (a subreaper's), so no wait is long
            try:
                os.waitpid(-1, 0)
            except ChildProcessError:
                break
        # Processes of another uid (or in another PID namespace) are not the learner's:
        # outside the jail the grader's own process may be visible here.
        left = [p for p in _others() if _same_uid(p)]
        if not left:
            break
        time.sleep(0.005)
    _remove_ipc()
    if SCRATCH:
        _empty(SCRATCH)
        if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
            _empty("/dev/shm")  # POSIX shared memory: files of the jail's own /dev


IPC_RMID = 0


def _remove_ipc() -> None:
    """Remove every System V shared-memory segment, message queue and semaphore set of the
    jail's IPC namespace (the jail has its own: none is the host's). A segment outlives the
    processes that made it, and holds its memory until removed: one learner's must not be
    there for the next. Run once nothing of the learner is alive, so nothing stays attached."""
    libc = ctypes.CDLL(None, use_errno=True)
    for kind, remove in (("shm", lambda i: libc.shmctl(i, IPC_RMID, None)),
                         ("msg", lambda i: libc.msgctl(i, IPC_RMID, None)),
                         ("sem", lambda i: libc.semctl(i, 0, IPC_RMID))):
        try:
            with open(f"/proc/sysvipc/{kind}") as table:
                ids = [int(line.split()[1]) for line in table.readlines()[1:] if line.strip()]
        except (OSError, ValueError, IndexError):
            continue
        for ipc_id in ids:
            remove(ipc_id)


def _same_uid(pid: int) -> bool:
    """Whether `pid` runs as the jail's uid (read from its status: the owner of /proc/PID is
    root for a process that is not dumpable, as the server and its children are)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            real = next(line.split()[1] for line in status if line.startswith("Uid:"))
        return int(real) == os.getuid() and os.getpid() != pid
    except (OSError, StopIteration, ValueError, IndexError):
        return False


def _empty(folder: str) -> None:
    def unlock(function, path, _):
        os.chmod(os.path.dirname(path), stat.S_IRWXU)
        try:
            os.chmod(path, stat.S_IRWXU)
        except OSError:
            pass
        function(path)

    for name in os.listdir(folder):
        path = os.path.join(folder, name)
        if KERNELS and os.path.abspath(path) == os.path.abspath(KERNELS):
            continue  # a mount of the grader's (its socket folders are the grader's to remove)
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, onerror=unlock)
            else:
                os.unlink(path)
        except OSError:
            pass


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


def _first_to_go() -> None:
    """Offer this new process first to the OOM killer (the jail's cgroup full: a learner's
    process goes, not the server that forks the next learner's). Raising one's own score needs
    no privilege, but the file is root's while the process is not dumpable: it is made dumpable
    for the write, before any learner code runs here (and after the reset that killed every
    other learner process, so nothing can trace it meanwhile)."""
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    try:
        prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)
        with open("/proc/self/oom_score_adj", "w") as adj:
            adj.write("1000")
    except OSError:
        pass
    finally:
        if prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
            os._exit(3)


def _fork(control: socket.socket, jailed: bool, run) -> int:
    """Fork a process, in a session of its own, that runs `run()` and never comes back to the
    server's loop; return its pid."""
    server = os.getpid()
    pid = os.fork()
    if pid == 0:
        control.close()
        os.setsid()
        if jailed:
            _first_to_go()
        if not jailed:  # in the jail, the PID namespace ends with the server
            _die_with(server)
        try:
            run()
        finally:
            os._exit(3)
    return pid


def main(fd: int) -> None:
    control = socket.socket(fileno=fd)
    jailed = bool(SCRATCH)
    if jailed:
        _not_dumpable()
        _become_subreaper()
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
            pid = _fork(control, jailed, lambda: child.main(fds[0], request["limits"]))
            for f in fds:
                os.close(f)
            reply = {"pid": pid}
        elif op == "kernel":
            from autograder.jail import notebook_kernel
            _import(notebook_kernel.WARM + tuple(request.get("warm", [])))
            argv = [str(a) for a in request.get("argv", [])]
            reply = {"pid": _fork(control, jailed, lambda: notebook_kernel.forked(argv))}
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


def _reset_children() -> None:
    for pid in _children():
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
        _status(pid, 1.0)


def _children() -> list[int]:
    me = str(os.getpid())
    out = []
    for p in _others():
        try:
            with open(f"/proc/{p}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[1] == me:
                    out.append(p)
        except OSError:
            continue
    return out


if __name__ == "__main__":
    _import(sys.argv[2:])  # an assignment's `warm` modules, while the grader starts too
    _started.set()
    _watcher.join()  # no other thread when the first child is forked
    main(int(sys.argv[1]))

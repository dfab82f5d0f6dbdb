"""What the jailed server clears between learners: every process the last one left (`_reset`:
one kill of the jail's uid, reaped as a subreaper), the IPC objects they made (System V,
POSIX message queues), the scratch directory and /dev/shm; outside the jail, only the server's
own children (`_reset_children`). How a child ended (`_status`)."""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import stat
import time

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
    _remove_queues()
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


MQUEUE = "/dev/mqueue"


def _remove_queues() -> None:
    """Remove every POSIX message queue of the jail's IPC namespace (its mqueue file system is
    mounted at MQUEUE by jailer.bwrap_command): a queue, like a System V object, outlives the
    processes that made it, with the messages in it. The queues are the jail uid's, as is the
    server: no permission is needed but ours."""
    try:
        names = os.listdir(MQUEUE)
    except OSError:
        return
    for name in names:
        try:
            os.unlink(os.path.join(MQUEUE, name))
        except OSError:
            pass


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

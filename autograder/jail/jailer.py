"""The jail learner code runs in: bubblewrap around the fork server, seen from the grader.

One jailed server per grader process (a batch worker, nbgrader's autograde)
imports torch once; `Sandbox` asks it for one child per submission and graded
function. The jail (bubblewrap, `bwrap`):

* runs as an unprivileged uid (root operators: a uid of its own per server,
  so process limits and signals never reach another server's learners);
* has no network (`--unshare-net`), its own PID namespace (`--unshare-pid`:
  when the server goes, everything the learner started goes with it, and
  `--die-with-parent` ties the jail to the grader), its own IPC and UTS; inside it each
  child the server forks has a user namespace and a session keyring of its own, and
  /proc/keys is hidden: no learner can reach another's keys (`autograder/jail/inside/server.py`);
* sees the filesystem read-only and only what torch needs: the system's
  libraries, the Python installation and its environment, and the learner's
  side of the running package (`autograder/jail/inside/`, imported from there whatever
  the venv's install of the package points at): never the hidden tests, the
  course, `submitted/` or the output folder;
* writes only to a private, size-limited scratch directory (`/tmp`, a tmpfs
  emptied between children);
* holds at most `cgroup.JAIL_MEMORY` of memory in all, shared memory included, where the host
  lets the grader make a cgroup (`autograder/jail/cgroup.py`; `Jail.memory` is None where not).

Where no jail can be built the grader refuses (`JailUnavailable`, one line
saying what to install) unless the operator passes `--no-jail`.
"""

from __future__ import annotations

import atexit
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import threading
from multiprocessing.connection import Connection
from pathlib import Path

import autograder
from autograder.jail.cgroup import MemoryGroup, limit as memory_limit
from autograder.timing import timed

PACKAGE = Path(autograder.__file__).resolve().parent
SCRATCH = "/tmp"
SCRATCH_BYTES = 64 << 20
SERVER_START = 120.0
"""Seconds the server may take to import torch (a cold disk on a loaded machine)."""
REQUEST_TIMEOUT = 10.0
THP = "/sys/kernel/mm/transparent_hugepage"
MQUEUE = "/dev/mqueue"
"""Where the jail's POSIX message queues are seen, so that the reset can remove them."""
HIDDEN = ("/proc/keys", "/proc/key-users")
"""Every key and keyring the jail's uid may view, whoever made it (a learner whose keys await the
kernel's collection, the grader's user outside a root jail): no learner's business."""
MALLOC = {"GLIBC_TUNABLES": "glibc.malloc.hugetlb=1"}
"""The server's allocator puts its heap in transparent huge pages (where the kernel offers them
on request): torch's 90 MB of heap then costs a fork 170 page-table entries instead of 45,000,
which halves what every child costs to fork and to tear down (8 -> 4 ms). A no-op elsewhere."""


class JailUnavailable(RuntimeError):
    """No jail can be built on this machine; the message says what to install."""


def _system_binds() -> list[str]:
    args = []
    for top in ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin"):
        path = Path(top)
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), top]
        elif path.is_dir():
            args += ["--ro-bind", top, top]
    for name in ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/localtime"):
        if Path(name).exists():
            args += ["--ro-bind", name, name]
    if Path(THP).is_dir():  # glibc reads the huge-page settings before it asks for them (MALLOC)
        args += _mkdirs([Path(THP)]) + ["--ro-bind", THP, THP]
    return args


def _mkdirs(paths: list[Path]) -> list[str]:
    """World-readable parent directories for bind targets (bwrap would make them 0700)."""
    args, made = [], {Path("/"), Path("/usr"), Path("/tmp")}
    for path in paths:
        for parent in reversed(path.parents):
            if parent not in made:
                made.add(parent)
                args += ["--perms", "0755", "--dir", str(parent)]
    return args


def bwrap_command(uid: int, root: bool, program: list[str] | None = None,
                  writable: tuple[str, ...] = (), env: dict[str, str] | None = None) -> list[str]:
    """The bubblewrap command line that runs `program` (default: the server) in the jail.

    `writable` folders are bound read-write at their own path (a kernel's socket folder, or
    the folder of the socket folders of the kernels the server forks); `env`: more variables.
    """
    prefixes = sorted({Path(sys.base_prefix).resolve(), Path(sys.prefix).absolute()})
    package_binds = [PACKAGE / "__init__.py", PACKAGE / "jail" / "__init__.py",
                     PACKAGE / "jail" / "inside"]
    command = ["bwrap", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
               "--unshare-cgroup-try", "--die-with-parent", "--new-session"]
    command += _system_binds()
    # The scratch tmpfs first: a course or venv may itself lie under /tmp (a CI clone), and a
    # later mount hides everything an earlier one put beneath it.
    command += ["--proc", "/proc", "--dev", "/dev",
                "--size", str(SCRATCH_BYTES), "--perms", "1777", "--tmpfs", SCRATCH]
    if Path("/proc/sys/fs/mqueue").is_dir():  # the kernel has POSIX message queues
        command += ["--mqueue", MQUEUE]
    for name in HIDDEN:  # the host's /dev/null on a nodev mount: not even readable
        if Path(name).exists():
            command += ["--ro-bind", "/dev/null", name]
    command += _mkdirs(prefixes + [PACKAGE])
    for prefix in prefixes:
        command += ["--ro-bind", str(prefix), str(prefix)]
    # The package may lie inside a bound environment (a non-editable install): hide the
    # rest of it (the hidden tests) under an empty tmpfs, then show only the learner's side.
    command += ["--tmpfs", str(PACKAGE), "--perms", "0755", "--dir", str(PACKAGE / "jail")]
    for path in package_binds:
        command += ["--ro-bind", str(path), str(path)]
    command += ["--remount-ro", str(PACKAGE)]
    command += _mkdirs([Path(w) for w in writable])
    for folder in writable:
        command += ["--bind", folder, folder]
    command += [
                "--chdir", SCRATCH, "--clearenv",
                "--setenv", "HOME", SCRATCH, "--setenv", "MPLCONFIGDIR", f"{SCRATCH}/.matplotlib",
                "--setenv", "AUTOGRADER_SCRATCH", SCRATCH, "--setenv", "PYTHONDONTWRITEBYTECODE", "1",
                # the running package's own files (bound above), whatever the environment's
                # install of `autograder` points at (another checkout sharing the venv)
                "--setenv", "PYTHONPATH", str(PACKAGE.parent),
                "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "OMP_NUM_THREADS", "1"]
    if os.environ.get("AUTOGRADER_CHILD_NAMESPACES") == "0":  # (autograder/jail/inside/server.py)
        command += ["--setenv", "AUTOGRADER_CHILD_NAMESPACES", "0"]
    for name, value in {**MALLOC, **(env or {})}.items():
        command += ["--setenv", name, value]
    if root:
        # bwrap run by root keeps no capabilities but these two, which setpriv spends at
        # once to become the unprivileged uid; no-new-privileges makes setuid files inert.
        command += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--",
                    shutil.which("setpriv") or "/usr/bin/setpriv", f"--reuid={uid}",
                    f"--regid={uid}", "--clear-groups", "--inh-caps=-all"]
    else:
        command[1:1] = ["--unshare-user", "--uid", str(uid), "--gid", str(uid)]
        command += ["--"]
    return command + (program or [sys.executable, "-m", "autograder.jail.inside.server"])


_checked: str | None = None


def check() -> None:
    """Raise JailUnavailable unless bubblewrap can build the jail here (checked once)."""
    global _checked
    if _checked is None:
        _checked = _probe()
    if _checked:
        raise JailUnavailable(_checked)


def _probe() -> str:
    if not sys.platform.startswith("linux"):
        return f"learner code needs a Linux jail (bubblewrap); this is {sys.platform}: pass --no-jail to grade without one"
    if shutil.which("bwrap") is None:
        return ("bubblewrap is not installed: install it (Debian/Ubuntu: apt-get install bubblewrap) "
                "or pass --no-jail to grade without a jail")
    if os.geteuid() == 0 and shutil.which("setpriv") is None:
        return "setpriv (util-linux) is missing: install util-linux or pass --no-jail"
    probe = bwrap_command(uid(), os.geteuid() == 0, [sys.executable, "-c", "import encodings"])
    try:
        done = subprocess.run(probe, capture_output=True, text=True, timeout=SERVER_START)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"bubblewrap could not start a jail ({error}); pass --no-jail to grade without one"
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        return (f"bubblewrap could not build the jail ({last}): namespaces may be disabled "
                "(sysctl kernel.unprivileged_userns_clone=1) - or pass --no-jail")
    return ""


def uid() -> int:
    if os.geteuid() != 0:
        return 65534
    return 200000 + os.getpid() % 100000  # a uid of its own: no other process shares its limits


KERNELS_PREFIX = "autograder-kernels-"
"""The kernels' socket folder: KERNELS_PREFIX, the grader's pid, "-", a random part."""


def _remove_orphaned_kernel_folders() -> None:
    """Remove the kernels' folders (with their connection files) of graders that are gone: one
    killed (kill -9) runs no clean-up of its own. Only folders this user owns, named after a pid
    no process has now."""
    root = Path(tempfile.gettempdir())
    for path in root.glob(f"{KERNELS_PREFIX}*-*"):
        pid = path.name[len(KERNELS_PREFIX):].partition("-")[0]
        try:
            found = path.lstat()
            if not pid.isdigit() or found.st_uid != os.geteuid() or not stat.S_ISDIR(found.st_mode):
                continue
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(path, ignore_errors=True)
        except OSError:  # alive (another user's process), or unreadable: left alone
            continue


class Jail:
    """One jailed fork server (started lazily, restarted when it dies)."""

    def __init__(self, jailed: bool = True):
        self.jailed = jailed
        self._process: subprocess.Popen | None = None
        self._control: socket.socket | None = None
        self._fresh = False
        self._lock = threading.Lock()
        self._kernels: str | None = None
        self.memory: MemoryGroup | None = None
        """The cgroup that limits the running jail's memory (None: the host offers none)."""

    def start(self, warm: tuple[str, ...] = ()) -> None:
        """Start the server now (it imports torch, and `warm`, while the grader imports torch)."""
        if self._process is not None and self._process.poll() is None:
            return
        self.stop()
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        fd = str(theirs.fileno())
        if self.jailed:
            check()
            kernels = (self._kernels,) if self._kernels else ()
            command = bwrap_command(uid(), os.geteuid() == 0, writable=kernels,
                                    env={"AUTOGRADER_KERNELS": k for k in kernels}) + [fd, *warm]
            env = None
            self.memory = MemoryGroup.create(memory_limit())
            if self.memory is not None:
                command = self.memory.wrap(command)
        else:
            command = [sys.executable, "-m", "autograder.jail.inside.server", fd, *warm]
            env = {**os.environ, **MALLOC, "AUTOGRADER_SCRATCH": "", "PYTHONPATH": str(PACKAGE.parent),
                   "AUTOGRADER_GRADER_PID": str(os.getpid())}  # it dies with this process
        debug = os.environ.get("AUTOGRADER_DEBUG") == "1"
        self._process = subprocess.Popen(
            command, pass_fds=[theirs.fileno()], env=env, stdin=subprocess.DEVNULL,
            stdout=None if debug else subprocess.DEVNULL, stderr=None if debug else subprocess.DEVNULL)
        theirs.close()
        self._control = mine
        self._fresh = True

    def stop(self) -> None:
        """Kill the server and, with it, everything in its jail."""
        if self._control is not None:
            self._control.close()
            self._control = None
        if self._process is not None:
            if self._process.poll() is None:
                self._process.kill()
            try:
                self._process.wait(5)
            except subprocess.TimeoutExpired:
                pass
            self._process = None
        if self.memory is not None:
            self.memory.remove()
            self.memory = None

    def _request(self, message: dict, fds=(), timeout: float = REQUEST_TIMEOUT) -> dict | None:
        import json
        self.start()
        if self._fresh:
            timeout, self._fresh = max(timeout, SERVER_START), False
        try:
            socket.send_fds(self._control, [json.dumps(message).encode()], list(fds))
            self._control.settimeout(timeout)
            raw = self._control.recv(1 << 16)
            return json.loads(raw) if raw else None
        except (OSError, ValueError):
            return None

    @timed("jail: fork a child (the first waits for the server's start)")
    def spawn(self, limits: dict, warm: tuple[str, ...] = ()) -> tuple[Connection, int] | None:
        """A fresh child, connected to a new socket; None if the server could not make one.

        `warm` names modules the server imports first (once), so children do not each pay
        for a lazy import (torch.optim's step imports torch._dynamo, about 1.2 s).
        """
        with self._lock:
            for _ in range(2):  # a dead server is restarted once
                mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
                reply = self._request({"op": "spawn", "limits": limits, "warm": list(warm)},
                                      [theirs.fileno()])
                theirs.close()
                if reply and isinstance(reply.get("pid"), int):
                    return Connection(mine.detach()), reply["pid"]
                mine.close()
                self.stop()
            return None

    def status(self, pid: int, wait: float = 1.0) -> str:
        """How child `pid` ended ("signal SIGKILL", "exit 3", "running", ...), waiting up to
        `wait` seconds for it to end."""
        with self._lock:
            reply = self._request({"op": "reap", "pid": pid, "wait": wait})
        return str(reply.get("status")) if reply else "unknown"

    def kernel_folder(self) -> str:
        """A folder bound into the jail at its own path, for the socket folders of the notebook
        kernels the server forks (made once; a server started without it is restarted)."""
        if self._kernels is None:
            _remove_orphaned_kernel_folders()
            self._kernels = tempfile.mkdtemp(prefix=f"{KERNELS_PREFIX}{os.getpid()}-")
            os.chmod(self._kernels, 0o755)  # the jail's uid reaches only its kernel's folder
            atexit.register(self.close)
            self.stop()
        return self._kernels

    def kernel(self, argv: list[str], warm: tuple[str, ...] = ()) -> int | None:
        """Fork a notebook kernel in the jail (autograder/jail/inside/notebook_kernel.py `forked`) on the
        connection file argv names, in kernel_folder(), once the server has imported the `warm`
        modules; its pid in the jail, None on failure."""
        with self._lock:
            reply = self._request({"op": "kernel", "argv": argv, "warm": list(warm)},
                                  timeout=SERVER_START)
        return reply["pid"] if reply and isinstance(reply.get("pid"), int) else None

    def signal(self, pid: int, signum: int) -> None:
        """Send a signal to a process the server forked."""
        with self._lock:
            self._request({"op": "signal", "pid": pid, "signum": int(signum)})

    def close(self) -> None:
        """Stop the server and remove the kernels' folder."""
        self.stop()
        if self._kernels:
            shutil.rmtree(self._kernels, ignore_errors=True)
            self._kernels = None

    @timed("jail: reset (kill, remove IPC, empty /tmp)")
    def reset(self) -> None:
        """Kill every learner process and empty the scratch directory (or restart the jail)."""
        with self._lock:
            if self._process is None:
                return
            reply = self._request({"op": "reset"})
            if not reply or not reply.get("done"):
                self.stop()  # the server hangs or is gone: the next request starts a new jail


_jail: Jail | None = None
_jailed = True


def configure(jailed: bool) -> None:
    """Choose jail or `--no-jail` for this process (before the first submission)."""
    global _jailed, _jail
    if _jail is not None and _jail.jailed != jailed:
        _jail.stop()
        _jail = None
    _jailed = jailed
    os.environ["AUTOGRADER_NO_JAIL"] = "" if jailed else "1"  # inherited by batch workers


def jail() -> Jail:
    """This process's jail (created on first use)."""
    global _jail
    if _jail is None:
        _jail = Jail(jailed=_jailed and os.environ.get("AUTOGRADER_NO_JAIL") != "1")
    return _jail


def close() -> None:
    """Stop this process's jailed server, if it has one, and remove what it made."""
    if _jail is not None:
        _jail.close()


def warm_up(warm: tuple[str, ...] = ()) -> None:
    """Start this process's jailed server now (a batch worker's initializer), importing `warm`."""
    jail().start(warm)

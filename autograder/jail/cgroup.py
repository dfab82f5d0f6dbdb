"""A memory limit on the whole jail: a cgroup of its own, where the host lets the grader make one.

The per-child limits (`sandbox.LIMITS`) bound what one process maps at once. Memory that
outlives a mapping does not count there: a System V segment after `shmdt`, files in a tmpfs.
A cgroup's memory controller charges those pages to the cgroup whose process touched them
first, so every page the jail holds (the server, its children, the learner's kernel, shared
memory, the scratch tmpfs) counts against one limit: past it the kernel's OOM killer stops a
learner process (children offer themselves first, `jail/server.py`), never the host.

The grader makes a child of its own cgroup (cgroup v1's memory hierarchy or a v2 cgroup with
the memory controller), sets the limit and starts bubblewrap in it. Where it cannot (a non-root
grader without a delegated cgroup, a read-only /sys/fs/cgroup) the jail runs without one and
`MemoryGroup.create` says why; the per-child limits and the reset between notebooks (which
removes every IPC object and empties the tmpfs) then hold.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

JAIL_MEMORY = 4 << 30
"""Bytes of memory one jail may hold: the server (torch imported, about 0.4 GB), one grading
child (2 GB of address space on top of torch's), the learner's kernel under nbgrader, and
whatever they leave in shared memory or the scratch tmpfs. Override: AUTOGRADER_JAIL_MEMORY
(bytes)."""
PREFIX = "autograder-jail-"


def limit() -> int:
    wanted = os.environ.get("AUTOGRADER_JAIL_MEMORY", "").strip()
    return int(wanted) if wanted.isdigit() and int(wanted) > 0 else JAIL_MEMORY


def _mounts() -> list[tuple[str, str, str, str]]:
    """(root in the hierarchy, mount point, filesystem type, super options) of cgroup mounts."""
    found = []
    try:
        with open("/proc/self/mountinfo") as table:
            for line in table:
                fields = line.split()
                rest = fields[fields.index("-") + 1:]
                if rest[0] in ("cgroup", "cgroup2"):
                    found.append((fields[3], fields[4], rest[0], rest[2] if len(rest) > 2 else ""))
    except (OSError, ValueError, IndexError):
        pass
    return found


def _own() -> dict[str, str]:
    """This process's cgroup per hierarchy: {"memory": "/a/b", "": "/c"} ("" is cgroup v2)."""
    own = {}
    try:
        with open("/proc/self/cgroup") as table:
            for line in table:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                for name in controllers.split(",") if controllers else [""]:
                    own[name] = path
    except (OSError, ValueError):
        pass
    return own


def _where(path: str, root: str, mount: str) -> Path | None:
    relative = os.path.relpath(path, root) if root != "/" else path.lstrip("/")
    return None if relative.startswith("..") else Path(mount) / relative


def _parents() -> list[tuple[Path, int]]:
    """Folders under which a memory cgroup could be made: (folder, cgroup version)."""
    own, found = _own(), []
    for root, mount, kind, options in _mounts():
        if kind == "cgroup" and "memory" in options.split(",") and "memory" in own:
            folder = _where(own["memory"], root, mount)
            if folder is not None:
                found.append((folder, 1))
        elif kind == "cgroup2" and "" in own:
            folder = _where(own[""], root, mount)
            try:
                if folder is not None and "memory" in (folder / "cgroup.controllers").read_text().split():
                    found.append((folder, 2))
            except OSError:
                pass
    return found


def _write(path: Path, value: str) -> bool:
    try:
        path.write_text(value)
        return True
    except OSError:
        return False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


class MemoryGroup:
    """A cgroup with a memory limit, made for one jail; `wrap` starts a command in it."""

    _made = 0
    why_not = ""
    """Why the last `create` gave no group ("" when it gave one)."""

    def __init__(self, folder: Path, version: int):
        self.folder = folder
        self.version = version

    @classmethod
    def create(cls, memory: int) -> "MemoryGroup | None":
        parents = _parents()
        if not parents:
            cls.why_not = "this host offers no memory cgroup to this process"
            return None
        errors = []
        for parent, version in parents:
            _remove_stale(parent)
            cls._made += 1
            folder = parent / f"{PREFIX}{os.getpid()}-{cls._made}"
            try:
                folder.mkdir()
            except OSError as error:
                errors.append(f"{parent}: {error.strerror}")
                continue
            group = cls(folder, version)
            if group._limit(memory):
                cls.why_not = ""
                return group
            errors.append(f"{parent}: the memory limit cannot be set there")
            group.remove()
        cls.why_not = "; ".join(errors)
        return None

    def _limit(self, memory: int) -> bool:
        if self.version == 1:
            if not _write(self.folder / "memory.limit_in_bytes", str(memory)):
                return False
            _write(self.folder / "memory.memsw.limit_in_bytes", str(memory))  # no swap beyond it
            return True
        if not (self.folder / "memory.max").exists():
            _write(self.folder.parent / "cgroup.subtree_control", "+memory")
        if not _write(self.folder / "memory.max", str(memory)):
            return False
        _write(self.folder / "memory.swap.max", "0")
        return True

    def wrap(self, command: list[str]) -> list[str]:
        """`command`, started inside this cgroup (the shell enters it, then becomes the command:
        nothing the command starts is ever outside it)."""
        procs = str(self.folder / "cgroup.procs")
        return ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', procs, *command]

    def usage(self) -> int:
        """Bytes charged to the cgroup now."""
        name = "memory.usage_in_bytes" if self.version == 1 else "memory.current"
        try:
            return int((self.folder / name).read_text())
        except (OSError, ValueError):
            return 0

    def remove(self) -> None:
        """Remove the cgroup once the processes in it are gone (waits up to a second)."""
        for _ in range(100):
            try:
                self.folder.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.01)


def _remove_stale(parent: Path) -> None:
    """Empty cgroups left by graders that were killed before they could remove theirs."""
    try:
        folders = [f for f in parent.iterdir() if f.name.startswith(PREFIX)]
    except OSError:
        return
    for folder in folders:
        pid = folder.name[len(PREFIX):].split("-")[0]
        if pid.isdigit() and not _alive(int(pid)):
            try:
                folder.rmdir()
            except OSError:
                pass

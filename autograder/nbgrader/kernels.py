"""The learner's notebook runs for the feedback in a kernel in the grader's jail.

`JailedExecute` runs the notebook in a kernel forked by the grader's warm jailed server
(`_ForkedKernelProvisioner`; or, with AUTOGRADER_WARM_KERNEL=0, started afresh in a jail of its
own: no network, read-only files, an unprivileged uid), with a grading child's limits (memory, CPU
seconds, processes, file size; `autograder/jail/inside/notebook_kernel.py`), unable to write to its
socket folder once its sockets exist, and with what it prints capped per cell and per notebook;
it never stops `autograde` when that kernel dies or hangs.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

from jupyter_client.manager import AsyncKernelManager
from jupyter_client.provisioning import LocalProvisioner
from nbclient.util import run_sync
from nbformat.v4 import new_output
from nbgrader.preprocessors import Execute

from autograder.jail import jailer
from autograder.course import ASSIGNMENTS
from autograder.timing import phase


def _warm() -> bool:
    """Whether kernels are forked from the jailed server (AUTOGRADER_WARM_KERNEL=0: each kernel
    is a fresh Python in a jail of its own, which pays for start-up and `import torch`)."""
    return os.environ.get("AUTOGRADER_WARM_KERNEL", "1") != "0" and jailer.jail().jailed


class _ForkedKernel:
    """The process handle jupyter_client's LocalProvisioner keeps (Popen's poll, wait, signals)
    for a kernel the jailed server forked: its pid is the jail's, so everything goes through the
    server, which can reach only its own jail."""

    stdin = stdout = stderr = None

    def __init__(self, jail, pid: int):
        self.jail, self.pid, self.returncode = jail, pid, None

    def poll(self):
        if self.returncode is None:
            status = self.jail.status(self.pid, wait=0)
            if status == "running":
                return None
            kind, _, value = status.partition(" ")
            self.returncode = (int(value) if kind == "exit" else
                               -getattr(signal, value, signal.SIGKILL) if kind == "signal" else
                               -signal.SIGKILL)  # gone with the server or the jail
        return self.returncode

    def wait(self, timeout=None):
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired("notebook kernel", timeout)
            time.sleep(0.05)
        return self.returncode

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:
            self.jail.signal(self.pid, signum)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


class _ForkedKernelProvisioner(LocalProvisioner):
    """jupyter_client's local provisioner, but the kernel is forked by the jailed server, which has
    imported torch, matplotlib, ipykernel and the assignment's `notebook_warm` (its kernel
    manager's `warm`, set by JailedExecute) once: no start-up paid per notebook. The jail is
    reset first (every process the last notebook or its grading left killed, the scratch folder
    emptied), so nothing of another learner is there."""

    async def launch_kernel(self, cmd, **kwargs):
        jail = jailer.jail()
        jail.reset()
        pid = jail.kernel(["-f", self.parent.connection_file], getattr(self.parent, "warm", ()))
        if pid is None:
            raise RuntimeError("the jailed server could not start the notebook's kernel")
        self.process = _ForkedKernel(jail, pid)
        self.pid, self.pgid, self.cwd = pid, None, None
        return self.connection_info


class JailedKernelManager(AsyncKernelManager):
    """A kernel in the grader's jail, reached over Unix sockets in a private folder (no network):
    forked from the grader's warm jailed server (`_ForkedKernelProvisioner`), or with
    AUTOGRADER_WARM_KERNEL=0 started in a jail of its own."""

    async def _async_pre_start_kernel(self, **kw):
        if _warm():
            self._socket_dir = tempfile.mkdtemp(prefix="kernel-", dir=jailer.jail().kernel_folder())
            self.kernel_id = self.kernel_id or str(uuid.uuid4())
            self.provisioner = _ForkedKernelProvisioner(
                kernel_id=self.kernel_id, kernel_spec=self.kernel_spec, parent=self)
        else:
            self._socket_dir = tempfile.mkdtemp(prefix="autograder-kernel-")
        self.transport = "ipc"
        self.connection_file = str(Path(self._socket_dir) / "kernel.json")
        self.ip = str(Path(self._socket_dir) / "kernel-ipc")
        kw.pop("cwd", None)  # the notebook's folder is not in the jail
        return await super()._async_pre_start_kernel(**kw)

    def write_connection_file(self, **kwargs):
        super().write_connection_file(**kwargs)
        if os.geteuid() == 0:  # the jail's own uid reads the file and makes its sockets here
            for path in (self._socket_dir, self.connection_file):
                os.chown(path, jailer.uid(), jailer.uid())

    def format_kernel_cmd(self, extra_arguments=None):
        command = list(super().format_kernel_cmd(extra_arguments))
        # ipykernel_launcher, with a grading child's limits (autograder/jail/inside/notebook_kernel.py)
        at = next((i for i in range(len(command) - 1)
                   if command[i] == "-m" and command[i + 1] == "ipykernel_launcher"), None)
        if at is None:
            raise RuntimeError(f"not an ipykernel command, which the jail can limit: {command}")
        command[at + 1] = "autograder.jail.inside.notebook_kernel"
        jailer.check()
        return jailer.bwrap_command(jailer.uid(), os.geteuid() == 0, command,
                                    writable=(self._socket_dir,))

    def seal(self) -> None:
        """The kernel's sockets exist: from now on it may not write to their folder (nor read the
        connection file). Connecting to an existing Unix socket needs no write permission there."""
        if os.geteuid() == 0:
            for path in (self._socket_dir, self.connection_file):
                os.chown(path, 0, 0)
            os.chmod(self._socket_dir, 0o755)
        else:  # the jail's uid is ours, mapped: only a hurdle, it could chmod it back
            os.chmod(self._socket_dir, 0o555)
        os.chmod(self.connection_file, 0o600)

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        await AsyncKernelManager._async_cleanup_resources(self, restart=restart)
        if not restart and getattr(self, "_socket_dir", None):
            try:
                os.chmod(self._socket_dir, 0o700)
            except OSError:
                pass
            shutil.rmtree(self._socket_dir, ignore_errors=True)

    cleanup_resources = _async_cleanup_resources


OUTPUT_LIMIT = 4 << 20
"""Characters of output kept per cell (and at most OUTPUT_COUNT outputs): what nbgrader holds
in memory for a notebook stays bounded, whatever the learner's kernel prints."""
OUTPUT_COUNT = 1000
NOTEBOOK_OUTPUT_LIMIT = 16 << 20
"""Characters of output kept for a whole notebook (the autograded notebook and the feedback stay
under about this much, however many cells print)."""


def _size(value) -> int:
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict):
        return sum(_size(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return sum(_size(v) for v in value)
    return 8


class JailedExecute(Execute):
    """nbgrader's Execute in a jailed kernel; a dead or hung kernel leaves the rest to grading."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("kernel_manager_class", JailedKernelManager)
        super().__init__(*args, **kwargs)
        self._kept: dict[int, list] = {}
        self._notebook_kept = 0
        """Characters kept for the notebook so far (all cells)."""

    async def async_start_new_kernel_client(self):
        with phase("nbgrader: start the jailed kernel"):
            kc = await super().async_start_new_kernel_client()
        seal = getattr(self.km, "seal", None)
        if seal is not None:
            try:
                seal()
            except Exception:
                await self._async_cleanup_kernel()  # nbclient cleans up only after this returns
                raise
        return kc

    start_new_kernel_client = run_sync(async_start_new_kernel_client)  # nbconvert calls this one

    def output(self, outs, msg, display_id, cell_index):
        """nbclient's, keeping at most OUTPUT_LIMIT characters and OUTPUT_COUNT outputs per cell
        (consecutive stream text joined) and NOTEBOOK_OUTPUT_LIMIT for the notebook, then one line
        saying the output was cut."""
        if self.output_hook_stack[msg["parent_header"].get("msg_id")]:
            return super().output(outs, msg, display_id, cell_index)
        if not outs or cell_index not in self._kept:  # a new cell, or its output was cleared
            self._kept[cell_index] = [0, False]
        kept = self._kept[cell_index]
        if kept[1]:
            return None
        content = msg.get("content") or {}
        size = _size(content)
        notebook_room = NOTEBOOK_OUTPUT_LIMIT - self._notebook_kept
        room = min(OUTPUT_LIMIT - kept[0], notebook_room)
        if notebook_room <= 0 and not outs:
            kept[1] = True  # the notebook's output was full before this cell: said once already
            return None
        out, added, full = None, 0, False
        if msg["msg_type"] == "stream" and isinstance(content.get("text"), str):
            if size > room:
                msg = {**msg, "content": {**content, "text": content["text"][:max(room, 0)]}}
                size, full = max(room, 0), True
            last = outs[-1] if outs and not self.clear_before_next_output else None
            if (last is not None and last.get("output_type") == "stream"
                    and last.get("name") == content.get("name")):
                last["text"] += msg["content"]["text"]
                out = last
            else:
                out = super().output(outs, msg, display_id, cell_index)
            added = size
        elif size <= room and len(outs) < OUTPUT_COUNT:
            out, added = super().output(outs, msg, display_id, cell_index), size
        else:
            full = True
        kept[0] += added
        self._notebook_kept += added
        if full and room == notebook_room:  # it did not fit in what the notebook had left
            self._notebook_kept = NOTEBOOK_OUTPUT_LIMIT
        if full or kept[0] >= OUTPUT_LIMIT or len(outs) >= OUTPUT_COUNT \
                or self._notebook_kept >= NOTEBOOK_OUTPUT_LIMIT:
            kept[1] = True
            what = (f"more than {NOTEBOOK_OUTPUT_LIMIT >> 20} MB in this notebook: the later "
                    "cells' output is not kept either" if self._notebook_kept >= NOTEBOOK_OUTPUT_LIMIT
                    else f"more than {OUTPUT_LIMIT >> 20} MB or {OUTPUT_COUNT} outputs in this cell")
            outs.append(new_output("stream", name="stderr", text=f"\n[output was cut: {what}]\n"))
            return None
        return out

    def create_kernel_manager(self):
        """The kernel manager, given the assignment's `notebook_warm`: the notebook's own lazy
        imports, made once in the server its kernels are forked from."""
        km = super().create_kernel_manager()
        found = ASSIGNMENTS.get(((self.resources or {}).get("nbgrader") or {}).get("assignment"))
        km.warm = found.notebook_warm if found else ()
        return km

    def preprocess(self, nb, resources, *args, **kwargs):
        self._kept, self._notebook_kept = {}, 0
        try:
            return super().preprocess(nb, resources, *args, **kwargs)
        except Exception as error:  # noqa: BLE001 - DeadKernelError, timeouts, a broken kernel
            self.log.warning("the notebook's kernel failed (%s): its outputs are incomplete; "
                             "scores still come from the grader", type(error).__name__)
            return nb, resources

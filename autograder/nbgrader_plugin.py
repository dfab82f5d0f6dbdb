"""nbgrader preprocessors: scores from the jailed grader, and a jailed kernel for the notebook.

Registered in `nbgrader_config.py`:

* `TrustedGrades` (after `Execute`, before `SaveAutoGrades`) grades the
  notebook with the standalone grader, in nbgrader's own process (the jailed
  server stays warm across the notebooks of one `nbgrader autograde` run),
  and writes every hidden-test cell's outputs: the messages, and the score as
  the cell's partial credit. Whatever the learner's kernel printed, patched or
  returned in those cells is thrown away, so it cannot change the number.
* `JailedExecute` runs the notebook for the feedback in a kernel started
  through the same jail (no network, read-only files, an unprivileged uid),
  and never stops `autograde` when that kernel dies or hangs.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import nbformat
from jupyter_client.manager import AsyncKernelManager
from nbformat.v4 import new_output
from nbgrader.preprocessors import Execute, NbGraderPreprocessor

from autograder import jailer


def _function(grade_id: str) -> str:
    return grade_id.removeprefix("tests_")


class TrustedGrades(NbGraderPreprocessor):
    """Hidden-test cells get the jailed grader's messages and score, nothing from the kernel."""

    def preprocess(self, nb, resources):
        from autograder.grading import grade_notebook
        from autograder.notebook import NotGradable

        results, error = [], ""
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "submission.ipynb"
            nbformat.write(nb, path)
            try:
                results = grade_notebook(path).autograded
            except NotGradable as why:
                error = str(why).replace(str(path), "this notebook")
            except Exception as why:  # noqa: BLE001 - fail closed: 0 with an operator message
                self.log.error("the grader broke on %s: %s", resources.get("unique_key"), why)
                error = "the grader could not grade this notebook; your instructor has been told"
        for cell in nb.cells:
            meta = cell.metadata.get("nbgrader", {})
            if cell.cell_type != "code" or not meta.get("grade") or meta.get("solution"):
                continue
            function = _function(meta.get("grade_id", ""))
            tests = [r for r in results if r.function == function]
            cell.outputs = _outputs(function, tests, float(meta.get("points", 0)), error)
        return nb, resources


def _outputs(function: str, tests, points: float, error: str) -> list:
    """The cell's outputs: one stdout stream with the results, the score as partial credit."""
    if error or not tests:
        why = error or f"no hidden tests are registered for `{function}`"
        return [new_output("stream", name="stdout", text=f"Hidden tests for {function} did not run: {why}.\n"),
                new_output("execute_result", data={"text/plain": "0"}, execution_count=None)]
    lines = []
    for test in tests:
        mark = "ok  " if test.passed else "FAIL"
        lines.append(f"{mark} {test.score:g}/{test.max_score:g}  {test.name}")
        lines.extend("       " + line for line in test.output.splitlines())
    earned, possible = sum(t.score for t in tests), sum(t.max_score for t in tests)
    score = earned * points / possible if possible else 0.0
    return [new_output("stream", name="stdout", text="\n".join(lines) + "\n"),
            new_output("execute_result", data={"text/plain": f"{score:g}"}, execution_count=None)]


class JailedKernelManager(AsyncKernelManager):
    """A kernel in the grader's jail, reached over Unix sockets in a private folder (no network)."""

    async def _async_pre_start_kernel(self, **kw):
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
        command = super().format_kernel_cmd(extra_arguments)
        jailer.check()
        return jailer.bwrap_command(jailer.uid(), os.geteuid() == 0, command,
                                    writable=(self._socket_dir,))

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        await AsyncKernelManager._async_cleanup_resources(self, restart=restart)
        if not restart and getattr(self, "_socket_dir", None):
            shutil.rmtree(self._socket_dir, ignore_errors=True)

    cleanup_resources = _async_cleanup_resources


class JailedExecute(Execute):
    """nbgrader's Execute in a jailed kernel; a dead or hung kernel leaves the rest to grading."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("kernel_manager_class", JailedKernelManager)
        super().__init__(*args, **kwargs)

    def preprocess(self, nb, resources, *args, **kwargs):
        try:
            return super().preprocess(nb, resources, *args, **kwargs)
        except Exception as error:  # noqa: BLE001 - DeadKernelError, timeouts, a broken kernel
            self.log.warning("the notebook's kernel failed (%s): its outputs are incomplete; "
                             "scores still come from the grader", type(error).__name__)
            return nb, resources


def autograde_preprocessors(execute: bool = True) -> list:
    """nbgrader's own autograde steps, with its `Execute` replaced by `JailedExecute` (or, with
    `execute=False`, dropped: a much faster autograde whose feedback shows the grader's messages
    but none of the learner's outputs) and `TrustedGrades` right after it."""
    from nbgrader.converters import Autograde
    steps = []
    for step in Autograde.autograde_preprocessors.default():
        if step is Execute:
            steps += ([JailedExecute] if execute else []) + [TrustedGrades]
        else:
            steps.append(step)
    if TrustedGrades not in steps:
        raise RuntimeError("nbgrader's autograde has no Execute step to put the trusted grades after")
    return steps

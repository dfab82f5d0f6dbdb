"""nbgrader preprocessors: scores from the jailed grader, and a jailed kernel for the notebook.

Registered in `nbgrader_config.py`:

* `TrustedGrades` (after `Execute`, before `SaveAutoGrades`) grades the
  notebook with the standalone grader, in nbgrader's own process (the jailed
  server stays warm across the notebooks of one `nbgrader autograde` run),
  and writes every hidden-test cell's outputs: the messages, and the score as
  the cell's partial credit. Whatever the learner's kernel printed, patched or
  returned in those cells is thrown away, so it cannot change the number.
* `JailedExecute` runs the notebook for the feedback in a kernel forked by the
  grader's warm jailed server (`_ForkedKernelProvisioner`; or, with
  AUTOGRADER_WARM_KERNEL=0, started afresh in a jail of its own: no network,
  read-only files, an unprivileged uid),
  with a grading child's limits (memory, CPU seconds, processes, file size;
  `autograder/jail/notebook_kernel.py`), unable to write to its socket folder
  once its sockets exist, and with what it prints capped per cell; it never
  stops `autograde` when that kernel dies or hangs.

And, in `c.Autograde.sanitize_preprocessors` (`sanitize_preprocessors()`), steps that keep one
learner's notebook from stopping `autograde` or from being graded unlike the standalone grader:

* `DeduplicateCopies`: nbgrader's `DeduplicateIds`, whose emptied copies (a copied answer
  cell keeps its nbgrader metadata) become ordinary cells that `TrustedGrades` still grades
  as the copies they are; `RepairCellMetadata` just before it turns any other empty nbgrader
  metadata into an ordinary cell and an unknown schema version into the current one (either
  stops `nbgrader autograde` for every later learner: "an old version of the metadata format").
* `RestoreGradeCells`: nbgrader's `OverwriteCells`, which also puts a deleted hidden-test cell
  back from the source notebook (`add_missing_cells`, placed robustly).
"""

from __future__ import annotations

import copy
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import nbformat
from jupyter_client.manager import AsyncKernelManager
from jupyter_client.provisioning import LocalProvisioner
from nbclient.util import run_sync
from nbformat.v4 import new_output
from nbgrader.api import MissingEntry
from nbgrader.preprocessors import (DeduplicateIds, Execute, NbGraderPreprocessor,
                                    OverwriteCells, SaveAutoGrades)
from traitlets import Bool, List

from autograder import jailer
from autograder.course import ASSIGNMENTS

try:  # nbgrader's gradebook (0.9.6) trips SQLAlchemy's autoflush three times per notebook it
    # autogrades; nothing is lost and no instructor can act on it, so it is not printed
    import warnings

    from sqlalchemy.exc import SAWarning
    warnings.filterwarnings("ignore", message=r"Object of type <Submitted\w+> not in session, add "
                            r"operation along", category=SAWarning)
except ImportError:
    pass


def _function(grade_id: str) -> str:
    return grade_id.removeprefix("tests_")


class TrustedGrades(NbGraderPreprocessor):
    """Hidden-test cells get the jailed grader's messages and score, nothing from the kernel."""

    def preprocess(self, nb, resources):
        from autograder.grading import grade_notebook
        from autograder.notebook import NotGradable
        from autograder.sandbox import JailBroken

        results, error = [], ""
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "submission.ipynb"
            try:
                if nb.metadata.get(REFUSED):  # see refuse_oversized(): a stand-in for the file
                    raise NotGradable(str(nb.metadata[REFUSED])[:500])
                nbformat.write(_sources(nb), path)
                graded = grade_notebook(path)
                results = graded.autograded
                resources[REVIEW] = {r.function: r.output for r in graded.reviews}
            except NotGradable as why:
                error = str(why).replace(str(path), "this notebook")
            except JailBroken:
                raise  # no score at all, rather than a 0 that is not the learner's: nbgrader says so
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


REFUSED = "autograder_refused"
"""Notebook metadata key of the stand-in `refuse_oversized` gives nbgrader for a submitted file
over the grader's limits: why it was refused (every hidden-test cell then scores 0 saying so)."""


def refuse_oversized() -> None:
    """Make `nbgrader autograde` read no submitted notebook over the grader's limits on what is
    parsed (`notebook.read_bounded`: file size, '[' and '{' characters): nbgrader reads and
    validates the whole file before any preprocessor runs, so the bound must come first. In its
    place nbgrader grades the assignment's release notebook marked `REFUSED`, and every hidden-test
    cell scores 0 with the limit named, as `python -m autograder grade` does."""
    from nbgrader.converters import Autograde

    from autograder.notebook import NotGradable, read_bounded

    original = getattr(Autograde.convert_single_notebook, "original", Autograde.convert_single_notebook)

    def convert_single_notebook(self, notebook_filename: str) -> None:
        try:
            read_bounded(Path(notebook_filename))
        except NotGradable as why:
            reason = str(why).replace(str(notebook_filename), "this notebook")
            self.log.error("%s: %s", notebook_filename, reason)
            assignment = Path(notebook_filename).parent.name  # submitted/STUDENT/ASSIGNMENT/
            release = Path(self.coursedir.format_path(self.coursedir.release_directory, ".", assignment))
            stand_in = nbformat.read(release / Path(notebook_filename).name, as_version=4)
            stand_in.metadata[REFUSED] = reason
            exporter = self.exporter  # it opens the file by its name, then reads the stand-in
            exporter.from_file = lambda _stream, resources=None, **kw: \
                type(exporter).from_notebook_node(exporter, stand_in, resources=resources, **kw)
            try:
                return original(self, notebook_filename)
            finally:
                del exporter.from_file
        return original(self, notebook_filename)

    convert_single_notebook.original = original
    Autograde.convert_single_notebook = convert_single_notebook


REVIEW = "autograder_review"
"""resources key: grade_id -> the grader's flags for that cell (autograder/review.py), which
`ReviewComments` writes into the gradebook once `SaveAutoGrades` has written its comments."""


class ReviewComments(NbGraderPreprocessor):
    """The grader's flags (code no exercise needs: frames, gc, sys.modules, the grader's modules,
    ...) as the auto comment of the flagged answer cell in nbgrader's gradebook; a flag in a cell
    the learner added goes on the first answer cell. The score is unchanged."""

    def preprocess(self, nb, resources):
        flags = resources.get(REVIEW) or {}
        if not flags:
            return nb, resources
        from nbgrader.api import Gradebook, MissingEntry
        info = resources["nbgrader"]
        answers = [_nbgrader(c).get("grade_id") for c in nb.cells
                   if _nbgrader(c).get("solution") and _nbgrader(c).get("grade_id")]
        notes: dict[str, list[str]] = {}
        for cell, text in flags.items():
            target = cell if cell in answers else (answers[0] if answers else None)
            if target is not None:
                notes.setdefault(target, []).append(text)
        with Gradebook(info["db_url"]) as gradebook:
            for grade_id, texts in notes.items():
                try:
                    comment = gradebook.find_comment(grade_id, info["notebook"], info["assignment"],
                                                     info["student"])
                except MissingEntry:
                    continue
                comment.auto_comment = "\n\n".join(
                    ["Needs review (the autograder's flag; the score is unchanged):"] + texts)
            gradebook.db.commit()
        return nb, resources


COPY = "autograder"
"""Cell metadata key under which the sanitize steps keep what nbgrader is about to change and the
grader must see as handed in: a copied cell's nbgrader metadata (`DeduplicateCopies`), the type
of a cell the learner turned into markdown or raw (`RepairCellMetadata`; nbgrader's
OverwriteCells turns an answer cell back into code, which the learner's notebook never ran)."""


def _sources(nb):
    """What the grader reads: the cells' sources and metadata, none of the kernel's outputs
    (a notebook that printed 400 MB would be refused as too large), copied cells as copies."""
    sources = copy.deepcopy({**nb, "cells": []})
    for cell in nb.cells:
        cell = copy.deepcopy({k: v for k, v in cell.items() if k != "outputs"})
        if cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
        kept = cell.get("metadata", {}).pop(COPY, {})
        copied = kept.get("nbgrader")
        if isinstance(copied, dict) and "nbgrader" not in cell["metadata"]:
            cell["metadata"]["nbgrader"] = copied
        if kept.get("cell_type") in ("markdown", "raw") and cell["cell_type"] == "code":
            cell = {"cell_type": kept["cell_type"], "metadata": cell["metadata"],
                    "source": cell["source"], **({"id": cell["id"]} if "id" in cell else {})}
        sources["cells"].append(cell)
    return nbformat.from_dict(sources)


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
        # ipykernel_launcher, with a grading child's limits (autograder/jail/notebook_kernel.py)
        at = next((i for i in range(len(command) - 1)
                   if command[i] == "-m" and command[i + 1] == "ipykernel_launcher"), None)
        if at is None:
            raise RuntimeError(f"not an ipykernel command, which the jail can limit: {command}")
        command[at + 1] = "autograder.jail.notebook_kernel"
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


class DeduplicateCopies(DeduplicateIds):
    """nbgrader's `DeduplicateIds` (of cells sharing a grade_id it keeps the last), whose copies
    become ordinary cells instead of keeping an empty nbgrader dict, which stops `autograde` for
    every later learner. The copy's metadata is kept aside (`metadata.autograder`) so that
    `TrustedGrades` grades the notebook as the standalone grader does: a copied answer cell
    runs as the answer it is."""

    def preprocess_cell(self, cell, resources, cell_index):
        before = copy.deepcopy(cell.metadata.get("nbgrader"))
        cell, resources = super().preprocess_cell(cell, resources, cell_index)
        if before and cell.metadata.get("nbgrader") == {}:
            del cell.metadata["nbgrader"]
            cell.metadata.setdefault(COPY, {})["nbgrader"] = before
        return cell, resources


class RepairCellMetadata(NbGraderPreprocessor):
    """Learner-made nbgrader metadata that would stop `autograde` for every later learner (it
    raises SchemaTooOld/TooNewError): an empty or malformed dict is dropped (an ordinary cell),
    an old schema upgraded, an unknown one set to the current version. The rest is nbgrader's
    (OverwriteCells restores known cells' metadata, CheckCellMetadata refuses the notebook)."""

    def preprocess(self, nb, resources):
        known = self._course_metadata(resources)
        for cell in nb.cells:  # only the sanitize steps write that key: never the learner's
            cell.metadata.pop(COPY, None)
            # a cell that lost its metadata but keeps a course cell's id is that cell again,
            # as the standalone grader reads it (notebook.with_course_metadata)
            if "nbgrader" not in cell.metadata and cell.get("id") in known \
                    and known[cell.get("id")][0] == cell.cell_type:
                cell.metadata["nbgrader"] = copy.deepcopy(known[cell.get("id")][1])
            if cell.cell_type in ("markdown", "raw") and "nbgrader" in cell.metadata:
                cell.metadata[COPY] = {"cell_type": cell.cell_type}
        return super().preprocess(nb, resources)

    @staticmethod
    def _course_metadata(resources) -> dict:
        """cell id -> (cell type, nbgrader metadata) of the assignment's source notebook."""
        from autograder.notebook import _source
        assignment = resources.get("nbgrader", {}).get("assignment")
        if assignment not in ASSIGNMENTS:
            return {}
        source = _source(assignment)
        return {i: (source.ids[i][0], m) for i, m in (source.metadata or {}).items()}

    def preprocess_cell(self, cell, resources, cell_index):
        from nbgrader.nbgraderformat import MetadataValidator
        if "nbgrader" not in cell.metadata:
            return cell, resources
        meta = cell.metadata["nbgrader"]
        if not isinstance(meta, dict) or not meta:
            self.log.warning("cell %s: empty nbgrader metadata removed", cell_index)
            del cell.metadata["nbgrader"]
            return cell, resources
        validator = MetadataValidator()
        version = meta.get("schema_version", 0)
        if version == validator.schema_version and type(version) is int:
            return cell, resources
        try:
            if type(version) is int and 0 <= version < validator.schema_version:
                validator.upgrade_cell_metadata(cell)
            else:
                meta["schema_version"] = validator.schema_version
        except Exception:  # noqa: BLE001 - metadata nbgrader cannot read: an ordinary cell
            self.log.warning("cell %s: unreadable nbgrader metadata removed", cell_index)
            cell.metadata.pop("nbgrader", None)
        return cell, resources


def _nbgrader(cell) -> dict:
    meta = cell.get("metadata", {}).get("nbgrader")
    return meta if isinstance(meta, dict) else {}


class RestoreGradeCells(OverwriteCells):
    """nbgrader's `OverwriteCells` with `add_missing_cells`: a hidden-test cell the learner
    deleted is put back from the gradebook's source (so nbgrader records the grader's score for
    it, as the standalone grader gives it), after the nearest earlier nbgrader cell still there.
    Deleted written answers are not put back (their source is the model answer)."""

    add_missing_cells = Bool(True).tag(config=True)

    def preprocess_cell(self, cell, resources, cell_index):
        """nbgrader's, without its "checksum has changed!" warning for a locked cell handed in as
        released: the gradebook keeps the source's text (hidden tests, mark scheme) and its
        checksum, the release has them cleared, so every untouched test cell and rubric differed.
        Such a cell gets the gradebook's text back first; any other change is still reported."""
        grade_id = _nbgrader(cell).get("grade_id")
        if grade_id:
            try:
                source = self.gradebook.find_source_cell(grade_id, self.notebook_id, self.assignment_id)
            except MissingEntry:
                source = None
            if (source is not None and source.locked and cell.cell_type == source.cell_type
                    and cell.source != source.source and cell.source == _released(source)):
                cell.source = source.source
        return super().preprocess_cell(cell, resources, cell_index)

    def add_missing_grade_cells(self, nb, resources):
        source_nb = self.gradebook.find_notebook(self.notebook_id, self.assignment_id)
        order = {cell.name: i for i, cell in enumerate(source_nb.source_cells)}
        sources = {cell.name: cell for cell in source_nb.source_cells}
        solutions = {cell.name for cell in source_nb.solution_cells}
        for grade_cell in sorted(source_nb.grade_cells, key=lambda c: order.get(c.name, len(order))):
            present = {c["metadata"]["nbgrader"]["grade_id"]: i for i, c in enumerate(nb.cells)
                       if "grade_id" in _nbgrader(c)}
            if grade_cell.name in present or grade_cell.name in solutions or grade_cell.name not in sources:
                continue
            self.log.warning("Missing grade cell %s encountered, adding to notebook", grade_cell.name)
            cell = nbformat.from_dict(self.missing_cell_transform(sources[grade_cell.name],
                                                                  grade_cell.max_score))
            earlier = [i for n, i in present.items() if order.get(n, len(order)) < order[grade_cell.name]]
            nb.cells.insert(max(earlier) + 1 if earlier else 0, cell)
        return nb, resources

    def add_missing_task_cells(self, nb, resources):
        """nbgrader's, which breaks on a cell whose unknown grade_id `preprocess_cell` removed."""
        source_nb = self.gradebook.find_notebook(self.notebook_id, self.assignment_id)
        sources = {cell.name: cell for cell in source_nb.source_cells}
        present = {_nbgrader(c).get("grade_id") for c in nb.cells}
        for task_cell in source_nb.task_cells:
            if task_cell.name not in present and task_cell.name in sources:
                nb.cells.append(nbformat.from_dict(self.missing_cell_transform(
                    sources[task_cell.name], task_cell.max_score, is_task=True)))
        return nb, resources


def _released(source) -> str:
    """The text `generate_assignment` releases for a gradebook source cell: hidden tests and mark
    scheme cleared by nbgrader's own steps."""
    cell = nbformat.from_dict({"cell_type": source.cell_type, "source": source.source,
                               "metadata": {"nbgrader": {"grade_id": source.name}},
                               **({"outputs": [], "execution_count": None}
                                  if source.cell_type == "code" else {})})
    for step in (FeedbackClearHiddenTests(), FeedbackClearMarkScheme()):
        cell, _ = step.preprocess_cell(cell, {}, 0)
    return cell.source


class SaveGrades(SaveAutoGrades):
    """nbgrader's `SaveAutoGrades`, and: a written answer left unanswered ("YOUR ANSWER HERE" or
    blank) scores 0 and needs no manual grade; a 0-point task cell (one that only carries the
    mark scheme for the grader) needs no manual grade. nbgrader flags both, so every submission
    was "Needs Manual Grade?", the empty ones included; an answered one still is."""

    def preprocess_cell(self, cell, resources, cell_index):
        cell, resources = super().preprocess_cell(cell, resources, cell_index)
        meta = _nbgrader(cell)
        unanswered = (meta.get("grade") and meta.get("solution") and cell.cell_type == "markdown"
                      and cell.source.strip() in ("", "YOUR ANSWER HERE"))
        no_points = meta.get("task") and float(meta.get("points") or 0) == 0
        if unanswered or no_points:
            try:
                grade = self.gradebook.find_grade(meta["grade_id"], self.notebook_id,
                                                  self.assignment_id, self.student_id)
            except MissingEntry:
                return cell, resources
            grade.auto_score = 0.0
            grade.needs_manual_grade = grade.manual_score is not None
            self.gradebook.db.commit()
        return cell, resources


_IN_GRADEBOOK: set[tuple[str, str]] = set()


def put_in_gradebook(root: str, assignment: str, config=None) -> None:
    """Put `assignment` in the gradebook of the course at `root` when it is in source/ but not
    (yet) in the gradebook, by nbgrader's own `generate_assignment` into a throwaway release
    folder. `config`: the course config (its course id and gradebook)."""
    import subprocess
    import sys

    from nbgrader.api import Gradebook
    from nbgrader.coursedir import CourseDirectory

    from autograder.build import tool_env

    if not assignment or (root, assignment) in _IN_GRADEBOOK:
        return
    coursedir = CourseDirectory(config=config, root=root) if config else CourseDirectory(root=root)
    folder = Path(coursedir.format_path(coursedir.source_directory, ".", assignment))
    wanted = {p.stem for p in folder.glob("*.ipynb")}
    with Gradebook(coursedir.db_url, coursedir.course_id) as gb:
        try:
            have = {nb.name for nb in gb.find_assignment(assignment).notebooks}
        except MissingEntry:
            have = set()
    if wanted and not wanted <= have:
        with tempfile.TemporaryDirectory() as tmp:
            done = subprocess.run(
                [sys.executable, "-m", "nbgrader", "generate_assignment", assignment,
                 f"--CourseDirectory.release_directory={tmp}", "--log-level=ERROR"],
                cwd=root, env=tool_env(), capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"nbgrader generate_assignment {assignment}: {done.stderr}")
    _IN_GRADEBOOK.add((root, assignment))


def stamp_hand_in(folder: Path) -> None:
    """A submission placed in submitted/STUDENT/ASSIGNMENT/ by hand (not through the exchange)
    gets the two files `nbgrader submit` writes beside it: timestamp.txt (the newest notebook's
    time, in nbgrader's format) and submission_secret.txt. Autograde copies them on, and without
    them `release_feedback` stops for every learner with FileNotFoundError. Feedback released for
    such a submission reaches the exchange; the learner, who submitted nothing through it, is
    given the HTML from feedback/ directly."""
    import secrets
    from datetime import datetime, timezone
    folder = Path(folder)
    if not folder.is_dir() or (folder / "timestamp.txt").exists():
        return
    times = [p.stat().st_mtime for p in folder.glob("*.ipynb")] or [time.time()]
    when = datetime.fromtimestamp(max(times), timezone.utc)
    try:
        (folder / "timestamp.txt").write_text(when.strftime("%Y-%m-%d %H:%M:%S.%f %Z"))
        if not (folder / "submission_secret.txt").exists():
            (folder / "submission_secret.txt").write_text(secrets.token_hex(64))
    except OSError:
        pass  # a read-only submission: autograde proceeds; release_feedback then skips it


def gradebook_from_source(config=None):
    """`Autograde.pre_convert_hook`: an assignment that is in source/ but not in the gradebook
    (a fresh clone: release/ is committed, gradebook.db is not) is put there before the first
    submission is graded (`put_in_gradebook`); nbgrader's autograde would otherwise stop with
    "No assignment ... in the database". `config` is the course config."""
    from nbgrader.coursedir import CourseDirectory

    def hook(assignment, student, notebooks):
        for folder in {Path(n).parent for n in notebooks or ()}:
            stamp_hand_in(folder)
        root = os.getcwd()  # nbgrader's converters run from the course root
        coursedir = CourseDirectory(config=config, root=root) if config else CourseDirectory(root=root)
        # nbgrader passes the assignment id as given: `autograde '*'` passes the glob
        source = Path(coursedir.format_path(coursedir.source_directory, ".", ".")).resolve()
        for folder in sorted(source.glob(assignment)) if assignment else ():
            put_in_gradebook(root, folder.name, config)
    return hook


def sanitize_preprocessors() -> list:
    """nbgrader's own sanitize steps, with `RepairCellMetadata` and `DeduplicateCopies` in place of
    `DeduplicateIds`, and `RestoreGradeCells` in place of `OverwriteCells`."""
    from nbgrader.converters import Autograde
    steps = []
    for step in Autograde.sanitize_preprocessors.default():
        if step is DeduplicateIds:  # malformed metadata first: DeduplicateIds reads it
            steps += [RepairCellMetadata, DeduplicateCopies]
        elif step is OverwriteCells:
            steps.append(RestoreGradeCells)
        else:
            steps.append(step)
    if DeduplicateCopies not in steps or RestoreGradeCells not in steps:
        raise RuntimeError("nbgrader's autograde has no DeduplicateIds or OverwriteCells step to replace")
    return steps


def autograde_preprocessors(execute: bool = True) -> list:
    """nbgrader's own autograde steps, with its `Execute` replaced by `JailedExecute` (or, with
    `execute=False`, dropped: a much faster autograde whose feedback shows the grader's messages
    but none of the learner's outputs) and `TrustedGrades` right after it, then `LearnerHTML`
    (learner output sanitized before anyone opens it) and `MarkSchemeForGraders`; nbgrader's
    `SaveAutoGrades` becomes `SaveGrades` (no manual grade for an unanswered written answer)."""
    from nbgrader.converters import Autograde
    steps = []
    for step in Autograde.autograde_preprocessors.default():
        if step is Execute:
            steps += ([JailedExecute] if execute else []) + [TrustedGrades, LearnerHTML,
                                                              MarkSchemeForGraders]
        elif step is SaveAutoGrades:
            steps.append(SaveGrades)
        else:
            steps.append(step)
    if TrustedGrades not in steps or SaveGrades not in steps:
        raise RuntimeError("nbgrader's autograde has no Execute step to put the trusted grades after")
    return steps + [ReviewComments]


# --- What an instructor or a learner opens: sanitized learner output, no grader-only text -------

import html as _html  # noqa: E402

import bleach  # noqa: E402
from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor  # noqa: E402
from nbconvert.preprocessors.sanitize import SanitizeHTML  # noqa: E402
from nbgrader.preprocessors import ClearHiddenTests, ClearMarkScheme, GetGrades  # noqa: E402

SAFE_TAGS = sorted(set(bleach.ALLOWED_TAGS) | {
    "p", "br", "hr", "div", "span", "pre", "h1", "h2", "h3", "h4", "h5", "h6", "sub", "sup",
    "table", "thead", "tbody", "tr", "th", "td", "img", "details", "summary", "dl", "dt", "dd"})
SAFE_PROTOCOLS = ["http", "https", "mailto"]
"""URL schemes a learner's link or image may use (relative links need none)."""
_SCRIPT_SCHEME = re.compile(r"(javascript|vbscript|livescript|data:text/html|data:image/svg)")
SAFE_ATTRIBUTES = {**bleach.ALLOWED_ATTRIBUTES, "img": ["src", "alt", "width", "height"],
                   "th": ["colspan", "rowspan", "align"], "td": ["colspan", "rowspan", "align"]}


def _described_images(html: str) -> str:
    """Sanitized learner HTML with alternative text on every image that has none."""
    return re.sub(r"<img(?![^>]*\balt=)", '<img alt="an image from the notebook"', html)


class LearnerHTML(SanitizeHTML):
    """nbconvert's `SanitizeHTML` (bleach) over what the learner made: every code cell's outputs
    (HTML and markdown cleaned, JavaScript, SVG and other active types dropped), and the markdown
    or raw cells in which bleach finds markup it would remove. Markdown without such markup
    (`a < b`, `$z > 0$`) and the source notebook's own cells (a code span `<Name>Backward`) are
    left exactly as written, since escaping them would change how they render. Runs in `autograde` (so the notebook stored in autograded/,
    which the formgrader shows, is clean) and again in `generate_feedback`."""

    enabled = Bool(True).tag(config=True)  # nbconvert's preprocessors are off unless enabled

    def __init__(self, **kw):
        kw.setdefault("tags", SAFE_TAGS)
        kw.setdefault("attributes", SAFE_ATTRIBUTES)
        super().__init__(**kw)

    def _has_markup(self, text: str) -> bool:
        stripped = bleach.clean(text, tags=self.tags, attributes=self.attributes, strip=True,
                                strip_comments=True)
        return _html.unescape(stripped) != text

    def _course_text(self, resources) -> set[str]:
        """The markdown and raw cells of the assignment's source notebook: the course's own."""
        parent, info = self.parent, resources.get("nbgrader", {})
        while parent is not None and getattr(parent, "coursedir", None) is None:
            parent = getattr(parent, "parent", None)
        if parent is None or not info.get("assignment") or not info.get("notebook"):
            return set()
        path = Path(parent.coursedir.format_path(parent.coursedir.source_directory, ".",
                                                 info["assignment"])) / f"{info['notebook']}.ipynb"
        try:
            nb = nbformat.read(path, as_version=4)
        except (OSError, ValueError):
            return set()
        return {c.source for c in nb.cells if c.cell_type in ("markdown", "raw")}

    def preprocess(self, nb, resources):
        self._trusted = self._course_text(resources)
        return super().preprocess(nb, resources)

    def sanitize_code_outputs(self, outputs):
        """nbconvert's, after each markdown output is judged as a markdown cell is (rendered
        first: nbconvert's own bleach pass sees `[x](javascript:...)` as plain text): one that
        renders unclean is replaced by its sanitized HTML."""
        for output in outputs:
            data = output.get("data") if isinstance(output, dict) else None
            if isinstance(data, dict) and isinstance(data.get("text/markdown"), (str, list)):
                text = data["text/markdown"]
                safe = self.safe_markdown("".join(text) if isinstance(text, list) else text)
                if safe is not None:
                    del data["text/markdown"]
                    data["text/html"] = safe
        outputs = super().sanitize_code_outputs(outputs)
        for output in outputs:
            data = output.get("data") if isinstance(output, dict) else None
            if isinstance(data, dict) and isinstance(data.get("text/html"), str):
                data["text/html"] = _described_images(data["text/html"])
        return outputs

    def preprocess_cell(self, cell, resources, cell_index):
        if cell.cell_type == "code":
            cell.outputs = self.sanitize_code_outputs(cell.get("outputs", []))
        elif cell.cell_type in ("markdown", "raw") and cell.source not in getattr(self, "_trusted", ()):
            if cell.cell_type == "markdown":
                safe = self.safe_markdown(cell.source)
                if safe is not None:
                    cell.source = safe
            elif self._has_markup(cell.source):
                cell.source = self.sanitize_html_tags(cell.source)
        return cell, resources

    def safe_markdown(self, source: str) -> str | None:
        """A learner's markdown as sanitized HTML when rendering it gives anything an allowlist
        removes (a link or image to a scheme other than http, https, mailto or a relative path,
        an event handler, a script, SVG or MathML, raw HTML outside the allowlist); None when it
        renders clean, so that it stays exactly as written (math included). Links are judged
        after markdown is rendered (inline, reference and autolinks, entities decoded), and a
        script scheme anywhere in the text, however spelled, sends the cell to the sanitizer."""
        from nbconvert.filters.markdown import markdown2html
        rendered = markdown2html(source)
        safe = bleach.clean(rendered, tags=self.tags, attributes=self.attributes,
                            protocols=SAFE_PROTOCOLS, strip=True, strip_comments=True)
        squeezed = re.sub(r"[\s\x00-\x1f]+", "", _html.unescape(source)).lower()
        if safe != rendered or _SCRIPT_SCHEME.search(squeezed):
            return _described_images(safe)
        return None


class _Lenient:
    """nbgrader's clearing step, not insisting that only grade/task cells carry the markers (a
    learner may type them in an answer) and leaving a learner's cell with an unmatched marker as
    it is; the course's own cells always pair them (`nbgrader generate_assignment` checks)."""

    def preprocess_cell(self, cell, resources, cell_index):
        kept = cell.source
        try:
            return super().preprocess_cell(cell, resources, cell_index)
        except RuntimeError:
            cell.source = kept
            return cell, resources


DISPLAY_PRIORITY = List(NbGraderPreprocessor.display_data_priority.default_value).tag(config=True)
"""nbconvert's HTML exporter configures every preprocessor's display_data_priority; nbgrader's
own steps accept it (GetGrades), and ours do too, instead of warning on every feedback run."""


class FeedbackClearHiddenTests(_Lenient, ClearHiddenTests):
    """No `### BEGIN HIDDEN TESTS` block (the grader's scaffolding) in the learner's feedback, and
    no bare score under the test results (the `Out[n]: 0` nbgrader reads partial credit from: the
    feedback states the score at the cell already)."""

    enforce_metadata = Bool(False).tag(config=True)
    display_data_priority = DISPLAY_PRIORITY

    def preprocess_cell(self, cell, resources, cell_index):
        cell, resources = super().preprocess_cell(cell, resources, cell_index)
        meta = _nbgrader(cell)
        if cell.cell_type == "code" and meta.get("grade") and not meta.get("solution"):
            cell.outputs = [o for o in cell.get("outputs", []) if o.get("output_type") != "execute_result"]
        return cell, resources


class FeedbackClearMarkScheme(_Lenient, ClearMarkScheme):
    """No mark scheme (the written answer's rubric) in the learner's feedback."""

    enforce_metadata = Bool(False).tag(config=True)
    display_data_priority = DISPLAY_PRIORITY


MARK_SCHEME_LINE = "<!-- {} MARK SCHEME: shown to graders only, removed from the feedback -->"


class MarkSchemeForGraders(NbGraderPreprocessor):
    """In the notebook the formgrader shows, the mark scheme's `### BEGIN/END MARK SCHEME` lines
    become HTML comments (not rendered), which `generate_feedback` still finds and removes with
    the text between them (nbgrader's ClearMarkScheme matches the words, not the `###`)."""

    def preprocess_cell(self, cell, resources, cell_index):
        if cell.cell_type == "markdown" and _nbgrader(cell).get("task"):
            lines = cell.source.split("\n")
            for i, line in enumerate(lines):
                for word in ("BEGIN", "END"):
                    if line.strip() == f"### {word} MARK SCHEME":
                        lines[i] = MARK_SCHEME_LINE.format(word)
            cell.source = "\n".join(lines)
        return cell, resources


WRAP_CSS = "div.output_area pre, div.input_area pre { white-space: pre-wrap; overflow-wrap: anywhere; }"


class WrapLongLines(NbGraderPreprocessor):
    """Long lines in the feedback's code and output boxes wrap instead of running off the box."""

    display_data_priority = DISPLAY_PRIORITY

    def preprocess(self, nb, resources):
        resources.setdefault("inlining", {}).setdefault("css", []).append(WRAP_CSS)
        return nb, resources


class FigureAltText(NbGraderPreprocessor):
    """Every figure in the feedback gets alternative text (for a screen reader, and instead of
    nbconvert's warning per notebook): a PNG or JPEG output becomes the same image as HTML with
    `alt` from the output's own text ("<Figure size 640x480 with 1 Axes>") and its cell."""

    display_data_priority = DISPLAY_PRIORITY
    BASE64 = re.compile(r"[A-Za-z0-9+/=\s]+")

    def preprocess_cell(self, cell, resources, cell_index):
        if cell.cell_type != "code":
            return cell, resources
        for output in cell.get("outputs", []):
            data = output.get("data") or {}
            kind = next((k for k in ("image/png", "image/jpeg") if k in data), None)
            if kind is None or "text/html" in data or not isinstance(data[kind], str) \
                    or not self.BASE64.fullmatch(data[kind]):
                continue
            plain = data.get("text/plain", "")
            plain = "".join(plain) if isinstance(plain, list) else str(plain)
            alt = _html.escape(f"{plain.strip() or 'A figure'}, drawn by code cell {cell_index + 1}",
                               quote=True)
            data["text/html"] = f'<img alt="{alt}" src="data:{kind};base64,{data[kind].strip()}">'
            del data[kind]
        return cell, resources


def feedback_preprocessors() -> list:
    """`GenerateFeedback.preprocessors`: nbgrader's (GetGrades, CSSHTMLHeaderPreprocessor) with
    the hidden tests and the mark scheme cleared, learner output sanitized, long lines wrapped."""
    from nbgrader.converters import GenerateFeedback
    default = list(GenerateFeedback.preprocessors.default())
    if default != [GetGrades, CSSHTMLHeaderPreprocessor]:
        raise RuntimeError(f"nbgrader's feedback steps changed: {default}")
    return [GetGrades, FeedbackClearHiddenTests, FeedbackClearMarkScheme, LearnerHTML,
            FigureAltText, CSSHTMLHeaderPreprocessor, WrapLongLines]


# --- nbgrader export: a grades.csv a spreadsheet opens as data ------------------------------------

from nbgrader.plugins import CsvExportPlugin  # noqa: E402

EXPORT_COLUMNS = ["assignment", "duedate", "timestamp", "student_id", "last_name", "first_name",
                  "email", "raw_score", "late_submission_penalty", "score", "max_score"]


class SpreadsheetSafeCsvExport(CsvExportPlugin):
    """nbgrader's CSV export (same columns, same rows, same `--to`, `--student`, `--assignment`),
    written with the csv module (a name holding a comma, a quote or a newline stays one field)
    and with every text cell that a spreadsheet would read as a formula (= + - @, tab, CR at its
    start) prefixed with a single quote (`autograder.report.spreadsheet_safe`). Scores stay
    numbers."""

    def export(self, gradebook) -> None:
        import csv

        from autograder.report import spreadsheet_safe
        dest = self.to or "grades.csv"
        students = {str(s) for s in self.student}
        assignments = {str(a) for a in self.assignment}
        self.log.info("Exporting grades to %s", dest)
        with open(dest, "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)  # \r\n: a field holding a lone \r or \n is quoted
            writer.writerow(EXPORT_COLUMNS)
            for assignment in gradebook.assignments:
                if assignments and assignment.name not in assignments:
                    continue
                for student in gradebook.students:
                    if students and student.id not in students:
                        continue
                    try:
                        submission = gradebook.find_submission(assignment.name, student.id)
                    except MissingEntry:
                        timestamp, raw, penalty = None, 0.0, 0.0
                    else:
                        timestamp, raw = submission.timestamp, submission.score
                        penalty = submission.late_submission_penalty
                    row = [assignment.name, assignment.duedate, timestamp, student.id,
                           student.last_name, student.first_name, student.email, raw, penalty,
                           max(0.0, raw - penalty), assignment.max_score]
                    writer.writerow([spreadsheet_safe("" if v is None else
                                                      v if isinstance(v, (str, int, float)) else str(v))
                                     for v in row])

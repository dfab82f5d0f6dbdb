"""The scores nbgrader records come from the jailed grader, never from the learner's kernel.

`TrustedGrades` (after the kernel's `JailedExecute`, before `SaveGrades`) grades the notebook with
the standalone grader in nbgrader's own process (the jailed server stays warm across the notebooks
of one `nbgrader autograde` run) and writes every hidden-test cell's outputs: the messages, and the
score as the cell's partial credit. Whatever the learner's kernel printed, patched or returned in
those cells is thrown away, so it cannot change the number. `ReviewComments` puts the grader's
review flags in the gradebook; `refuse_oversized` keeps nbgrader from reading a file over the
grader's limits; `autograde_preprocessors` is the list nbgrader_config.py installs.
"""

from __future__ import annotations

import copy
import tempfile
from pathlib import Path

import nbformat
from nbformat.v4 import new_output
from nbgrader.preprocessors import Execute, NbGraderPreprocessor, SaveAutoGrades

from autograder.nbgrader.feedback import MarkSchemeForGraders
from autograder.nbgrader.sanitize import LearnerHTML
from autograder.nbgrader.gradebook import SaveGrades
from autograder.nbgrader.kernels import JailedExecute
from autograder.nbgrader.cells import nbgrader_metadata
from autograder.nbgrader.repair import COPY, replaced_steps


def _function(grade_id: str) -> str:
    return grade_id.removeprefix("tests_")


class TrustedGrades(NbGraderPreprocessor):
    """Hidden-test cells get the jailed grader's messages and score, nothing from the kernel."""

    def preprocess(self, nb, resources):
        from autograder.grade.batch import grade_notebook
        from autograder.grade.submission import NotGradable
        from autograder.jail.sandbox import JailBroken

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

    from autograder.grade.submission import NotGradable, read_bounded

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
"""resources key: grade_id -> the grader's flags for that cell (autograder/rules/review.py), which
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
        answers = [nbgrader_metadata(c).get("grade_id") for c in nb.cells
                   if nbgrader_metadata(c).get("solution") and nbgrader_metadata(c).get("grade_id")]
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


def autograde_preprocessors(execute: bool = True) -> list:
    """nbgrader's own autograde steps, with its `Execute` replaced by `JailedExecute` (or, with
    `execute=False`, dropped: a much faster autograde whose feedback shows the grader's messages
    but none of the learner's outputs) and `TrustedGrades` right after it, then `LearnerHTML`
    (learner output sanitized before anyone opens it) and `MarkSchemeForGraders`; nbgrader's
    `SaveAutoGrades` becomes `SaveGrades` (no manual grade for an unanswered written answer)."""
    from nbgrader.converters import Autograde
    trusted = ([JailedExecute] if execute else []) + [TrustedGrades, LearnerHTML, MarkSchemeForGraders]
    return replaced_steps(list(Autograde.autograde_preprocessors.default()),
                          {Execute: trusted, SaveAutoGrades: [SaveGrades]},
                          "autograde") + [ReviewComments]

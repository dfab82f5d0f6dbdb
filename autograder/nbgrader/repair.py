"""Steps that keep one learner's notebook from stopping `autograde` for everyone, or from being
graded unlike the standalone grader (`c.Autograde.sanitize_preprocessors`, `sanitize_preprocessors()`).

* `RepairCellMetadata`: empty or malformed nbgrader metadata becomes an ordinary cell, an unknown
  schema version the current one (either stops `nbgrader autograde` for every later learner), a
  cell that keeps a course cell's id gets that cell's metadata back, by the standalone grader's
  rule (`autograder.grade.submission.regained`: not while the course cell is there), a graded
  cell the course does not have is an ordinary cell, and a course cell's flags and points are
  the course's;
* `DeduplicateCopies`: nbgrader's `DeduplicateIds`, whose emptied copies (a copied answer cell keeps
  its nbgrader metadata) become ordinary cells that `TrustedGrades` still grades as copies;
* `RestoreGradeCells`: nbgrader's `OverwriteCells`, which also puts a deleted hidden-test cell back
  from the source notebook (`add_missing_cells`, placed robustly).

`name_duplicate_ids()` (nbgrader_config.py) turns nbformat's `DuplicateCellId` warning, which names
no notebook, into one line naming the notebook it was reading.
"""

from __future__ import annotations

import copy
import os
import re
import sys

import nbformat
from nbgrader.api import MissingEntry
from nbgrader.preprocessors import DeduplicateIds, NbGraderPreprocessor, OverwriteCells
from traitlets import Bool

from autograder.course import ASSIGNMENTS
from autograder.nbgrader.cells import nbgrader_metadata


COPY = "autograder"
"""Cell metadata key under which the sanitize steps keep what nbgrader is about to change and the
grader must see as handed in: a copied cell's nbgrader metadata (`DeduplicateCopies`), the type
of a cell the learner turned into markdown or raw (`RepairCellMetadata`; nbgrader's
OverwriteCells turns an answer cell back into code, which the learner's notebook never ran)."""


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
        from autograder.grade.submission import _source, regained
        for cell in nb.cells:  # only the sanitize steps write that key: never the learner's
            cell.metadata.pop(COPY, None)
        # a cell that lost its metadata but keeps a course cell's id is that cell again, by the
        # rule the standalone grader reads it with (notebook.regained): not while another cell
        # carries the course cell's grade_id, and only the first holder of the id
        assignment = resources.get("nbgrader", {}).get("assignment")
        if assignment in ASSIGNMENTS:
            source = _source(assignment)
            cells = [(c.cell_type, _string(c.get("id")), _string(nbgrader_metadata(c).get("grade_id")))
                     for c in nb.cells]
            for i, cell_id in regained(cells, source).items():
                nb.cells[i].metadata["nbgrader"] = copy.deepcopy(source.metadata[cell_id])
            self._course_cells_only(nb, source)
        for cell in nb.cells:
            if cell.cell_type in ("markdown", "raw") and "nbgrader" in cell.metadata:
                cell.metadata[COPY] = {"cell_type": cell.cell_type}
        return super().preprocess(nb, resources)

    def _course_cells_only(self, nb, source) -> None:
        """What makes a cell graded is the course's, as the standalone grader reads it: a cell
        the learner marked graded with a grade_id the course does not have (Create Assignment's
        toolbar) becomes an ordinary cell, and a course cell's grading flags and points are the
        course's (nbgrader's CheckCellMetadata refused such a notebook: 0 and no feedback)."""
        course = {meta.get("grade_id"): meta for meta in source.metadata.values()}
        for index, cell in enumerate(nb.cells):
            meta = cell.metadata.get("nbgrader")
            if not isinstance(meta, dict) or not meta:
                continue  # preprocess_cell's
            mine = course.get(_string(meta.get("grade_id")))
            if mine is None:
                if meta.get("grade") or meta.get("solution") or meta.get("task"):
                    self.log.warning("cell %s: graded cell %r is not the course's: an ordinary "
                                     "cell", index, meta.get("grade_id"))
                del cell.metadata["nbgrader"]
                continue
            for key in ("grade", "solution", "locked", "task", "points"):
                if key in mine:
                    meta[key] = copy.deepcopy(mine[key])
                else:
                    meta.pop(key, None)

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




def _string(value) -> str | None:
    return value if isinstance(value, str) else None


class RestoreGradeCells(OverwriteCells):
    """nbgrader's `OverwriteCells` with `add_missing_cells`: a hidden-test cell the learner
    deleted is put back from the gradebook's source (so nbgrader records the grader's score for
    it, as the standalone grader gives it), after the nearest earlier nbgrader cell still there.
    Deleted written answers are not put back (their source is the model answer)."""

    add_missing_cells = Bool(True).tag(config=True)

    def preprocess_cell(self, cell, resources, cell_index):
        """nbgrader's, without its "checksum has changed!" warning for a locked cell handed in as
        released or as solutions/ holds it: the gradebook keeps the source's text (hidden tests,
        mark scheme, their marker lines) and its checksum, the release has them cleared and
        solutions/ has the marker lines removed (a rubric keeps its text there), so every
        untouched test cell and rubric differed. Such a cell gets the gradebook's text back first;
        any other change is still reported."""
        grade_id = nbgrader_metadata(cell).get("grade_id")
        if grade_id:
            try:
                source = self.gradebook.find_source_cell(grade_id, self.notebook_id, self.assignment_id)
            except MissingEntry:
                source = None
            if (source is not None and source.locked and cell.cell_type == source.cell_type
                    and cell.source != source.source
                    and cell.source in (_released(source), _as_in_solutions(source))):
                cell.source = source.source
        return super().preprocess_cell(cell, resources, cell_index)

    def add_missing_grade_cells(self, nb, resources):
        source_nb = self.gradebook.find_notebook(self.notebook_id, self.assignment_id)
        order = {cell.name: i for i, cell in enumerate(source_nb.source_cells)}
        sources = {cell.name: cell for cell in source_nb.source_cells}
        solutions = {cell.name for cell in source_nb.solution_cells}
        for grade_cell in sorted(source_nb.grade_cells, key=lambda c: order.get(c.name, len(order))):
            present = {c["metadata"]["nbgrader"]["grade_id"]: i for i, c in enumerate(nb.cells)
                       if "grade_id" in nbgrader_metadata(c)}
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
        present = {nbgrader_metadata(c).get("grade_id") for c in nb.cells}
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
    from autograder.nbgrader.feedback import FeedbackClearHiddenTests, FeedbackClearMarkScheme
    for step in (FeedbackClearHiddenTests(), FeedbackClearMarkScheme()):
        cell, _ = step.preprocess_cell(cell, {}, 0)
    return cell.source


def _as_in_solutions(source) -> str:
    """The text solutions/ holds for a gradebook source cell (autograder/instructor/build.py): the source's,
    with its BEGIN/END SOLUTION and MARK SCHEME marker lines removed."""
    from autograder.instructor.build import without_markers
    return without_markers(source.source)


def name_duplicate_ids() -> None:
    """From now on, in this process, nbformat's `DuplicateCellId` warning ("Non-unique cell id
    'da4455bd' detected. Corrected to '...'", which names no notebook: nbgrader reads every
    learner's notebook with it) is one line naming the notebook nbformat was reading, e.g.
    `[autograder] WARNING submitted/ada/01_linear_algebra/linear_algebra.ipynb: cell id
    'da4455bd' is held by more than one cell; nbformat gave a later one the id '...'`. A warning
    whose notebook cannot be told (read from a string) is left as nbformat words it."""
    import warnings

    from nbformat.warnings import DuplicateCellId

    previous = warnings.showwarning
    if getattr(previous, "names_notebooks", False):
        return

    def showwarning(message, category, filename, lineno, file=None, line=None):
        path = _notebook_being_read() if issubclass(category, DuplicateCellId) else None
        if path is None:
            return previous(message, category, filename, lineno, file, line)
        found = re.search(r"id '([^']*)' detected\. Corrected to '([^']*)'", str(message))
        text = (f"cell id '{found[1]}' is held by more than one cell; nbformat gave a later one "
                f"the id '{found[2]}'") if found else str(message)
        try:
            print(f"[autograder] WARNING {path}: {text}", file=file or sys.stderr, flush=True)
        except (OSError, ValueError):
            pass  # as warnings does: a closed or invalid stream loses the warning

    showwarning.names_notebooks = True
    warnings.showwarning = showwarning


def _notebook_being_read() -> str | None:
    """The file `nbformat.read` is reading in this thread (a path, or an open file's name)."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code is nbformat.read.__code__:
            fp = frame.f_locals.get("fp")
            name = fp if isinstance(fp, (str, os.PathLike)) else getattr(fp, "name", None)
            return os.fspath(name) if isinstance(name, (str, os.PathLike)) else None
        frame = frame.f_back
    return None


def replaced_steps(default: list, replacements: dict, what: str) -> list:
    """nbgrader's `default` steps with each step that is a key of `replacements` replaced by the
    steps it maps to; RuntimeError naming `what` when one of them is not there to replace (an
    nbgrader whose steps changed)."""
    missing = [step.__name__ for step in replacements if step not in default]
    if missing:
        raise RuntimeError(f"nbgrader's {what} has no {' or '.join(missing)} step to replace")
    return [new for step in default for new in replacements.get(step, [step])]


def sanitize_preprocessors() -> list:
    """nbgrader's own sanitize steps, with `RepairCellMetadata` and `DeduplicateCopies` in place of
    `DeduplicateIds`, and `RestoreGradeCells` in place of `OverwriteCells`."""
    from nbgrader.converters import Autograde
    # malformed metadata first: DeduplicateIds reads it
    return replaced_steps(list(Autograde.sanitize_preprocessors.default()),
                          {DeduplicateIds: [RepairCellMetadata, DeduplicateCopies],
                           OverwriteCells: [RestoreGradeCells]}, "autograde")

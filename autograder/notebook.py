"""Read a submitted notebook: which assignment it is, and the learner's code."""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass
from pathlib import Path

import nbformat

from autograder.course import ASSIGNMENTS, Assignment


class NotGradable(Exception):
    """The input is not a notebook of this course; the message is one line for the operator."""


@dataclass(frozen=True)
class Submission:
    """One learner's notebook, ready to grade."""

    path: Path
    assignment: Assignment
    cells: tuple[str, ...]
    """The code to run: the source notebook's setup cells and the learner's answer cells."""
    written: tuple[tuple[str, float, str], ...] = ()
    """(grade_id, points, text) of each answer graded by hand (markdown answer cells)."""
    student: str | None = None

    @property
    def key(self) -> str:
        return f"{self.student or self.path.stem}/{self.assignment.id}"


def _defined_names(source: str) -> set[str]:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    return {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}


def answer_id(cell) -> str | None:
    """The grade_id of a code answer cell (nbgrader `solution: true`); None for other cells."""
    meta = cell.metadata.get("nbgrader", {})
    return meta.get("grade_id") if cell.cell_type == "code" and meta.get("solution") else None


def load_submission(path: str | Path, student: str | None = None) -> Submission:
    """Read `path` and recognise its assignment from its content."""
    path = Path(path)
    if not path.is_file():
        raise NotGradable(f"{path}: no such file")
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception as error:  # nbformat raises several types for a broken file
        raise NotGradable(f"{path}: not a readable notebook ({type(error).__name__})") from None
    code_cells = [c for c in nb.cells if c.cell_type == "code"]
    answers = {answer_id(c): c.source for c in code_cells if answer_id(c)}
    defined = set().union(*(_defined_names(c.source) for c in code_cells))
    # Answer-cell ids are the strong signal; function definitions the fallback for
    # a notebook whose nbgrader metadata was lost (copied cells into a new file).
    scores = {a.id: (len(set(answers) & set(a.functions)), len(defined & set(a.functions)))
              for a in ASSIGNMENTS.values()}
    best = max(scores, key=scores.get)
    if scores[best] == (0, 0):
        raise NotGradable(f"{path}: not a notebook of this course (no graded function found)")
    assignment = ASSIGNMENTS[best]
    layout, manual = _source_layout(assignment.id)
    if answers:
        # Setup cells (imports, given helpers) come from the trusted source notebook, as
        # nbgrader's autograde restores locked cells; answer cells from the submission.
        program = [text if kind == "setup" else answers[text] for kind, text in layout
                   if kind == "setup" or text in answers]
    else:
        # nbgrader metadata lost: the setup cells, then the cells that define graded functions.
        program = [text for kind, text in layout if kind == "setup"]
        program += [c.source for c in code_cells if _defined_names(c.source) & set(assignment.functions)]
    texts = {c.metadata.get("nbgrader", {}).get("grade_id"): c.source
             for c in nb.cells if c.cell_type == "markdown"}
    written = tuple((grade_id, points, texts.get(grade_id, "")) for grade_id, points in manual)
    return Submission(path, assignment, tuple(program), written=written, student=student)


@functools.lru_cache(maxsize=None)
def _source_layout(assignment_id: str):
    """What grading needs from the source notebook, read once per assignment.

    Returns the setup and answer cells in order, as ("setup", code) or ("answer", grade_id),
    and (grade_id, points) of each markdown answer graded by hand.
    """
    nb = nbformat.read(ASSIGNMENTS[assignment_id].source, as_version=4)
    layout, manual = [], []
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and meta.get("grade_id", "").startswith("setup"):
            layout.append(("setup", cell.source))
        elif answer_id(cell):
            layout.append(("answer", answer_id(cell)))
        elif cell.cell_type == "markdown" and meta.get("grade") and meta.get("solution"):
            manual.append((meta["grade_id"], float(meta["points"])))
    return tuple(layout), tuple(manual)


def find_submissions(root: str | Path) -> list[tuple[str, str, Path]]:
    """(student, assignment folder, notebook) for nbgrader's submitted/<student>/<assignment>/ layout."""
    root = Path(root)
    found = []
    for student_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        for assignment_dir in sorted(p for p in student_dir.iterdir() if p.is_dir()):
            notebooks = sorted(assignment_dir.glob("*.ipynb"))
            expected = ASSIGNMENTS.get(assignment_dir.name)
            preferred = [n for n in notebooks if expected and n.name == expected.notebook]
            for notebook in (preferred or notebooks)[:1]:
                found.append((student_dir.name, assignment_dir.name, notebook))
    return found

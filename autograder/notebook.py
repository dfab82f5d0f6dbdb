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


def _is_answer(cell) -> bool:
    return cell.cell_type == "code" and bool(cell.metadata.get("nbgrader", {}).get("solution"))


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
    answers = [c for c in nb.cells if _is_answer(c)]
    grade_ids = {c.metadata.get("nbgrader", {}).get("grade_id") for c in answers}
    defined = set().union(*(_defined_names(c.source) for c in code_cells))
    # Answer-cell ids are the strong signal; function definitions the fallback for
    # a notebook whose nbgrader metadata was lost (copied cells into a new file).
    scores = {a.id: (len(grade_ids & set(a.functions)), len(defined & set(a.functions)))
              for a in ASSIGNMENTS.values()}
    best = max(scores, key=scores.get)
    if scores[best] == (0, 0):
        raise NotGradable(f"{path}: not a notebook of this course (no graded function found)")
    assignment = ASSIGNMENTS[best]
    texts = {_grade_id(c): c.source for c in nb.cells if c.cell_type == "markdown"}
    written = tuple((grade_id, points, texts.get(grade_id, ""))
                    for kind, grade_id, points in _manual_cells(assignment.id))
    return Submission(path, assignment, tuple(_program(assignment, nb)), written=written,
                      student=student)


@functools.lru_cache(maxsize=None)
def _manual_cells(assignment_id: str) -> tuple[tuple[str, str, float], ...]:
    """("written", grade_id, points) of the source notebook's hand-graded markdown answers."""
    nb = nbformat.read(ASSIGNMENTS[assignment_id].source, as_version=4)
    return tuple(("written", _grade_id(c), float(c.metadata["nbgrader"]["points"]))
                 for c in nb.cells if c.cell_type == "markdown"
                 and c.metadata.get("nbgrader", {}).get("grade")
                 and c.metadata["nbgrader"].get("solution"))


def _grade_id(cell) -> str | None:
    return cell.metadata.get("nbgrader", {}).get("grade_id")


@functools.lru_cache(maxsize=None)
def _source_cells(assignment_id: str) -> tuple[tuple[str, str], ...]:
    """(kind, text) of the source notebook's setup and answer cells, in order."""
    nb = nbformat.read(ASSIGNMENTS[assignment_id].source, as_version=4)
    out = []
    for cell in nb.cells:
        grade_id = _grade_id(cell) or ""
        if cell.cell_type == "code" and grade_id.startswith("setup"):
            out.append(("setup", cell.source))
        elif _is_answer(cell):
            out.append(("answer", grade_id))
    return tuple(out)


def _program(assignment: Assignment, nb) -> list[str]:
    """The code the learner's functions run with, in notebook order.

    Setup cells (imports, given helpers) come from the trusted source notebook,
    as nbgrader's autograde restores locked cells; answer cells from the submission.
    """
    answers = {_grade_id(c): c.source for c in nb.cells if _is_answer(c)}
    program = []
    for kind, text in _source_cells(assignment.id):
        if kind == "setup":
            program.append(text)
        elif text in answers:
            program.append(answers.pop(text))
    if not any(_is_answer(c) for c in nb.cells):
        # nbgrader metadata lost (cells copied into a new notebook): take the cells
        # that define graded functions.
        program += [c.source for c in nb.cells if c.cell_type == "code"
                    and _defined_names(c.source) & set(assignment.functions)]
    return program


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

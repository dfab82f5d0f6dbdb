"""Read a submitted notebook: which assignment it is, and the learner's code."""

from __future__ import annotations

import ast
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
    """Source of the learner's answer cells, in notebook order."""
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
    if not answers:
        answers = [c for c in code_cells if _defined_names(c.source) & set(assignment.functions)]
    return Submission(path, assignment, tuple(c.source for c in answers), student)


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

"""Flags for the instructor on a submitted notebook (0 points, never shown to the learner): the
answers of exercises with no by-hand rule, and the cells the learner added, read with
autograder/rules/review.py."""

from __future__ import annotations

from pathlib import Path

from autograder.course import _source, subset_rules
from autograder.grade.submission import NotGradable, read_cells, recognise
from autograder.rules.review import Finding, flags_in


def review_notebook(path: str | Path) -> list[Finding]:
    """Flags in the learner's code cells of the notebook at `path` (answer cells by grade_id;
    code cells the learner added count too, since their definitions run)."""
    try:
        cells = read_cells(path)
    except NotGradable:
        return []
    assignment = recognise(cells)
    known = _source(assignment.id).known if assignment is not None else frozenset()
    out = []
    for cell in cells:
        if cell.cell_type != "code":
            continue
        if cell.grade_id is not None and not cell.solution:
            continue  # the instructor's locked cells (the grader runs its own copy anyway)
        if cell.grade_id is None and cell.source.strip() in known:
            continue  # instructor code the learner left as it was
        if cell.grade_id is not None and assignment is not None \
                and cell.grade_id in assignment.functions \
                and subset_rules(assignment, cell.grade_id) is not None:
            continue  # a by-hand answer: what it may use is refused, not flagged (rules/subset/)
        out += flags_in(cell.source, f"cell {cell.grade_id}" if cell.grade_id else "a cell you added")
    return out


def review_results(path: str | Path) -> list:
    """One 0-point, instructor-only test entry per flagged cell ([] for most notebooks)."""
    from autograder.grade.plugin import TestResult
    by_cell: dict[str, list[Finding]] = {}
    for f in review_notebook(path):
        by_cell.setdefault(f.grade_id, []).append(f)
    return [TestResult(cell[:100], f"{cell[:100]}: needs review", 0.0, 0.0,
                       "Flagged for the instructor (this does not change the score): the cell "
                       "uses what no exercise needs, and what could reach into the grader's "
                       "side of the process.\n" + "\n".join(f.describe() for f in flags[:20]),
                       False, review=True)
            for cell, flags in list(by_cell.items())[:20]]

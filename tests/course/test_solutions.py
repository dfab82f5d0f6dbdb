"""solutions/ holds executed worked solutions that score full marks."""

from __future__ import annotations

import nbformat
import pytest

from autograder.course import ASSIGNMENTS, ROOT
from autograder.grade.batch import grade_notebook
from conftest import BUILT


@pytest.mark.parametrize("assignment", BUILT)
def test_solution_notebook_is_executed_and_scores_full_marks(assignment):
    path = ROOT / "solutions" / assignment / ASSIGNMENTS[assignment].notebook
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.execution_count for c in code), "every code cell has been run"
    errors = [o for c in code for o in c.outputs if o.output_type == "error"]
    assert not errors, errors
    assert any("image/png" in o.get("data", {}) for c in code for o in c.outputs), "a figure"
    assert "HIDDEN TESTS" not in path.read_text() and "BEGIN SOLUTION" not in path.read_text()
    graded = grade_notebook(path)
    assert graded.autograded and all(r.passed for r in graded.autograded)

"""What a learner reads first: each notebook says what it assumes."""

from __future__ import annotations

import nbformat
import pytest

from autograder.course import ASSIGNMENTS
from conftest import BUILT


@pytest.mark.parametrize("assignment", BUILT)
def test_first_cell_states_prerequisites_under_the_title(assignment):
    first = nbformat.read(ASSIGNMENTS[assignment].source, as_version=4).cells[0]
    lines = [line for line in first.source.splitlines() if line.strip()]
    assert first.cell_type == "markdown" and lines[0].startswith("# "), "the first cell opens with the title"
    assert lines[1].startswith("Prerequisites: "), f"one line of prerequisites under the title, not {lines[1]!r}"
    assert lines[1].rstrip().endswith(".") and len(lines[1]) <= 200, lines[1]


@pytest.mark.parametrize("assignment", [a for a in BUILT if ASSIGNMENTS[a].new_tensor])
def test_a_function_held_to_a_new_tensor_says_so_in_its_exercise(assignment):
    """The grader fails a `new_tensor` function that returns its input itself: only because the
    exercise above its answer cell says "a new tensor"."""
    cells = nbformat.read(ASSIGNMENTS[assignment].source, as_version=4).cells
    for function in ASSIGNMENTS[assignment].new_tensor:
        answer = next(i for i, c in enumerate(cells)
                      if c.metadata.get("nbgrader", {}).get("grade_id") == function)
        above = next(c for c in reversed(cells[:answer]) if c.cell_type == "markdown")
        assert "a new tensor" in above.source, (function, above.source[-300:])

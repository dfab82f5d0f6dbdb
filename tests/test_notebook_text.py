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

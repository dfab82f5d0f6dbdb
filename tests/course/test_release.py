"""release/ is exactly nbgrader's output for source/, and leaks no solution or hidden test."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from autograder.course import ASSIGNMENTS, ROOT
from autograder.grade.batch import grade_notebook
from conftest import BUILT, run

BLOCK = re.compile(r"### BEGIN (SOLUTION|HIDDEN TESTS)\n(.*?)### END \1", re.S)


@pytest.fixture(scope="module")
def regenerated(course) -> Path:
    for assignment in BUILT:
        run("nbgrader", "generate_assignment", assignment, "--force", "--log-level=ERROR",
            f"--db=sqlite:///{course}/gradebook.db", cwd=course)
    return course / "release"


@pytest.mark.parametrize("assignment", BUILT)
def test_release_matches_nbgrader_output(assignment, regenerated):
    a = ASSIGNMENTS[assignment]
    committed = nbformat.read(ROOT / "release" / assignment / a.notebook, as_version=4)
    fresh = nbformat.read(regenerated / assignment / a.notebook, as_version=4)
    assert committed == fresh, (f"release/{assignment} differs from what nbgrader makes of "
                                f"source/: run `python -m autograder build {assignment}`")


@pytest.mark.parametrize("assignment", BUILT)
def test_release_leaks_no_solution_or_hidden_test(assignment):
    a = ASSIGNMENTS[assignment]
    source = nbformat.read(a.source, as_version=4)
    release_text = (ROOT / "release" / assignment / a.notebook).read_text()
    released = nbformat.reads(release_text, as_version=4)
    secret_lines = {line.strip() for cell in source.cells for _, block in BLOCK.findall(cell.source)
                    for line in block.splitlines()}
    secret_lines -= {""}
    # a line the instructor's own cells also show (`else:`, `return out`) gives nothing away
    shown = {line.strip() for cell in source.cells for line in BLOCK.sub("", cell.source).splitlines()}
    secret_lines -= shown
    released_lines = {line.strip() for cell in released.cells for line in cell.source.splitlines()}
    leaked = secret_lines & released_lines
    assert not leaked, f"release/{assignment} contains solution or hidden-test lines: {leaked}"
    assert "BEGIN SOLUTION" not in release_text and "HIDDEN TESTS" not in release_text


CHECK_CELL_LINES = 6
"""Lines a graded check cell may show outside its hidden-test block (the Validate dialog shows
them all above the check's message)."""
HIDDEN = re.compile(r"[ \t]*### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS[ \t]*\n?", re.S)


@pytest.mark.parametrize("folder", ["source", "release"])
@pytest.mark.parametrize("assignment", BUILT)
def test_graded_check_cells_are_short(assignment, folder):
    """nbgrader's Validate dialog shows "The following cell failed:", the failing graded cell's
    whole source, then the error: so that the learner's one-sentence verdict comes first, a
    graded cell holds its comment line and one call `check_<function>()` (and the hidden tests),
    and the check code is a function defined in the locked, ungraded cell `checks_<function>`
    right above it (Restart & Run All, Validate and grading all run the cells above a check)."""
    a = ASSIGNMENTS[assignment]
    cells = nbformat.read(ROOT / folder / assignment / a.notebook, as_version=4).cells
    seen = set()
    for i, cell in enumerate(cells):
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type != "code" or not meta.get("grade") or meta.get("solution"):
            continue
        function = meta["grade_id"].removeprefix("tests_")
        seen.add(function)
        shown = HIDDEN.sub("", cell.source).strip().splitlines()
        assert len(shown) <= CHECK_CELL_LINES, (f"{folder}/{assignment}: {meta['grade_id']} shows "
                                                f"{len(shown)} lines: {shown}")
        assert f"check_{function}()" in [line.split("#")[0].strip() for line in shown], shown
        above = cells[i - 1]
        defines = above.metadata.get("nbgrader", {})
        assert above.cell_type == "code" and defines.get("grade_id") == f"checks_{function}", \
            f"{folder}/{assignment}: the cell above {meta['grade_id']} is not checks_{function}"
        assert defines.get("locked") and not defines.get("grade") and not defines.get("solution"), defines
        assert f"\ndef check_{function}():\n" in f"\n{above.source}", above.source[:300]
    assert seen == set(a.functions)


@pytest.mark.parametrize("folder", ["source", "release"])
def test_no_outputs_stored(folder):
    for path in (ROOT / folder).glob("*/*.ipynb"):
        nb = nbformat.read(path, as_version=4)
        stored = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"
                  and (c.outputs or c.execution_count)]
        assert not stored, f"{path.relative_to(ROOT)}: cells {stored} have stored output"


@pytest.mark.parametrize("assignment", BUILT)
def test_hidden_cell_points_equal_hidden_test_points(assignment):
    """The points nbgrader shows per cell are those the pytest tests award."""
    a = ASSIGNMENTS[assignment]
    graded = grade_notebook(a.source)
    per_function = {}
    for r in graded.autograded:
        per_function[r.function] = per_function.get(r.function, 0) + r.max_score
    cells = {}
    for cell in nbformat.read(a.source, as_version=4).cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade") and cell.cell_type == "code":
            cells[meta["grade_id"].removeprefix("tests_")] = float(meta["points"])
    assert cells == per_function
    assert set(cells) == set(a.functions)
    assert all(r.passed for r in graded.autograded), "the source notebook's solutions must score full marks"


@pytest.mark.parametrize("assignment", BUILT)
def test_answer_cells_keep_def_line_and_docstring(assignment):
    a = ASSIGNMENTS[assignment]
    released = nbformat.read(ROOT / "release" / assignment / a.notebook, as_version=4)
    answers = {c.metadata["nbgrader"]["grade_id"]: c.source for c in released.cells
               if c.metadata.get("nbgrader", {}).get("solution") and c.cell_type == "code"}
    for function in a.functions:
        assert (f"def {function}(" in answers.get(function, "")
                or f"class {function}(" in answers.get(function, "")), function
        assert '"""' in answers[function], f"{function}: the stub needs a docstring"
        assert "raise NotImplementedError()" in answers[function]


@pytest.mark.parametrize("assignment", BUILT)
def test_reference_code_sent_to_learner_processes_spells_out_no_answer(assignment):
    """While one function is graded, REFERENCES stand in for the others inside the learner's
    process, where the learner can read them (and show them in a message): they must not be
    the solutions."""
    import importlib
    module = importlib.import_module(f"autograder.tests.test_{assignment}")
    source = nbformat.read(ASSIGNMENTS[assignment].source, as_version=4)
    solution_lines = {line.strip() for cell in source.cells
                      for kind, block in BLOCK.findall(cell.source) if kind == "SOLUTION"
                      for line in block.splitlines() if len(line.strip()) > 12}
    for name, code in getattr(module, "REFERENCES", {}).items():
        shared = solution_lines & {line.strip() for line in code.splitlines()}
        assert not shared, f"{assignment}: the reference for {name} repeats the solution: {shared}"

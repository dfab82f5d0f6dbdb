"""A cell that keeps a course cell's id is that course cell again only when the course cell is not
there: one rule (`autograder.grade.submission.regained`) on every path, the same score standalone and
through nbgrader, and duplicate ids reported with the notebook they are in (issue 37 item 4).

One nbgrader autograde of one notebook (about 10 s); the rest reads notebooks, with no kernel.
"""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
import sys
from collections import defaultdict

import nbformat
import pytest
from nbformat.v4 import new_code_cell
from nbformat.warnings import DuplicateCellId
from nbgrader.api import Gradebook

from autograder.course import ASSIGNMENTS, ROOT
from autograder.grade.submission import Cell, _source, regained, with_course_metadata
from autograder.instructor.samples import Scenario, submission_notebook
from conftest import tool_env

A = ASSIGNMENTS["01_linear_algebra"]
NOTEBOOK = A.notebook.removesuffix(".ipynb")
FULL = {"tests_matmul": 5.0, "tests_linear_forward": 6.0}
STUDENT = "added_cell_keeps_a_test_id"


def _meta(cell) -> dict:
    return cell.metadata.get("nbgrader", {})


def _course_id(grade_id: str) -> str:
    return next(i for i, (_, g, *_rest) in _source(A.id).ids.items() if g == grade_id)


def _added_cell_with_the_tests_id() -> nbformat.NotebookNode:
    """The solution, with a cell the learner added above the answers (no nbgrader metadata) that
    carries the id of the hidden-test cell `tests_linear_forward`, still in the notebook below."""
    nb = submission_notebook(Scenario("x", A.id, "", {}))
    first_answer = next(i for i, c in enumerate(nb.cells) if _meta(c).get("solution"))
    added = new_code_cell("scratch = 1  # my notes")
    added.id = _course_id("tests_linear_forward")
    nb.cells.insert(first_answer, added)
    return nb


def _write(nb, path) -> None:
    """As it is, duplicate ids included (nbformat.write would renumber them)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(nb, indent=1))


def _cells(*cells) -> list[Cell]:
    return [Cell(t, "", g, False, False, i) for t, i, g in cells]


# --- the rule --------------------------------------------------------------------------------

def test_a_cell_without_metadata_is_its_course_cell_again_when_that_cell_is_gone():
    tests = _course_id("tests_linear_forward")
    got = with_course_metadata(_cells(("code", "mine", None), ("code", tests, None)), _source(A.id))
    assert [c.grade_id for c in got] == [None, "tests_linear_forward"]
    assert got[1].grade and not got[1].solution


def test_not_while_a_cell_carries_that_grade_id_in_its_own_metadata():
    tests = _course_id("tests_linear_forward")
    for order in ([("code", tests, None), ("code", "renamed", "tests_linear_forward")],
                  [("code", "renamed", "tests_linear_forward"), ("code", tests, None)]):
        got = with_course_metadata(_cells(*order), _source(A.id))
        assert sorted(c.grade_id or "" for c in got) == ["", "tests_linear_forward"], order
        assert [i for i, c in enumerate(got) if c.grade_id] == \
            [i for i, (_, _, g) in enumerate(order) if g]


def test_only_the_first_cell_holding_the_id():
    tests = _course_id("tests_linear_forward")
    cells = [("code", tests, None), ("code", tests, None), ("code", tests, None)]
    assert regained(cells, _source(A.id)) == {0: tests}
    # the first holder is not a candidate (its own metadata, another type): no cell regains
    assert regained([("code", tests, "mine"), ("code", tests, None)], _source(A.id)) == {}
    assert regained([("markdown", tests, None), ("code", tests, None)], _source(A.id)) == {}


def test_the_cell_type_must_be_the_course_cells():
    tests = _course_id("tests_linear_forward")
    assert regained([("markdown", tests, None)], _source(A.id)) == {}
    assert regained([("raw", tests, None)], _source(A.id)) == {}


def test_nbgraders_sanitize_step_follows_the_same_rule():
    """RepairCellMetadata on the notebook nbgrader reads (nbformat has renumbered the later
    duplicate): the added cell stays an ordinary cell, the course cell keeps its metadata; a
    metadata-less copy of the whole notebook still gets every course cell's metadata back."""
    from autograder.nbgrader.repair import RepairCellMetadata
    resources = {"nbgrader": {"assignment": A.id}}
    with pytest.warns(DuplicateCellId):  # as nbgrader reads it: the later holder renumbered
        nb = nbformat.reads(json.dumps(_added_cell_with_the_tests_id()), as_version=4)
    before = [(c.get("id"), dict(_meta(c))) for c in nb.cells]
    nb, _ = RepairCellMetadata().preprocess(nb, resources)
    assert [(c.get("id"), dict(_meta(c))) for c in nb.cells] == before
    stripped = nbformat.read(ROOT / "solutions" / A.id / A.notebook, as_version=4)
    stripped, _ = RepairCellMetadata().preprocess(stripped, resources)
    assert {_meta(c).get("grade_id") for c in stripped.cells} >= set(FULL)


def test_the_duplicate_id_warning_names_the_file_nbformat_reads(tmp_path, capsys):
    """`name_duplicate_ids` (nbgrader_config.py): nbformat's warning becomes one line naming the
    file, however it is read (a path, an open file); read from a string, it stays nbformat's."""
    import warnings

    from autograder.nbgrader.repair import name_duplicate_ids
    path = tmp_path / "ada" / A.id / A.notebook
    _write(_added_cell_with_the_tests_id(), path)
    duplicated = _course_id("tests_linear_forward")
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        name_duplicate_ids()
        name_duplicate_ids()  # once is enough: no second wrapper
        nbformat.read(path, as_version=4)
        with open(path, encoding="utf-8") as f:
            nbformat.read(f, as_version=4)
        with pytest.warns(DuplicateCellId):
            nbformat.reads(path.read_text(), as_version=4)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2, lines
    for line in lines:
        assert line.startswith(f"[autograder] WARNING {path}: cell id '{duplicated}' is held by "
                               "more than one cell; nbformat gave a later one the id '"), line


# --- both paths, on one notebook ------------------------------------------------------------

def _by_cell(results_json: dict) -> dict:
    scores = defaultdict(float)
    for test in results_json["tests"]:
        function = test["name"].split(":")[0]
        if f"tests_{function}" in FULL:
            scores[f"tests_{function}"] += test["score"]
    return dict(scores)


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """A course copy with the one notebook, autograded once by nbgrader."""
    root = tmp_path_factory.mktemp("cell_ids")
    shutil.copytree(ROOT / "source" / A.id, root / "source" / A.id)
    shutil.copy(ROOT / "nbgrader_config.py", root)
    _write(_added_cell_with_the_tests_id(), root / "submitted" / STUDENT / A.id / A.notebook)
    done = subprocess.run(["nbgrader", "generate_assignment", A.id, "--force", "--log-level=ERROR"],
                          cwd=root, env=tool_env(), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    done = subprocess.run(["nbgrader", "autograde", A.id, "--log-level=WARN"], cwd=root,
                          env={**tool_env(), "AUTOGRADER_NBGRADER_JOBS": "1"},
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return root, done.stderr


@pytest.fixture(scope="module")
def standalone(course):
    root, _ = course
    path = root / "submitted" / STUDENT / A.id / A.notebook
    out = root / "standalone.json"
    done = subprocess.run([sys.executable, "-m", "autograder", "grade", str(path), "--json", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(out.read_text()), done.stderr


def test_standalone_grades_the_added_cell_as_an_ordinary_cell(standalone):
    results, _ = standalone
    assert _by_cell(results) == FULL, [t for t in results["tests"] if t["status"] != "passed"]


def test_nbgrader_records_the_standalone_score(course, standalone):
    root, _ = course
    with Gradebook(f"sqlite:///{root}/gradebook.db") as gb:
        sub = gb.find_submission_notebook(NOTEBOOK, A.id, STUDENT)
        recorded = {g.name: g.score for g in sub.grades if g.name.startswith("tests_")}
    assert recorded == _by_cell(standalone[0]) == FULL


def test_duplicate_id_warnings_name_the_notebook(course, standalone):
    """nbformat's DuplicateCellId warning names no notebook ("Non-unique cell id 'da4455bd'
    detected. Corrected to ..."): every line about the duplicate id, on either path, names the
    student's notebook, and nbgrader's run has one."""
    _, nbgrader_stderr = course
    duplicated = _course_id("tests_linear_forward")
    lines = [line for stderr in (nbgrader_stderr, standalone[1]) for line in stderr.splitlines()
             if duplicated in line or "DuplicateCellId" in line or "Non-unique cell id" in line]
    assert any(duplicated in line for line in nbgrader_stderr.splitlines()), nbgrader_stderr[-3000:]
    for line in lines:
        assert re.search(rf"{STUDENT}/{A.id}/{re.escape(A.notebook)}", line), line
        assert "DuplicateCellId" not in line and "_validate(" not in line, line
    assert "_validate(nbdict" not in nbgrader_stderr  # nbformat's source line after its warning


# --- a copy of solutions/ (review L-4) --------------------------------------------------------

def test_a_copy_of_solutions_gives_no_checksum_warning(tmp_path):
    """solutions/ holds the rubric cell `explain_step_rubric` with its mark scheme but without the
    `### BEGIN/END MARK SCHEME` lines (build.without_markers): a metadata-less copy of it got
    "Attribute 'checksum' for cell explain_step_rubric has changed!" from the sanitize steps, a
    warning with nothing to act on. The cell gets the gradebook's text back silently; a rubric the
    learner changed is still reported."""
    import logging

    from autograder.nbgrader.repair import DeduplicateCopies, RepairCellMetadata, RestoreGradeCells
    a = ASSIGNMENTS["06_putting_it_together"]
    shutil.copytree(ROOT / "source" / a.id, tmp_path / "source" / a.id)
    shutil.copy(ROOT / "nbgrader_config.py", tmp_path)
    done = subprocess.run(["nbgrader", "generate_assignment", a.id, "--force", "--log-level=ERROR"],
                          cwd=tmp_path, env=tool_env(), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    resources = {"nbgrader": {"assignment": a.id, "notebook": a.notebook.removesuffix(".ipynb"),
                              "student": "x", "db_url": f"sqlite:///{tmp_path}/gradebook.db"}}

    def sanitized(nb) -> tuple[nbformat.NotebookNode, list[str]]:
        said = []
        log = logging.getLogger(f"test_cell_ids.{id(said)}")
        log.addHandler(type("H", (logging.Handler,), {"emit": lambda s, r: said.append(r.getMessage())})())
        log.propagate = False
        for step in (RepairCellMetadata, DeduplicateCopies, RestoreGradeCells):
            nb, _ = step(log=log).preprocess(nb, copy.deepcopy(resources))
        return nb, said

    def rubric(nb):
        return next(c for c in nb.cells if _meta(c).get("grade_id") == "explain_step_rubric")

    copied = nbformat.read(ROOT / "solutions" / a.id / a.notebook, as_version=4)
    assert "### BEGIN MARK SCHEME" not in "".join(c.source for c in copied.cells)
    nb, said = sanitized(copy.deepcopy(copied))
    assert not [s for s in said if "checksum" in s], said
    assert "### BEGIN MARK SCHEME" in rubric(nb).source  # the gradebook's text, for the formgrader

    changed = copy.deepcopy(copied)
    cell = next(c for c in changed.cells if c.get("id") == rubric(nb).get("id"))
    cell.source += "\nFull marks for everyone."
    _, said = sanitized(changed)
    assert [s for s in said if "checksum" in s and "explain_step_rubric" in s], said

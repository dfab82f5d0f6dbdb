"""The real nbgrader pipeline gives the same scores as `python -m autograder grade`.

generate_assignment -> autograde (into nbgrader's SQLite gradebook) -> export and
generate_feedback, on the sample submissions whose code a notebook kernel survives.
"""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
from collections import defaultdict

import nbformat
import pytest
from nbgrader.api import Gradebook

from autograder.course import ASSIGNMENTS, ROOT, _source
from autograder.instructor.samples import one_per_path, path_through_nbgrader
from conftest import SCENARIOS, run, tool_env



# Every sample costs nbgrader seconds (a kernel, the whole notebook, its plots): CI runs one per
# path through nbgrader; NBGRADER_ALL=1 runs them all.
NBGRADER_SCENARIOS = [s for s in SCENARIOS if s.nbgrader]
if os.environ.get("NBGRADER_ALL") != "1":
    NBGRADER_SCENARIOS = one_per_path(NBGRADER_SCENARIOS)

pytestmark = pytest.mark.early


@pytest.fixture(scope="module")
def autograded(course, submitted):
    """The course, every sample student autograded by nbgrader (on every core:
    autograder/nbgrader/parallel.py)."""
    for s in NBGRADER_SCENARIOS:
        shutil.copytree(submitted / s.student / s.assignment,
                        course / "submitted" / s.student / s.assignment)
    # one nbgrader process per step for all the assignments (a glob of assignment ids)
    script = ("nbgrader generate_assignment '*' --force --log-level=ERROR"
              " && (nbgrader autograde '*' --log-level=ERROR || true)")
    done = subprocess.run(["bash", "-c", script], cwd=course, env=tool_env(),
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert done.returncode == 0, done.stderr
    assert "database is locked" not in done.stderr, done.stderr
    return course


@pytest.fixture(scope="module")
def gradebook_scores(autograded):
    """(student, assignment) -> {grade cell id: score}, read from nbgrader's gradebook."""
    scores = defaultdict(dict)
    with Gradebook(f"sqlite:///{autograded}/gradebook.db") as gb:
        for s in NBGRADER_SCENARIOS:
            notebook = ASSIGNMENTS[s.assignment].notebook.removesuffix(".ipynb")
            sub = gb.find_submission_notebook(notebook, s.assignment, s.student)
            for grade in sub.grades:
                scores[(s.student, s.assignment)][grade.name] = grade.score
    return scores


@pytest.mark.parametrize("scenario", NBGRADER_SCENARIOS, ids=lambda s: f"{s.assignment}/{s.student}")
def test_nbgrader_scores_equal_grader_scores(scenario, gradebook_scores, graded):
    ours = defaultdict(float)
    for r in graded[(scenario.student, scenario.assignment)].autograded:
        ours[f"tests_{r.function}"] += r.score
    theirs = {k: v for k, v in gradebook_scores[(scenario.student, scenario.assignment)].items()
              if k.startswith("tests_")}
    assert theirs == dict(ours)


def test_the_share_takes_every_path_once():
    """Each path through nbgrader that some sample takes (answers or release, added cells, flags,
    hostile code, points lost or not) is autograded, by one notebook; and in every assignment a
    sample that loses points (partial scores reach nbgrader's grade cells)."""
    if os.environ.get("NBGRADER_ALL") == "1":
        pytest.skip("every sample runs")
    every = [s for s in SCENARIOS if s.nbgrader]
    full = {s.assignment: s.expect for s in every if s.student == "solution"}

    def path(s):
        return path_through_nbgrader(s) + (s.expect == full[s.assignment],)
    assert sorted(map(path, NBGRADER_SCENARIOS)) == sorted(set(map(path, every)))
    for assignment in full:
        assert any(s.assignment == assignment and s.answers == "solution" and not path(s)[-1]
                   for s in NBGRADER_SCENARIOS), assignment


def test_export_lists_every_student(autograded):
    run("nbgrader", "export", "--log-level=ERROR", cwd=autograded)
    with open(autograded / "grades.csv") as f:
        rows = {(r["student_id"], r["assignment"]): float(r["score"]) for r in csv.DictReader(f)}
    for s in NBGRADER_SCENARIOS:
        assert (s.student, s.assignment) in rows


def test_generate_feedback_shows_the_hidden_test_messages(autograded):
    student = next(s for s in NBGRADER_SCENARIOS if s.student == "unanswered")
    run("nbgrader", "generate_feedback", student.assignment, "--student", student.student,
        "--log-level=ERROR", cwd=autograded)
    html = next((autograded / "feedback" / student.student / student.assignment).glob("*.html"))
    assert "not written yet" in html.read_text()


def test_formgrader_shows_the_written_answers_mark_scheme(autograded):
    """The rubric lives in an nbgrader task cell's mark scheme: gone from the release, put back by
    autograde into the notebook the formgrader shows the grader."""
    a = ASSIGNMENTS["06_putting_it_together"]

    def task(nb):
        return next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("task"))
    released = task(nbformat.read(ROOT / "release" / a.id / a.notebook, as_version=4))
    assert "Rubric" not in released.source and "grades it by hand" in released.source
    shown = task(nbformat.read(autograded / "autograded" / "unanswered" / a.id / a.notebook, as_version=4))
    assert "**Rubric (2 points).**" in shown.source


def test_flags_are_comments_on_the_flagged_cells(autograded):
    """A flag of the grader (autograder/rules/review.py) is the auto comment of that answer cell in
    nbgrader's gradebook, with the flagged line quoted; other cells keep nbgrader's comment."""
    flagged = [s for s in NBGRADER_SCENARIOS if s.flags]
    assert flagged, "one sample per path holds a sample with flags"
    for s in flagged:
        cells = {f.split(":")[0] for f in s.flags}
        with Gradebook(f"sqlite:///{autograded}/gradebook.db") as gb:
            notebook = ASSIGNMENTS[s.assignment].notebook.removesuffix(".ipynb")
            sub = gb.find_submission_notebook(notebook, s.assignment, s.student)
            comments = {c.name: c.auto_comment or "" for c in sub.comments}
        commented = set(cells)
        if "a cell you added" in cells:  # no nbgrader cell of its own: the first answer cell's
            cells.discard("a cell you added")
            first = _source(s.assignment).order[0]
            commented.add(first)
            assert "a cell you added, line " in comments[first], (s.student, comments[first])
        for cell in cells:
            assert comments[cell].startswith("Needs review"), (s.student, comments[cell])
            assert f"cell {cell}, line " in comments[cell]
        assert not any(text.startswith("Needs review") for name, text in comments.items()
                       if name not in commented)

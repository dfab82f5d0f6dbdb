"""The real nbgrader pipeline gives the same scores as `python -m autograder grade`.

generate_assignment -> autograde (into nbgrader's SQLite gradebook) -> export and
generate_feedback, on the sample submissions whose code a notebook kernel survives.
"""

from __future__ import annotations

import csv
import shutil
from collections import defaultdict

import pytest
from nbgrader.api import Gradebook

from autograder.course import ASSIGNMENTS
from conftest import BUILT, SCENARIOS, run

NBGRADER_SCENARIOS = [s for s in SCENARIOS if s.nbgrader]


@pytest.fixture(scope="module")
def autograded(course, submitted):
    for assignment in BUILT:
        run("nbgrader", "generate_assignment", assignment, "--force", "--log-level=ERROR", cwd=course)
    for s in NBGRADER_SCENARIOS:
        shutil.copytree(submitted / s.student / s.assignment,
                        course / "submitted" / s.student / s.assignment)
    for assignment in BUILT:
        run("nbgrader", "autograde", assignment, "--log-level=ERROR", cwd=course)
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
    for r in graded[(scenario.student, scenario.assignment)].results:
        ours[f"tests_{r.function}"] += r.score
    theirs = {k: v for k, v in gradebook_scores[(scenario.student, scenario.assignment)].items()
              if k.startswith("tests_")}
    assert theirs == dict(ours)


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

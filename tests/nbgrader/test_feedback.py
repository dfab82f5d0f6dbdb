"""What `nbgrader autograde` and `generate_feedback` give an instructor and a learner to open.

One course copy, section 6 (the written answer and its mark scheme), three learners, one
autograde run (about 10 s a notebook): the feedback holds no mark scheme and no hidden-test
source; learner output that would run script (HTML, JavaScript, SVG, markdown) is sanitized in
the stored notebook the formgrader shows and in the feedback, checked in headless Chromium.
"""

from __future__ import annotations

import shutil
import subprocess

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell
from nbgrader.api import Gradebook

from autograder.course import ASSIGNMENTS, ROOT
from autograder.instructor.samples import Scenario, submission_notebook
from conftest import tool_env

A = ASSIGNMENTS["06_putting_it_together"]
PWNED = "window.pwned = (window.pwned || []).concat"
HOSTILE_CODE = f'''
from IPython.display import HTML, Javascript, Markdown, SVG, display
display(HTML('<img src=x onerror="{PWNED}([\\'html\\']); document.title=\\'pwned\\'">'))
display(Javascript("{PWNED}(['js']); document.title='pwned'"))
display(SVG('<svg xmlns="http://www.w3.org/2000/svg" onload="{PWNED}([\\'svg\\'])"><rect width="4" height="4"/></svg>'))
display(Markdown('<script>{PWNED}(["markdown-output"])</script>'))
display({{"text/html": "<script>{PWNED}(['raw-html'])</script>"}}, raw=True)
'''
HOSTILE_MARKDOWN = f'<img src=x onerror="{PWNED}([\'markdown-cell\'])"> and <b>bold</b>'
WRITTEN = "I chose zero_grad: `.grad` accumulates across backward() calls, so I clear it."
GRADER_ONLY = ["MARK SCHEME", "Rubric (2 points)", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS",
               "autograder.nbgrader.kernel", "hidden_tests(", "No points for restating the question"]


def _answered(nb, text: str):
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "explain_step")
    cell.source = text
    return nb


def _students() -> dict[str, nbformat.NotebookNode]:
    untouched = nbformat.read(ROOT / "release" / A.id / A.notebook, as_version=4)
    honest = _answered(submission_notebook(Scenario("honest", A.id, "", {})), WRITTEN)
    hostile = _answered(submission_notebook(Scenario("hostile", A.id, "", {})),
                        f"<script>{PWNED}(['answer'])</script> " + WRITTEN)
    at = next(i for i, c in enumerate(hostile.cells)
              if c.metadata.get("nbgrader", {}).get("grade_id") == "tests_train_mlp")
    hostile.cells[at:at] = [new_code_cell(HOSTILE_CODE), new_markdown_cell(HOSTILE_MARKDOWN)]
    return {"untouched": untouched, "honest": honest, "hostile": hostile}


def nbgrader(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run(["nbgrader", *args], cwd=cwd, env=tool_env(), capture_output=True,
                          text=True, timeout=900)


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """A fresh course copy (no gradebook, no generate_assignment: as cloned), its three learners
    autograded and given feedback."""
    root = tmp_path_factory.mktemp("feedback-course")
    shutil.copytree(ROOT / "source", root / "source")
    shutil.copy(ROOT / "nbgrader_config.py", root)
    for student, nb in _students().items():
        folder = root / "submitted" / student / A.id
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / A.notebook)
    autograded = nbgrader("autograde", A.id, "--log-level=WARN", cwd=root)
    assert autograded.returncode == 0, autograded.stderr
    feedback = nbgrader("generate_feedback", A.id, "--log-level=WARN", cwd=root)
    assert feedback.returncode == 0, feedback.stderr
    (root / "exchange").mkdir(mode=0o777)
    released = nbgrader("release_feedback", A.id, "--log-level=WARN", cwd=root)
    return root, autograded.stderr, feedback.stderr, released


def _feedback(root, student: str) -> str:
    return (root / "feedback" / student / A.id / A.notebook.replace(".ipynb", ".html")).read_text()


def _autograded(root, student: str):
    return nbformat.read(root / "autograded" / student / A.id / A.notebook, as_version=4)


@pytest.mark.parametrize("student", ["untouched", "honest", "hostile"])
def test_feedback_holds_no_mark_scheme_and_no_hidden_test_source(course, student):
    html = _feedback(course[0], student)
    assert [text for text in GRADER_ONLY if text in html] == []
    assert "Hidden tests for" not in html or "did not run" not in html
    assert ("train_mlp is not written yet" in html) == (student == "untouched")
    assert "white-space: pre-wrap" in html  # long FAIL lines wrap instead of being clipped


def test_the_formgrader_shows_the_mark_scheme_without_raw_markers(course):
    task = next(c for c in _autograded(course[0], "honest").cells
                if c.metadata.get("nbgrader", {}).get("task"))
    assert "**Rubric (2 points).**" in task.source
    assert "### BEGIN MARK SCHEME" not in task.source and "### END MARK SCHEME" not in task.source


def test_stored_learner_output_is_sanitized(course):
    nb = _autograded(course[0], "hostile")
    kinds = {key for c in nb.cells if c.cell_type == "code" for o in c.outputs
             for key in o.get("data", {})}
    assert kinds.isdisjoint({"application/javascript", "image/svg+xml"}), kinds
    text = "\n".join([c.source for c in nb.cells if c.cell_type != "code"]
                     + [nbformat.writes(nbformat.from_dict(o)) for c in nb.cells
                        if c.cell_type == "code" for o in c.outputs])
    for active in ("<script", "<img src=x onerror", "<svg", "onload="):
        assert active not in text, active
    assert "<b>bold</b>" in text  # harmless markup stays


def _open(page, path) -> dict:
    page.goto(path.as_uri())
    page.wait_for_load_state("load")
    page.wait_for_timeout(500)  # an onerror handler runs once the broken image fails
    return page.evaluate("() => ({title: document.title, pwned: window.pwned || null})")


def test_no_learner_script_runs_in_the_feedback_or_the_stored_notebook(course, tmp_path):
    from nbconvert import HTMLExporter
    from test_browser import CHROMIUM, CHROMIUM_ARGS, MISSING
    if MISSING:
        pytest.skip(MISSING)
    from playwright.sync_api import sync_playwright
    root = course[0]
    feedback = root / "feedback" / "hostile" / A.id / A.notebook.replace(".ipynb", ".html")
    # the stored notebook, rendered by nbconvert with no sanitizing of its own (as the formgrader)
    stored = tmp_path / "stored.html"
    stored.write_text(HTMLExporter().from_notebook_node(_autograded(root, "hostile"))[0])
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            for path in (feedback, stored):
                seen = _open(page, path)
                assert seen["pwned"] is None and seen["title"] != "pwned", (path.name, seen)
            _open(page, feedback)
            clipped = page.evaluate("""() => [...document.querySelectorAll('div.output_area pre')]
                .filter(p => getComputedStyle(p).whiteSpace !== 'pre-wrap'
                             || p.scrollWidth > p.clientWidth + 1).length""")
            assert clipped == 0  # long lines wrap inside their box
            # the check can fail: the same payload in an unsanitized page does run
            raw = tmp_path / "raw.html"
            raw.write_text(f'<html><body>{HOSTILE_MARKDOWN}</body></html>')
            assert _open(page, raw)["pwned"] == ["markdown-cell"]
        finally:
            browser.close()


def test_autograde_reports_no_changed_checksum_for_untouched_cells(course):
    """nbgrader warned "Attribute 'checksum' for cell tests_train_mlp ... has changed!" for every
    released test cell and the rubric: the release clears hidden tests and the mark scheme."""
    log = course[1]
    assert "has changed" not in log, log
    assert "No assignment" not in log


def test_only_an_answered_written_answer_needs_manual_grading(course, monkeypatch):
    monkeypatch.setenv("PATH", tool_env()["PATH"])
    notebook = A.notebook.removesuffix(".ipynb")
    with Gradebook(f"sqlite:///{course[0]}/gradebook.db") as gb:
        def grade(student, name):
            sub = gb.find_submission_notebook(notebook, A.id, student)
            return next(g for g in sub.grades if g.name == name), sub
        written, sub = grade("untouched", "explain_step")
        assert (written.auto_score, written.needs_manual_grade) == (0, False)
        assert not sub.needs_manual_grade
        for student in ("honest", "hostile"):
            written, sub = grade(student, "explain_step")
            assert written.auto_score is None and written.needs_manual_grade and sub.needs_manual_grade
            assert not grade(student, "explain_step_rubric")[0].needs_manual_grade
        assert grade("honest", "tests_train_mlp")[0].score == 6


def test_the_standalone_graders_results_hold_no_grader_only_text(course):
    """`python -m autograder grade NB --json`: the same learners, the same rule."""
    import json

    from autograder.grade.batch import grade_notebook
    from autograder.grade.results import results_json
    for student in ("untouched", "hostile"):
        graded = grade_notebook(course[0] / "submitted" / student / A.id / A.notebook)
        text = json.dumps(results_json(graded.results))
        assert [t for t in GRADER_ONLY if t in text] == [], student
        assert "/autograder/" not in text and "Traceback" not in text, student


def test_no_warning_an_instructor_cannot_act_on(course):
    """autograde prints no SQLAlchemy SAWarning, generate_feedback no unrecognized config option
    and no missing alternative text (issue 32)."""
    _, autograded, feedback, _ = course
    assert "SAWarning" not in autograded, autograded[-2000:]
    assert "WARNING" not in feedback, feedback[-2000:]


def test_release_feedback_works_for_hand_placed_submissions(course):
    """The submissions were placed in submitted/ by hand (no timestamp.txt from `nbgrader submit`):
    release_feedback releases every learner's feedback instead of stopping with FileNotFoundError."""
    root, _, _, released = course
    assert released.returncode == 0, released.stderr[-2000:]
    assert len(list((root / "exchange").rglob("feedback/*.html"))) == 3


@pytest.mark.parametrize("student", ["honest", "hostile"])
def test_feedback_has_no_bare_score_and_every_figure_is_described(course, student):
    import re
    html = _feedback(course[0], student)
    assert re.findall(r"<img(?![^>]*\balt=)", html) == []
    assert "No description has been provided" not in html
    nb = _autograded(course[0], student)  # nbgrader reads the score from an Out[] there
    tests = [c for c in nb.cells if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("grade")
             and not c.metadata["nbgrader"].get("solution")]
    assert all(any(o.output_type == "execute_result" for o in c.outputs) for c in tests)
    learners = sum(o.output_type == "execute_result" for c in nb.cells if c.cell_type == "code"
                   and c not in tests for o in c.get("outputs", []))
    assert html.count("jp-OutputArea-executeResult") == learners  # none under the test results

"""Class report (CONTRACT.md, "Class report"): `python -m autograder report DIR --out REPORT_DIR`
on a small class graded by the batch path: it names the most frequent mistake, has its figures
(embedded PNGs), is self-contained, escapes what learners chose, and reads old result files."""

from __future__ import annotations

import base64
import html
import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import nbformat
import pytest

from autograder.instructor.build import tool_env
from autograder.course import ASSIGNMENTS, ROOT
from autograder.instructor.samples import load_scenarios, submission_notebook

CLASS = {"01_linear_algebra": ["solution", "unanswered", "bias_required", "no_1d_input",
                               "w_not_transposed", "w_untransposed_raises"],
         "02_activation_functions": ["solution", "collapse_bias_sum"]}
ODD = "<b>eve & co"
"""A student folder name that is HTML: the report must show it, not render it."""


def cli(*args, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "autograder", *map(str, args)], cwd=ROOT,
                          env={**tool_env(), "AUTOGRADER_GRADER_VERSION": "test-report"},
                          capture_output=True, text=True)
    if check:
        assert done.returncode == 0, done.stdout + done.stderr
    return done


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> Path:
    """A batch's DIR for a small class of sample submissions."""
    root = tmp_path_factory.mktemp("class")
    submitted = root / "submitted"
    for assignment, students in CLASS.items():
        a = ASSIGNMENTS[assignment]
        scenarios = {s.student: s for s in load_scenarios(assignment)}
        for student in students:
            out = submitted / student / assignment / a.notebook
            out.parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(submission_notebook(scenarios[student]), out)
    odd = submitted / ODD / "01_linear_algebra" / "linear_algebra.ipynb"
    odd.parent.mkdir(parents=True)
    odd.write_text("{ this is not json")
    cli("grade", submitted, "--out", root / "out", "--quiet", "--jobs", "2")
    return root / "out"


def _page(graded: Path, report: Path) -> str:
    done = cli("report", graded, "--out", report)
    page = report / "index.html"
    assert str(page) in done.stdout
    return page.read_text()


def test_report_names_the_most_frequent_mistake(graded, tmp_path):
    results = [json.loads(p.read_text()) for p in graded.glob("*/*.json")]
    assert all("seconds" in r["extra_data"] for r in results if r["tests"]), \
        "batch results carry extra_data.seconds"
    counts = Counter()
    for r in results:
        counts.update({h for t in r["tests"] if t["status"] == "failed"
                       for h in re.findall(r"Hint: (.+)", t["output"])})
    n = max(counts.values())
    assert n > 1, "the sample class has a mistake that more than one notebook makes"

    page = _page(graded, tmp_path / "report")
    box = re.search(r"<div class='key'><b>Most frequent mistake</b>(.*?)</div>", page, re.S)
    assert box and f"({n} notebooks" in box[1]
    tops = [hint for hint, count in counts.items() if count == n and html.escape(hint) in box[1]]
    assert len(tops) == 1, "the box names one of the mistakes most notebooks make"
    top = tops[0]
    assert page.count(html.escape(top)) >= 2, "also in the table of mistakes"
    for function in ("matmul", "linear_forward", "relu", "collapse_linear"):
        assert f"<code>{function}</code>" in page
    assert "Slowest notebooks" in page and "seconds" in page


def test_report_figures_are_embedded_pngs_and_self_contained(graded, tmp_path):
    page = _page(graded, tmp_path / "report")
    images = re.findall(r"<img alt='([^']*)' src='([^']*)'>", page)
    assert len(images) == 4, [alt for alt, _ in images]  # scores, pass rates, mistakes, slowest
    for alt, src in images:
        assert src.startswith("data:image/png;base64,"), alt
        assert base64.b64decode(src.split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"
    outside = re.findall(r"(?:src|href)\s*=\s*['\"]?(?!data:)([^'\" >]+)", page, re.I)
    assert outside == [], outside
    assert "<script" not in page.lower() and "<link" not in page.lower()
    assert "url(" not in page and "@import" not in page
    # and the browser is told so: nothing in the page may fetch anything (issue 37)
    assert "<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; img-src data:; " \
           "style-src 'unsafe-inline'\">" in page
    assert sorted(p.name for p in (tmp_path / "report").iterdir()) == ["index.html"]
    # learner-chosen text is shown escaped, never as markup
    assert "<b>eve" not in page and html.escape(ODD) in page
    assert "not gradable" in page and "could not be graded" in page


def test_report_reads_results_without_timing(graded, tmp_path):
    """Result files written before extra_data.seconds existed, or unreadable ones."""
    old = tmp_path / "old"
    for path in graded.glob("*/*.json"):
        data = json.loads(path.read_text())
        data.get("extra_data", {}).pop("seconds", None)
        (old / path.parent.name).mkdir(parents=True, exist_ok=True)
        (old / path.parent.name / path.name).write_text(json.dumps(data))
    (old / "zed").mkdir()
    (old / "zed" / "01_linear_algebra.json").write_text("{ half a file")
    done = cli("report", old)  # default REPORT_DIR: DIR/report
    assert "zed/01_linear_algebra.json: not a readable result file" in done.stderr
    page = (old / "report" / "index.html").read_text()
    assert "carry no timing" in page and "Most frequent mistake" in page
    assert len(re.findall(r"<img ", page)) == 3


def test_report_errors(tmp_path):
    done = cli("report", tmp_path / "nothing", check=False)
    assert done.returncode == 2 and "no such folder" in done.stderr
    (tmp_path / "empty").mkdir()
    done = cli("report", tmp_path / "empty", check=False)
    assert done.returncode == 2 and "no <student>/<assignment>.json" in done.stderr

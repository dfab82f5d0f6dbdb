"""Every CSV the pack writes opens in a spreadsheet as data: no live formulas, one field per name.

Student names that a spreadsheet would run as formulas (OWASP's CSV injection list) or that need
quoting, through `python -m autograder grade --out` and through `nbgrader export` (the course's
nbgrader_config.py), read back with the csv module.
"""

from __future__ import annotations

import csv
import shutil
import subprocess
import sys

import nbformat
import pytest
from nbgrader.api import Gradebook

from autograder.course import ASSIGNMENTS, ROOT
from autograder.report import spreadsheet_safe
from conftest import tool_env

A = ASSIGNMENTS["01_linear_algebra"]
FORMULAS = ['=HYPERLINK("http://x","y")', "=2+3", "+1+2", "-3+4", "@SUM(1+1)", "\tab", "\r=1+1"]
QUOTED = ["a,b", 'a"b', "a\nb"]
ON_DISK = [n.replace("/", "\\") for n in FORMULAS] + QUOTED  # no "/" in a folder name


def _inert(field: str, name: str) -> None:
    if name.startswith(("=", "+", "-", "@", "\t", "\r")):
        assert field == "'" + name
    else:
        assert field == name


def test_spreadsheet_safe_quotes_text_only():
    assert [spreadsheet_safe(v) for v in ("=1", "-2", "a-b", "", 3.5, 0, -0.5)] == \
        ["'=1", "'-2", "a-b", "", 3.5, 0, -0.5]


@pytest.mark.parametrize("separator", [";", "\t", "|", ","])
def test_a_formula_after_any_usual_separator_is_inert(separator):
    """`x;=1+2;` is the live cell =1+2 where `;` separates fields (issue 29): every part of a
    cell, split at any usual separator, starts as text."""
    name = f"x{separator}=1+2{separator}y{separator}@SUM(1){separator}a-b"
    safe = spreadsheet_safe(name)
    for part in safe.split(separator):
        assert not part.startswith(("=", "+", "-", "@")), (part, safe)
    assert safe.replace("'", "") == name


def test_grades_csv_of_the_batch_grader(tmp_path):
    submitted = tmp_path / "submitted"
    release = ROOT / "release" / A.id / A.notebook
    for name in ON_DISK:
        (submitted / name / A.id).mkdir(parents=True)
        shutil.copy(release, submitted / name / A.id / A.notebook)
    done = subprocess.run([sys.executable, "-m", "autograder", "grade", str(submitted),
                           "--out", str(tmp_path / "out")], capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stderr
    with open(tmp_path / "out" / "grades.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(ON_DISK)
    by_name = {r["student"].removeprefix("'") if r["student"].startswith("'") else r["student"]: r
               for r in rows}
    for name in ON_DISK:
        row = by_name[name]
        _inert(row["student"], name)
        assert row["assignment"] == A.id
        assert float(row["score"]) == 0 and float(row["max_score"]) > 0


def test_nbgrader_export(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", tool_env()["PATH"])  # a new gradebook runs `alembic`
    shutil.copy(ROOT / "nbgrader_config.py", tmp_path)
    names = FORMULAS + QUOTED
    with Gradebook(f"sqlite:///{tmp_path}/gradebook.db") as gb:
        gb.add_assignment(A.id)
        gb.add_assignment("=1+1")
        for i, name in enumerate(names):
            gb.add_student(name, first_name="-x" if i % 2 else "a,b", last_name='@"q"',
                           email="=cmd|' /C calc'!A0")
            gb.add_submission(A.id, name)
    done = subprocess.run([sys.executable, "-m", "nbgrader", "export", "--log-level=ERROR"], cwd=tmp_path,
                          env=tool_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    with open(tmp_path / "grades.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 2 * len(names)
    students = {r["student_id"] for r in rows}
    assert students == {("'" + n if n.startswith(("=", "+", "-", "@", "\t", "\r")) else n)
                        for n in names}
    for row in rows:
        assert row["assignment"] in (A.id, "'=1+1")
        assert row["email"] == "'=cmd|' /C calc'!A0" and row["last_name"] == "'@\"q\""
        assert row["first_name"] in ("'-x", "a,b")
        for column in ("raw_score", "late_submission_penalty", "score", "max_score"):
            float(row[column])  # numbers, not quoted text
        assert not any(v.startswith(("=", "+", "-", "@", "\t", "\r")) for v in row.values())

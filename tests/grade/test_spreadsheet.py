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
from autograder.grade.results import spreadsheet_safe, write_grades_csv
from conftest import tool_env

A = ASSIGNMENTS["01_linear_algebra"]
FORMULAS = ['=HYPERLINK("http://x","y")', "=2+3", "+1+2", "-3+4", "@SUM(1+1)", "\tab", "\r=1+1"]
QUOTED = ["a,b", 'a"b', "a\nb"]
# Whitespace a spreadsheet may skip before it reads the rest of a cell as a formula (issue 37):
# every character Python counts as a space (ASCII, NEL, NBSP, Ogham, the U+2000 spaces, line and
# paragraph separators, ideographic space) and the zero-width ones (ZWSP, ZWNJ, ZWJ, word joiner,
# BOM, Mongolian vowel separator).
SPACES = "".join(chr(i) for i in range(0x110000) if chr(i).isspace()) + \
    "\u180e\u200b\u200c\u200d\u2060\ufeff"
STARTS = "=+-@\uff1d\uff0b\uff0d\uff20"  # and fullwidth ＝ ＋ － ＠
LEADERS = [" ", "   ", "\t", "\r", "\n", "\r\n", "\u00a0", "\u2003", "\u3000", "\u200b", "\ufeff",
           " \u00a0\t"]
SPACED = [' =HYPERLINK("http://x","y")', "\u00a0=1+1", "\n=1+1", "\u3000@SUM(1)", "\uff1d1+1",
          "\ufeff+1"]
ON_DISK = [n.replace("/", "\\") for n in FORMULAS + SPACED] + QUOTED  # no "/" in a folder name


def _live(text: str) -> bool:
    """Whether a spreadsheet could read the cell `text` as a formula: it starts with = + - @ (or
    their fullwidth forms) once any leading whitespace is skipped, or with a tab or CR."""
    return text.startswith(("\t", "\r")) or text.lstrip(SPACES)[:1] in tuple(STARTS)


def _inert(field: str, name: str) -> None:
    if "\t" in name:  # a tab also separates fields: each part is inert, a quote added where needed
        assert field.replace("'", "") == name.replace("'", "")
        assert not any(_live(part) for part in field.split("\t")), field
        assert field.startswith("'") == _live(name)
    else:
        assert field == ("'" + name if _live(name) else name)
    assert not _live(field)


def test_spreadsheet_safe_quotes_text_only():
    assert [spreadsheet_safe(v) for v in ("=1", "-2", "a-b", "", 3.5, 0, -0.5)] == \
        ["'=1", "'-2", "a-b", "", 3.5, 0, -0.5]


@pytest.mark.parametrize("leader", LEADERS + list(SPACES),
                         ids=lambda s: "+".join(f"U{ord(c):04X}" for c in s))
@pytest.mark.parametrize("start", list(STARTS))
def test_a_formula_after_leading_whitespace_is_inert(leader, start):
    """` =HYPERLINK(...)` is a live formula in a spreadsheet that skips the space (issue 37):
    any run of whitespace before = + - @ or a fullwidth ＝ ＋ － ＠ gets the quote too, in front
    of the whitespace, alone and after each usual separator."""
    name = f"{leader}{start}HYPERLINK(\"http://x\")"
    safe = spreadsheet_safe(name)
    if "\t" in leader:  # a tab also separates fields: the part after it is quoted as well
        assert safe.startswith("'") and safe.replace("'", "") == name
        assert not any(_live(part) for part in safe.split("\t")), safe
    else:
        assert safe == "'" + name
    for separator in (";", ",", "|", "\t"):
        safe = spreadsheet_safe(f"x{separator}{name}")
        assert safe.startswith(f"x{separator}'"), (separator, safe)
        assert not any(_live(part) for part in safe.split(separator)), (separator, safe)
        assert safe.replace("'", "") == f"x{separator}{name}"


@pytest.mark.parametrize("name", [" abc", "\u00a0x-y", "a = b", "x@y", "\u3000名前", "ab\uff1d"])
def test_whitespace_before_other_text_is_left_as_it_is(name):
    assert spreadsheet_safe(name) == name


def test_grades_csv_writer_neutralises_every_formula_start(tmp_path):
    """The batch grader's grades.csv, written directly: every name a spreadsheet would read as a
    formula, however it starts, reads back as the name behind a single quote."""
    names = FORMULAS + SPACED + [leader + start + "1+1" for leader in LEADERS for start in STARTS]
    write_grades_csv([(name, name, 1.0, 2.0) for name in names], tmp_path / "grades.csv")
    with open(tmp_path / "grades.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(names)
    for name, row in zip(names, rows):
        _inert(row["student"], name)
        _inert(row["assignment"], name)
        assert (row["score"], row["max_score"]) == ("1", "2")


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
    by_name = {r["student"].removeprefix("'"): r for r in rows}
    for name in ON_DISK:
        row = by_name[name]
        _inert(row["student"], name)
        assert row["assignment"] == A.id
        assert float(row["score"]) == 0 and float(row["max_score"]) > 0


def test_nbgrader_export(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", tool_env()["PATH"])  # a new gradebook runs `alembic`
    shutil.copy(ROOT / "nbgrader_config.py", tmp_path)
    names = FORMULAS + SPACED + QUOTED
    with Gradebook(f"sqlite:///{tmp_path}/gradebook.db") as gb:
        gb.add_assignment(A.id)
        gb.add_assignment("=1+1")
        for i, name in enumerate(names):
            gb.add_student(name, first_name="-x" if i % 2 else "a,b", last_name='\u00a0@"q"',
                           email=" =cmd|' /C calc'!A0")
            gb.add_submission(A.id, name)
    done = subprocess.run([sys.executable, "-m", "nbgrader", "export", "--log-level=ERROR"], cwd=tmp_path,
                          env=tool_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    with open(tmp_path / "grades.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 2 * len(names)
    students = {r["student_id"] for r in rows}
    assert students == {("'" + n if _live(n) else n) for n in names}
    for row in rows:
        assert row["assignment"] in (A.id, "'=1+1")
        assert row["email"] == "' =cmd|' /C calc'!A0" and row["last_name"] == "'\u00a0@\"q\""
        assert row["first_name"] in ("'-x", "a,b")
        for column in ("raw_score", "late_submission_penalty", "score", "max_score"):
            float(row[column])  # numbers, not quoted text
        assert not any(_live(v) for v in row.values())

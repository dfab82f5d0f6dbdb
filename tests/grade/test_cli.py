"""`python -m autograder grade`: the contract's command line, output format and exit status."""

from __future__ import annotations

import csv
import json
import shutil

import nbformat

from autograder.course import ASSIGNMENTS, ROOT
from conftest import run

SOURCE = ASSIGNMENTS["01_linear_algebra"].source


def grade(*args, cwd):
    return run("python", "-m", "autograder", "grade", *map(str, args), cwd=cwd, check=False)


def test_grades_a_notebook_whatever_its_name(tmp_path):
    renamed = tmp_path / "my homework (final).ipynb"
    shutil.copy(ROOT / "release" / "01_linear_algebra" / "linear_algebra.ipynb", renamed)
    done = grade(renamed, "--json", tmp_path / "out.json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    result = json.loads((tmp_path / "out.json").read_text())
    assert result["score"] == 0 and result["max_score"] == 11
    for test in result["tests"]:
        assert set(test) == {"name", "score", "max_score", "status", "output", "visibility"}
        assert test["name"].split(":")[0] in ("matmul", "linear_forward")
        assert test["status"] == "failed" and test["output"]


def test_recognises_a_notebook_without_nbgrader_metadata(tmp_path):
    nb = nbformat.read(SOURCE, as_version=4)
    for cell in nb.cells:
        cell.metadata.pop("nbgrader", None)
    path = tmp_path / "copy.ipynb"
    nbformat.write(nb, path)
    done = grade(path, "--json", tmp_path / "out.json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    result = json.loads((tmp_path / "out.json").read_text())
    assert result["score"] == result["max_score"] == 11


def test_missing_file_is_one_line_on_stderr(tmp_path):
    done = grade(tmp_path / "nope.ipynb", "--json", tmp_path / "out.json", cwd=tmp_path)
    assert done.returncode != 0
    assert done.stderr.strip().count("\n") == 0 and "no such file" in done.stderr
    assert not (tmp_path / "out.json").exists()


def test_foreign_notebook_is_refused(tmp_path):
    path = tmp_path / "other.ipynb"
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("def f(x):\n    return x")])
    nbformat.write(nb, path)
    done = grade(path, "--json", tmp_path / "out.json", cwd=tmp_path)
    assert done.returncode != 0 and "not a notebook of this course" in done.stderr
    assert done.stderr.strip().count("\n") == 0
    (tmp_path / "junk.ipynb").write_text("{not json")
    done = grade(tmp_path / "junk.ipynb", cwd=tmp_path)
    assert done.returncode != 0 and done.stderr.strip().count("\n") == 0


def test_batch_writes_json_per_submission_and_grades_csv(submitted, tmp_path):
    batch, out = tmp_path / "submitted", tmp_path / "out"
    for student in ("solution", "unanswered"):
        shutil.copytree(submitted / student, batch / student)
    done = grade(batch, "--out", out, "--jobs", "2", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    with open(out / "grades.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 2 * len(list((batch / "solution").iterdir()))
    assert set(rows[0]) == {"student", "assignment", "score", "max_score"}
    for row in rows:
        data = json.loads((out / row["student"] / f"{row['assignment']}.json").read_text())
        assert float(row["score"]) == data["score"]
    for row in rows:
        if row["student"] == "solution":
            data = json.loads((out / "solution" / f"{row['assignment']}.json").read_text())
            failed = [t["name"] for t in data["tests"] if t["status"] != "passed"]
            assert not failed, row["assignment"]  # written answers too: max_score 0, "passed"
            assert data["score"] == data["max_score"] == float(row["max_score"]) > 0


def test_the_demo_ends_with_one_line_saying_whether_the_grades_agree():
    from autograder.instructor.demo import verdict
    assert verdict(89, 0, 0) == "All grades agree: 89 of 89 notebooks, nbgrader and python -m autograder."
    assert verdict(89, 2, 1).startswith("GRADES DIFFER: 2 of 89 notebooks")
    assert "1 more where the notebook's kernel dies" in verdict(88, 0, 1)

"""Gradescope (CONTRACT.md, "Gradescope"): the zip of `python -m autograder gradescope`, unpacked
into a scratch root bound at /autograder, graded by its own `run_autograder`.

The test does not run setup.sh's installs: the scratch root is seen through bubblewrap, next to
the system and this checkout's .venv (read-only); `run_autograder` uses the venv through
$AUTOGRADER_PYTHON. The venv's editable install of the package still points at this checkout,
which is not visible there: the grader that runs is the zip's (run_autograder starts it in
/autograder/source), and so is the jail's (it imports the running package's files)."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest

from autograder.instructor.build import tool_env
from autograder.course import ASSIGNMENTS, ROOT
from autograder.instructor.samples import load_scenarios, submission_notebook

A1, A6 = "01_linear_algebra", "06_putting_it_together"

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")


def build(assignment: str, out: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "autograder", "gradescope", assignment,
                           "--out", str(out), *extra], cwd=ROOT, env=tool_env(),
                          capture_output=True, text=True)


def unpack(zip_path: Path, root: Path) -> None:
    """What Gradescope does with the zip: its contents in root/source, run_autograder copied to
    root/, empty submission/ and results/ (file modes kept, as unzip does)."""
    source = root / "source"
    with zipfile.ZipFile(zip_path) as z:
        for info in z.infolist():
            z.extract(info, source)
            mode = (info.external_attr >> 16) & 0o777
            if mode:
                os.chmod(source / info.filename, mode)
    shutil.copy2(source / "run_autograder", root / "run_autograder")
    (root / "submission").mkdir()
    (root / "results").mkdir()


def run_autograder(root: Path) -> subprocess.CompletedProcess:
    """`/autograder/run_autograder` with `root` bound at /autograder, the system and the venv
    read-only, nothing else of this machine."""
    command = ["bwrap", "--die-with-parent", "--unshare-pid", "--unshare-ipc",
               "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    for top in ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc"):
        path = Path(top)
        if path.is_symlink():
            command += ["--symlink", os.readlink(path), top]
        elif path.is_dir():
            command += ["--ro-bind", top, top]
    for prefix in sorted({str(Path(sys.base_prefix).resolve()), sys.prefix}):
        command += ["--ro-bind", prefix, prefix]
    command += ["--bind", str(root), "/autograder", "--chdir", "/autograder", "--clearenv",
                "--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
                "--setenv", "HOME", "/tmp", "--setenv", "AUTOGRADER_PYTHON",
                str(Path(sys.prefix) / "bin" / "python")]
    if os.geteuid() == 0:
        command += ["--cap-add", "ALL"]  # the jail inside is built by root, as on Gradescope
    command += ["--", "/autograder/run_autograder"]
    return subprocess.run(command, capture_output=True, text=True, timeout=600)


def grade_here(notebook: Path, out: Path) -> dict:
    done = subprocess.run([sys.executable, "-m", "autograder", "grade", str(notebook), "--json",
                           str(out)], cwd=ROOT, env=tool_env(), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return json.loads(out.read_text())


def scores(result: dict) -> tuple:
    return (result["score"], result["max_score"],
            sorted((t["name"], t["score"], t["max_score"], t["status"]) for t in result["tests"]))


@pytest.fixture(scope="module")
def zips(tmp_path_factory) -> dict[str, Path]:
    out = {}
    for assignment in (A1, A6):
        path = tmp_path_factory.mktemp("zip") / "autograder.zip"
        done = build(assignment, path)
        assert done.returncode == 0, done.stderr
        out[assignment] = path
    return out


def test_zip_layout(zips):
    with zipfile.ZipFile(zips[A1]) as z:
        names = set(z.namelist())
        modes = {i.filename: (i.external_attr >> 16) & 0o777 for i in z.infolist()}
        setup = z.read("setup.sh").decode()
        config = json.loads(z.read("gradescope.json"))
    assert {"setup.sh", "run_autograder", "pyproject.toml", "constraints.txt",
            "source/01_linear_algebra/linear_algebra.ipynb", "autograder/tests/test_01_linear_algebra.py",
            "autograder/jail/inside/server.py", "autograder/instructor/gradescope.py"} <= names
    assert modes["setup.sh"] & 0o111 and modes["run_autograder"] & 0o111
    hidden = {n for n in names if n.startswith("autograder/tests/test_")}
    assert hidden == {"autograder/tests/test_01_linear_algebra.py"}, "only this assignment's hidden tests"
    assert not any(n.startswith(("source/02", "release/", "solutions/", "samples/", "tests/"))
                   for n in names)
    assert not any("__pycache__" in n for n in names)
    pin = next(line for line in (ROOT / "constraints.txt").read_text().splitlines()
               if line.startswith("torch=="))
    assert pin in setup and "apt-get install" in setup and "bubblewrap" in setup
    assert "-e \"$SOURCE\"" in setup
    from autograder.instructor.gradescope import grading_requirements
    assert grading_requirements() and all(f"'{r}'" in setup for r in grading_requirements())
    assert "nbgrader" not in setup and "jupyterlab" not in setup
    assert "://" not in setup, "no index is named unless --torch-index-url is given"
    assert config["assignment"] == A1 and config["jail"] is True and config["max_score"] == 11


def test_bad_arguments(tmp_path):
    done = build("99_nothing", tmp_path / "a.zip")
    assert done.returncode != 0 and "no assignment" in done.stderr
    assert not (tmp_path / "a.zip").exists()


def _submit(root: Path, notebooks: dict[str, nbformat.NotebookNode]) -> None:
    for old in (root / "submission").iterdir():
        old.unlink()
    for name, nb in notebooks.items():
        nbformat.write(nb, root / "submission" / name)
    (root / "results" / "results.json").unlink(missing_ok=True)


def _scenario(assignment: str, student: str):
    return next(s for s in load_scenarios(assignment) if s.student == student)


def _wrong(assignment: str):
    """The first sample that loses points on a graded function."""
    full = _scenario(assignment, "solution").expect
    return next(s for s in load_scenarios(assignment)
                if s.student not in ("solution", "unanswered")
                and any(v < full.get(f, v) for f, v in s.expect.items()) and s.nbgrader)


@pytest.mark.parametrize("assignment, student", [(A1, "solution"), (A1, None), (A6, None),
                                                  (A1, "closed_too_deep"),
                                                  (A1, "closed_local_name_carrier")])
def test_run_autograder_scores_as_grade(zips, tmp_path, assignment, student):
    """A solution and wrong submissions: results.json has the scores of `grade NB --json`."""
    scenario = _scenario(assignment, student) if student else _wrong(assignment)
    nb = submission_notebook(scenario)
    here = tmp_path / "here" / "submitted.ipynb"
    here.parent.mkdir()
    nbformat.write(nb, here)
    expected = grade_here(here, tmp_path / "here.json")

    root = tmp_path / "autograder"
    unpack(zips[assignment], root)
    _submit(root, {"my notebook.ipynb": nb})
    done = run_autograder(root)
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads((root / "results" / "results.json").read_text())
    assert scores(result) == scores(expected), done.stdout + done.stderr
    assert result["execution_time"] > 0
    for test in result["tests"]:
        assert test["name"].split(":")[0] in ASSIGNMENTS[assignment].functions + ("written",) \
            or test["max_score"] == 0
        assert test["visibility"] in ("visible", "after_published") \
            or test["visibility"] == "hidden" and test["name"].endswith(": needs review")
    if student == "solution":
        assert result["score"] == result["max_score"] > 0
        assert all(t["status"] == "passed" for t in result["tests"])
    else:
        assert 0 <= result["score"] < result["max_score"]
        failed = {t["name"].split(":")[0] for t in result["tests"] if t["status"] == "failed"}
        lost = {f for f, v in scenario.expect.items()
                if v < _scenario(assignment, "solution").expect.get(f, v)}
        assert lost <= failed, (lost, failed)
    if assignment == A6:  # the written answer: listed, never counted, never failed
        written = [t for t in result["tests"] if "graded by hand" in t["name"]]
        assert written and all(t["max_score"] == 0 and t["status"] == "passed" and
                               "graded by hand" in t["output"] for t in written)


def test_not_one_notebook(zips, tmp_path):
    """0 notebooks, 2 notebooks, another assignment's notebook: score 0 and a clear message."""
    root = tmp_path / "autograder"
    unpack(zips[A1], root)
    solution = submission_notebook(_scenario(A1, "solution"))
    other = submission_notebook(_scenario(A6, "solution"))
    cases = [
        ({}, "No notebook"),
        ({"a.ipynb": solution, "b.ipynb": solution}, "2 notebooks were submitted"),
        ({"mine.ipynb": other}, "is the notebook of 06_putting_it_together"),
    ]
    for submission, phrase in cases:
        _submit(root, submission)
        (root / "submission" / "notes.txt").write_text("not a notebook")
        done = run_autograder(root)
        (root / "submission" / "notes.txt").unlink()
        assert done.returncode == 0, done.stdout + done.stderr
        result = json.loads((root / "results" / "results.json").read_text())
        assert result["score"] == 0 and result["max_score"] == 11 and result["tests"] == []
        assert phrase in result["output"], result["output"]
        assert stat.S_ISREG((root / "results" / "results.json").stat().st_mode)


def test_symbolic_links_are_not_followed(zips, tmp_path):
    """A submission that is a symbolic link (GitHub and Bitbucket submissions can carry them), or
    a folder link holding notebooks, scores 0 with a message, as in a batch: a link to the
    zip's own source notebook must not earn its answers' marks."""
    root = tmp_path / "autograder"
    unpack(zips[A1], root)
    source = f"/autograder/source/source/{A1}/linear_algebra.ipynb"   # as run_autograder sees it
    cases = [
        ("linear_algebra.ipynb", source, "linear_algebra.ipynb is a symbolic link"),
        ("work", "../source/source/" + A1, "work is a symbolic link"),
    ]
    for name, target, phrase in cases:
        _submit(root, {})
        (root / "submission" / name).symlink_to(target)
        done = run_autograder(root)
        assert done.returncode == 0, done.stdout + done.stderr
        result = json.loads((root / "results" / "results.json").read_text())
        assert result["score"] == 0 and result["max_score"] == 11 and result["tests"] == [], \
            (name, result)
        assert phrase in result["output"] and "not a handed-in file" in result["output"], \
            result["output"]

"""The demo course's exchange works out of the box: release, fetch, submit, collect, list.

The instructor works in a copy of the course. The learner works in a folder of their own holding
only what a learner gets: the `nbgrader_config.py` that `python -m autograder learner-config`
writes (the exchange root and the course id, nothing of this repository), with a HOME and Jupyter
folders of their own (no nbgrader cache or config of another run), and runs nbgrader's own
`nbgrader` command, with neither the course nor this repository on the path.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from traitlets.config.loader import PyFileConfigLoader

from autograder.instructor.build import tool_env
from autograder.course import ROOT

A = "01_linear_algebra"
COURSE_ID = "pytorch-training-loop-math"
BIN = Path(sys.executable).parent


def private_env(home: Path, **extra: str) -> dict[str, str]:
    """A user's environment with nothing inherited but the system's PATH: a HOME and Jupyter
    folders of its own, no PYTHONPATH, no NBGRADER_EXCHANGE."""
    for name in ("config", "data", "runtime"):
        (home / ".jupyter" / name).mkdir(parents=True, exist_ok=True)
    return {"PATH": f"{BIN}{os.pathsep}/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8",
            "JUPYTER_CONFIG_DIR": str(home / ".jupyter" / "config"),
            "JUPYTER_DATA_DIR": str(home / ".jupyter" / "data"),
            "JUPYTER_RUNTIME_DIR": str(home / ".jupyter" / "runtime"), **extra}


def nbgrader(*args: str, cwd: Path, env: dict) -> str:
    """nbgrader's own command, as a user types it (its script puts no folder of ours on sys.path)."""
    done = subprocess.run([str(BIN / "nbgrader"), *args], cwd=cwd, env=env,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def learner_config(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "autograder", "learner-config", *args], cwd=ROOT,
                          env=tool_env(), capture_output=True, text=True)


def test_learner_config_holds_only_the_exchange_and_the_course(tmp_path):
    done = learner_config("--exchange", "/srv/nbgrader/exchange", "--out", str(tmp_path / "l"))
    assert done.returncode == 0, done.stderr
    path = tmp_path / "l" / "nbgrader_config.py"
    assert str(path) in done.stdout
    config = PyFileConfigLoader(path.name, path=str(path.parent)).load_config()
    assert config == {"Exchange": {"root": "/srv/nbgrader/exchange"},
                      "CourseDirectory": {"course_id": COURSE_ID}}, config
    assert "import" not in path.read_text()

    # --course-id, and no file written over without --force (the course's own config never)
    done = learner_config("--exchange", "/x", "--course-id", "other", "--out", str(tmp_path / "l"))
    assert done.returncode != 0 and "--force" in done.stderr
    done = learner_config("--exchange", "/x", "--course-id", "other", "--out", str(tmp_path / "l"),
                          "--force")
    assert done.returncode == 0, done.stderr
    config = PyFileConfigLoader(path.name, path=str(path.parent)).load_config()
    assert config.CourseDirectory.course_id == "other" and config.Exchange.root == "/x"
    done = learner_config("--exchange", "/x", "--out", str(ROOT), "--force")
    assert done.returncode != 0 and "course's own" in done.stderr
    for bad in (["--exchange", "relative/exchange"], ["--exchange", "/x", "--course-id", "a/b"]):
        done = learner_config(*bad, "--out", str(tmp_path / "bad"))
        assert done.returncode != 0 and done.stderr.startswith("error:"), done.stderr
        assert not (tmp_path / "bad" / "nbgrader_config.py").exists()


def released(tmp_path: Path, assignment: str = A) -> tuple[Path, Path, dict]:
    """(course, learner, instructor's env): a copy of the course that released `assignment` into
    its exchange (beside its config), and a learner's folder holding only what a learner gets: the
    one small file the instructor's `learner-config` writes."""
    course, learner = tmp_path / "course", tmp_path / "learner"
    shutil.copytree(ROOT / "release" / assignment, course / "release" / assignment)
    shutil.copy(ROOT / "nbgrader_config.py", course)
    instructor = {**tool_env(), **private_env(tmp_path / "instructor-home")}
    instructor.pop("NBGRADER_EXCHANGE", None)
    nbgrader("release_assignment", assignment, cwd=course, env=instructor)
    done = learner_config("--exchange", str(course / "exchange"), "--out", str(learner))
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in learner.iterdir()) == ["nbgrader_config.py"]
    return course, learner, instructor


def test_release_fetch_submit_collect(tmp_path):
    course, learner, instructor = released(tmp_path)
    exchange = course / "exchange"
    assert (exchange / COURSE_ID / "outbound" / A / "linear_algebra.ipynb").is_file()
    assert os.stat(exchange).st_mode & 0o777 == 0o777, "learners must be able to submit"
    as_learner = private_env(tmp_path / "learner-home")

    listed = nbgrader("list", cwd=learner, env=as_learner)
    assert A in listed and "does not exist" not in listed, listed
    nbgrader("fetch_assignment", A, cwd=learner, env=as_learner)
    fetched = learner / A / "linear_algebra.ipynb"
    assert fetched.read_bytes() == (ROOT / "release" / A / "linear_algebra.ipynb").read_bytes()
    nbgrader("submit", A, cwd=learner, env=as_learner)
    assert list((tmp_path / "learner-home" / ".jupyter" / "data" / "nbgrader_cache").iterdir()), \
        "nbgrader's cache lies in the learner's own Jupyter data folder"

    nbgrader("collect", A, cwd=course, env=instructor)
    collected = list((course / "submitted").glob(f"*/{A}/linear_algebra.ipynb"))
    assert len(collected) == 1 and collected[0].read_bytes() == fetched.read_bytes()


"""The demo course's exchange works out of the box: release, fetch, submit, collect, list.

The instructor works in a copy of the course; the learner in a folder of their own, with the
course's config and NBGRADER_EXCHANGE pointing at the instructor's exchange (as on a shared server).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from autograder.build import tool_env
from autograder.course import ROOT

A = "01_linear_algebra"
COURSE_ID = "pytorch-training-loop-math"


def nbgrader(*args: str, cwd: Path, env: dict) -> str:
    done = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=cwd, env=env,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def test_release_fetch_submit_collect(tmp_path):
    course, learner = tmp_path / "course", tmp_path / "learner"
    shutil.copytree(ROOT / "release" / A, course / "release" / A)
    shutil.copy(ROOT / "nbgrader_config.py", course)
    learner.mkdir()
    shutil.copy(ROOT / "nbgrader_config.py", learner)   # as a server-wide config would be
    env = {k: v for k, v in tool_env().items() if k != "NBGRADER_EXCHANGE"}

    nbgrader("release_assignment", A, cwd=course, env=env)
    exchange = course / "exchange"
    assert (exchange / COURSE_ID / "outbound" / A / "linear_algebra.ipynb").is_file()
    assert os.stat(exchange).st_mode & 0o777 == 0o777, "learners must be able to submit"

    as_learner = {**env, "NBGRADER_EXCHANGE": str(exchange)}
    listed = nbgrader("list", cwd=learner, env=as_learner)
    assert A in listed
    nbgrader("fetch_assignment", A, cwd=learner,
             env=as_learner)
    fetched = learner / A / "linear_algebra.ipynb"
    assert fetched.read_bytes() == (ROOT / "release" / A / "linear_algebra.ipynb").read_bytes()
    nbgrader("submit", A, cwd=learner, env=as_learner)

    nbgrader("collect", A, cwd=course, env=env)
    collected = list((course / "submitted").glob(f"*/{A}/linear_algebra.ipynb"))
    assert len(collected) == 1 and collected[0].read_bytes() == fetched.read_bytes()

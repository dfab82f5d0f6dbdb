"""Shared fixtures: the sample submissions, written and graded once per test run."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from autograder.build import tool_env
from autograder.course import ASSIGNMENTS, ROOT
from autograder.grading import grade_folder
from autograder.samples import load_scenarios, write_submitted

BUILT = [a for a in ASSIGNMENTS if ASSIGNMENTS[a].source.is_file()]
"""Assignments whose source notebook exists."""

SCENARIOS = [s for a in BUILT for s in load_scenarios(a)]


def run(*args: str, cwd: Path, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), cwd=cwd, env=tool_env(), capture_output=True, text=True,
                          check=check)


@pytest.fixture(scope="session")
def submitted(tmp_path_factory) -> Path:
    """nbgrader's submitted/ layout holding every sample submission."""
    root = tmp_path_factory.mktemp("samples") / "submitted"
    write_submitted(root, BUILT)
    return root


@pytest.fixture(scope="session")
def graded(submitted) -> dict[tuple[str, str], object]:
    """(student, assignment) -> Graded, from one batch run of the standalone grader."""
    return {(g.student, g.assignment): g for g in grade_folder(submitted)}


@pytest.fixture(scope="session")
def course(tmp_path_factory) -> Path:
    """A fresh course directory: a copy of source/ and nbgrader_config.py."""
    root = tmp_path_factory.mktemp("course")
    shutil.copytree(ROOT / "source", root / "source")
    shutil.copy(ROOT / "nbgrader_config.py", root)
    return root

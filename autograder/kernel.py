"""Entry point for the hidden-test cells of the notebooks, run by `nbgrader autograde`.

The cell calls `hidden_tests("matmul")`. It grades the notebook file in the
kernel's working directory with the standalone grader, in a fresh Python
process, so that nbgrader and `python -m autograder grade` give the same
score and nothing the learner did in the kernel (patched torch functions,
say) can change the verdict. The score is returned so that nbgrader reads it
as the cell's partial credit; only stdout is written (nbgrader scores a cell
that writes to stderr 0).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from autograder.course import graded_functions


def _find_notebook(function: str, folder: Path) -> Path | None:
    from autograder.course import ASSIGNMENTS
    assignment = ASSIGNMENTS[graded_functions()[function]]
    preferred = folder / assignment.notebook
    if preferred.is_file():
        return preferred
    from autograder.notebook import NotGradable, load_submission
    for candidate in sorted(folder.glob("*.ipynb")):
        try:
            if load_submission(candidate).assignment is assignment:
                return candidate
        except NotGradable:
            continue
    return None


_graded: dict[tuple, dict] = {}
"""Results of this kernel's notebook file, graded once for all its hidden-test cells."""


def _grade(notebook: Path, timeout: float) -> dict:
    stat = notebook.stat()
    key = (str(notebook.resolve()), stat.st_mtime_ns, stat.st_size)
    if key in _graded:
        return _graded[key]
    with tempfile.TemporaryDirectory() as tmp:
        result = Path(tmp) / "result.json"
        command = [sys.executable, "-m", "autograder", "grade", str(notebook),
                   "--json", str(result), "--quiet"]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                                  env={**os.environ, "PYTHONWARNINGS": "ignore"})
        except subprocess.TimeoutExpired:
            return {"error": f"grading took longer than {timeout:g} s"}
        if done.returncode != 0 or not result.is_file():
            return {"error": (done.stderr.strip().splitlines() or ["no output"])[-1]}
        _graded[key] = json.loads(result.read_text())
    return _graded[key]


def hidden_tests(function: str, timeout: float = 300) -> float:
    """Print the hidden-test results for `function` in the notebook beside the kernel; return its score."""
    notebook = _find_notebook(function, Path.cwd())
    if notebook is None:
        print(f"Hidden tests for {function}: no notebook of this assignment in {Path.cwd()}; 0 points.")
        return 0.0
    data = _grade(notebook, timeout)
    if "error" in data:
        print(f"Hidden tests for {function} could not run: {data['error']}; 0 points.")
        return 0.0
    tests = [t for t in data["tests"] if t["name"].startswith(f"{function}:")]
    for test in tests:
        mark = "ok  " if test["status"] == "passed" else "FAIL"
        print(f"{mark} {test['score']:g}/{test['max_score']:g}  {test['name']}")
        for line in test["output"].splitlines():
            print("       " + line)
    return float(sum(t["score"] for t in tests))

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


def hidden_tests(function: str, timeout: float = 300) -> float:
    """Grade `function` in the notebook beside the kernel; print the results; return the score."""
    notebook = _find_notebook(function, Path.cwd())
    if notebook is None:
        print(f"Hidden tests for {function}: no notebook of this assignment in {Path.cwd()}; 0 points.")
        return 0.0
    with tempfile.TemporaryDirectory() as tmp:
        result = Path(tmp) / "result.json"
        command = [sys.executable, "-m", "autograder", "grade", str(notebook),
                   "--only", function, "--json", str(result), "--quiet"]
        env = {k: v for k, v in os.environ.items() if not k.startswith(("MPLBACKEND", "PYTHONSTARTUP"))}
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)
        except subprocess.TimeoutExpired:
            print(f"Hidden tests for {function} took longer than {timeout:g} s; 0 points.")
            return 0.0
        if done.returncode != 0 or not result.is_file():
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            print(f"Hidden tests for {function} could not run: {last}; 0 points.")
            return 0.0
        data = json.loads(result.read_text())
    for test in data["tests"]:
        mark = "ok  " if test["status"] == "passed" else "FAIL"
        print(f"{mark} {test['score']:g}/{test['max_score']:g}  {test['name']}")
        for line in test["output"].splitlines():
            print("       " + line)
    return float(data["score"])

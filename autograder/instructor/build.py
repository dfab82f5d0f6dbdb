"""Instructor tool: regenerate release/ (with nbgrader) and solutions/ (executed) from source/."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import tempfile
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbgrader.preprocessors import ClearHiddenTests

from autograder.course import ASSIGNMENTS, ROOT

_SOLUTION_MARKER = re.compile(r"^[ \t]*### (BEGIN|END) (SOLUTION|MARK SCHEME)[ \t]*\n?", re.M)


BY_HAND_CELL = "setup_by_hand"
"""grade_id of the locked cell that holds autograder/rules/subset/ (its parts joined), in notebooks with by-hand exercises."""
BY_HAND_HEADER = ("# What a by-hand answer may use. Grading reads your code with this (before running it), and so do\n"
                  "# the checks after each exercise; you do not need to read it. A copy of autograder/rules/subset/.\n")


def by_hand_cell_source() -> str:
    """The source of the BY_HAND_CELL: the grader's own subset checker, one implementation."""
    from autograder.rules.subset import one_text
    return BY_HAND_HEADER + one_text()


def sync_by_hand_cell(path: Path) -> bool:
    """Put the current subset checker into the notebook's BY_HAND_CELL (after its setup cell), if the
    notebook has by-hand exercises; True if the file changed."""
    if not any(a.allowed for a in ASSIGNMENTS.values() if a.source == path):
        return False
    nb = nbformat.read(path, as_version=4)
    cells = {c.metadata.get("nbgrader", {}).get("grade_id"): c for c in nb.cells}
    text = by_hand_cell_source()
    cell = cells.get(BY_HAND_CELL)
    if cell is None:
        cell = nbformat.v4.new_code_cell(text, metadata={"nbgrader": {
            "grade": False, "grade_id": BY_HAND_CELL, "locked": True, "schema_version": 3,
            "solution": False}})
        nb.cells.insert(nb.cells.index(cells["setup"]) + 1, cell)
    elif cell.source == text:
        return False
    cell.source = text
    nbformat.write(nb, path)
    return True


def tool_env() -> dict[str, str]:
    """Environment in which nbgrader finds its helpers (it runs `alembic` from PATH)."""
    bin_dir = str(Path(sys.executable).parent)
    return {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")}


def generate_release(assignment: str, root: Path = ROOT) -> Path:
    """Run `nbgrader generate_assignment` for one assignment inside the course at `root`."""
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [sys.executable, "-m", "nbgrader", "generate_assignment", assignment, "--force",
             f"--db=sqlite:///{tmp}/gradebook.db", "--log-level=WARN"],
            cwd=root, check=True, env=tool_env())
    return root / "release" / assignment


def solution_notebook(source: Path) -> nbformat.NotebookNode:
    """The source notebook as a worked solution: answers and visible checks kept, hidden tests removed."""
    nb = nbformat.read(source, as_version=4)
    nb, _ = ClearHiddenTests().preprocess(nb, {})
    cells = []
    for cell in nb.cells:
        meta = cell.metadata.pop("nbgrader", {})
        if meta.get("grade") and not meta.get("solution") and not _code(cell.source):
            continue  # a graded cell that held only hidden tests
        cell.source = without_markers(cell.source)
        cells.append(cell)
    nb.cells = cells
    return nb


def without_markers(text: str) -> str:
    """A source cell's text as solutions/ holds it: the BEGIN/END SOLUTION and MARK SCHEME marker
    lines removed, what is between them kept (a rubric stays readable in the worked solution)."""
    return _SOLUTION_MARKER.sub("", text)


def _code(source: str) -> bool:
    return any(line.strip() and not line.strip().startswith("#") for line in source.splitlines())


def execute(nb: nbformat.NotebookNode, cwd: Path, timeout: int = 120) -> nbformat.NotebookNode:
    # no execution timestamps, and stream output in one piece however it arrived: a rebuild
    # changes only what the notebook shows
    NotebookClient(nb, timeout=timeout, kernel_name="python3", record_timing=False,
                   coalesce_streams=True, resources={"metadata": {"path": str(cwd)}}).execute()
    return nb


def build_solutions(assignment: str, root: Path = ROOT) -> tuple[Path, float]:
    """Execute the worked solution into solutions/; return its path and the seconds it ran."""
    a = ASSIGNMENTS[assignment]
    out = root / "solutions" / assignment / a.notebook
    out.parent.mkdir(parents=True, exist_ok=True)
    nb = solution_notebook(root / "source" / assignment / a.notebook)
    start = time.perf_counter()
    execute(nb, out.parent)
    seconds = time.perf_counter() - start
    nbformat.write(nb, out)
    return out, seconds


def build(assignments: list[str]) -> int:
    chosen = assignments or [a for a in ASSIGNMENTS if ASSIGNMENTS[a].source.is_file()]
    total = 0.0
    for assignment in chosen:
        if sync_by_hand_cell(ASSIGNMENTS[assignment].source):
            print(f"{assignment}: {BY_HAND_CELL} <- autograder/rules/subset/")
        print(f"{assignment}: release ->", generate_release(assignment).relative_to(ROOT))
        path, seconds = build_solutions(assignment)
        total += seconds
        print(f"{assignment}: solutions -> {path.relative_to(ROOT)} (ran top to bottom in {seconds:.1f} s)")
    print(f"{len(chosen)} notebooks ran in {total:.1f} s (kernel start included)")
    return 0

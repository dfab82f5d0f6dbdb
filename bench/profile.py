"""Where one notebook's grading time goes, path by path (issue 40): every figure from one run.

The grader records its phases as JSON lines when AUTOGRADER_TIMING names a file
(autograder/timing.py: the jail's reset and forks, a child's start with the answer cells, the
learner's calls, the hidden tests, the error model; under nbgrader also the jailed kernel's
start and every preprocessor: execution for feedback, grading, sanitizing, gradebook writes).
This script sets it for each path and prints the seconds per notebook of each phase:

* cold: `python -m autograder grade NB --json`, one fresh process per notebook (Gradescope's
  path), next to `python -c "import torch"`;
* batch: `python -m autograder grade DIR --out OUT --jobs 1` over the N notebooks;
* nbgrader: `nbgrader autograde` as this course configures it (workers, warm kernels), then
  `nbgrader generate_feedback`.

Phases nest (a child's start holds the jail's reset and fork; the hidden tests hold the calls
and the error model), so a column does not add up: read an indented line as "of which".

    python bench/profile.py [--n 6] [--assignment 06_putting_it_together]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from speed import ROOT, _median, _timed, _write_class  # noqa: E402

NESTED = ("jail:", "child:", "grader: the error model", "nbgrader: start")


def _phases(path: Path) -> dict[str, float]:
    """phase -> total seconds in the timing file."""
    totals: dict[str, float] = defaultdict(float)
    if path.is_file():
        for line in path.read_text().splitlines():
            row = json.loads(line)
            totals[row["phase"]] += row["seconds"]
    return totals


def _print(title: str, wall: float, totals: dict[str, float], n: int) -> None:
    print(f"\n{title}: {wall / n:.2f} s per notebook (wall, {n} notebooks)")
    for phase, seconds in sorted(totals.items(), key=lambda kv: -kv[1]):
        indent = "    " if phase.startswith(NESTED) else "  "
        print(f"{indent}{seconds / n:7.3f} s  {phase}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=6, help="notebooks per path (default 6)")
    parser.add_argument("--assignment", default="06_putting_it_together")
    args = parser.parse_args()
    n, assignment = args.n, args.assignment
    with tempfile.TemporaryDirectory(prefix="profile-") as tmp:
        work = Path(tmp)
        submitted = work / "submitted"
        paths = _write_class(submitted, assignment, n)
        print(f"{assignment}, {n} sample notebooks; machine load {open('/proc/loadavg').read().split()[0]}")
        torch = _median([sys.executable, "-c", "import torch"])
        print(f"\npython -c 'import torch': {torch:.2f} s (median of 3)")

        timing = work / "cold.jsonl"
        started = time.monotonic()
        walls = [_timed([sys.executable, "-m", "autograder", "grade", str(p), "--json",
                         str(work / "results.json")],
                        env={"AUTOGRADER_TIMING": str(timing)}) for p in paths]
        _print("cold grade (a fresh process per notebook)", time.monotonic() - started,
               _phases(timing), n)
        print(f"  median {statistics.median(walls):.2f} s = {statistics.median(walls) / torch:.2f}x "
              "import torch")

        timing = work / "batch.jsonl"
        wall = _timed([sys.executable, "-m", "autograder", "grade", str(submitted), "--out",
                       str(work / "graded"), "--jobs", "1", "--quiet", "--force"],
                      env={"AUTOGRADER_TIMING": str(timing)})
        _print("batch, one worker (start-up included)", wall, _phases(timing), n)

        course = work / "course"
        import shutil
        shutil.copytree(ROOT / "source" / assignment, course / "source" / assignment)
        shutil.copy(ROOT / "nbgrader_config.py", course)
        shutil.copytree(submitted, course / "submitted")
        _timed(["nbgrader", "generate_assignment", assignment, "--force", "--log-level=ERROR"], course)
        timing = work / "nbgrader.jsonl"
        wall = _timed(["nbgrader", "autograde", assignment, "--log-level=ERROR"], course,
                      {"AUTOGRADER_TIMING": str(timing)})
        _print("nbgrader autograde, as configured", wall, _phases(timing), n)
        timing = work / "feedback.jsonl"
        wall = _timed(["nbgrader", "generate_feedback", assignment, "--log-level=ERROR"], course,
                      {"AUTOGRADER_TIMING": str(timing)})
        _print("nbgrader generate_feedback", wall, _phases(timing), n)


if __name__ == "__main__":
    main()

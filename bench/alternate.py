"""Grading time per notebook of two checkouts, measured in alternating runs on the same machine.

    .venv/bin/python bench/alternate.py OLD_CHECKOUT [NEW_CHECKOUT] [--rounds 3] [--per 3]

Writes the worked solution and the first --per samples of every assignment (hostile ones left out)
as one submitted/ folder, then grades it with `python -m autograder grade DIR --out OUT --force`
in each checkout in turn (old, new, old, new, ...), and prints the seconds per notebook of each run
and the medians. A checkout is any folder holding this package (a `git worktree add` of a commit):
`python -m autograder` run there imports that checkout's grader. One machine's load moves every
figure; compare the two columns of one run.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from autograder.course import ASSIGNMENTS  # noqa: E402
from autograder.instructor.samples import load_scenarios, submission_notebook  # noqa: E402

HOSTILE = ("hostile", "kills", "memory", "endless", "exit", "fork", "thread", "closed_")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path, nargs="?", default=ROOT)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--per", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        submitted = Path(tmp) / "submitted"
        count = 0
        for a in ASSIGNMENTS:
            chosen = [s for s in load_scenarios(a) if not any(h in s.student + s.about for h in HOSTILE)]
            for s in chosen[:args.per]:
                path = submitted / s.student / a / ASSIGNMENTS[a].notebook
                path.parent.mkdir(parents=True, exist_ok=True)
                nbformat.write(submission_notebook(s), path)
                count += 1
        times = {"old": [], "new": []}
        for r in range(args.rounds):
            for label, checkout in (("old", args.old), ("new", args.new)):
                out = Path(tmp) / f"out-{label}-{r}"
                started = time.monotonic()
                subprocess.run([sys.executable, "-m", "autograder", "grade", str(submitted), "--out",
                                str(out), "--force"], cwd=checkout, check=True, capture_output=True)
                seconds = (time.monotonic() - started) / count
                times[label].append(seconds)
                print(f"round {r + 1} {label}: {seconds:.2f} s per notebook ({count} notebooks)", flush=True)
        old, new = statistics.median(times["old"]), statistics.median(times["new"])
        print(f"median: old {old:.2f} s, new {new:.2f} s per notebook (new/old {new / old:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Print seconds per notebook for every grading path on the same sample submissions.

    python bench/grading.py [--before REV] [--count N] [--assignment ID]

Paths: `grade NOTEBOOK --json` one process per notebook (what Gradescope and a single
learner pay), `grade submitted/ --out` (a batch), and `nbgrader autograde` with this
course's config (jailed kernel + trusted grades) and with `execute=False`. With
`--before REV`, the same paths for the code at REV (a git worktree), for comparison.
Hostile samples are left out (they would stop the pre-jail grader). One run, this machine:
figures move with its load, so compare within one run. bench/speed.py breaks the time down.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _env(code: Path) -> dict:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}:{env['PATH']}"
    env["PYTHONPATH"] = str(code)  # the code measured, also inside nbgrader's kernels
    return env


def _timed(command: list[str], cwd: Path, code: Path) -> float:
    started = time.monotonic()
    subprocess.run(command, cwd=cwd, env=_env(code), check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return time.monotonic() - started


def _course(code: Path, work: Path, submitted: Path, execute: bool | None) -> Path:
    course = work / f"course-{code.name}-{execute}"
    shutil.copytree(code / "source", course / "source")
    config = (code / "nbgrader_config.py").read_text()
    if execute is False:
        config = config.replace("autograde_preprocessors(execute=True)", "autograde_preprocessors(execute=False)")
    (course / "nbgrader_config.py").write_text(config)
    shutil.copytree(submitted, course / "submitted")
    return course


def measure(code: Path, label: str, work: Path, submitted: Path, assignment: str, singles: int,
            nbgrader: bool) -> None:
    python = [sys.executable, "-m", "autograder"]
    notebooks = sorted(submitted.glob(f"*/{assignment}/*.ipynb"))
    n = len(notebooks)
    single = sum(_timed(python + ["grade", str(nb), "--json", str(work / "r.json"), "--quiet"], code, code)
                 for nb in notebooks[:singles]) / singles
    print(f"{label:8} grade one notebook            {single:7.2f} s per notebook ({singles} runs)")
    out = work / f"out-{label}"
    batch = _timed(python + ["grade", str(submitted), "--out", str(out), "--quiet"], code, code)
    print(f"{label:8} grade a batch of {n:3}          {batch / n:7.2f} s per notebook ({batch:.1f} s)")
    if not nbgrader:
        return
    modes = [None] if "autograde_preprocessors" not in (code / "nbgrader_config.py").read_text() else [True, False]
    for execute in modes:
        course = _course(code, work, submitted, execute)
        _timed(["nbgrader", "generate_assignment", assignment, "--force", "--log-level=ERROR"], course, code)
        seconds = _timed(["nbgrader", "autograde", assignment, "--log-level=ERROR"], course, code)
        what = {None: "", True: " (jailed kernel)", False: " (execute=False)"}[execute]
        print(f"{label:8} nbgrader autograde{what:17} {seconds / n:7.2f} s per notebook ({seconds:.1f} s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", help="a git revision to measure as well")
    parser.add_argument("--count", type=int, default=24, help="submissions (default 24)")
    parser.add_argument("--assignment", default="01_linear_algebra")
    parser.add_argument("--singles", type=int, default=5, help="notebooks graded one process each")
    parser.add_argument("--no-nbgrader", action="store_true")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from autograder.instructor.samples import load_scenarios, submission_notebook
    import nbformat
    from autograder.course import ASSIGNMENTS
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        submitted = work / "submitted"
        # Not the hostile samples: before the jail, one that kills its parent's process group
        # stops `nbgrader autograde` itself, and there would be nothing to compare.
        scenarios = [s for s in load_scenarios(args.assignment) if not s.about.startswith("hostile")]
        for i in range(args.count):
            s = scenarios[i % len(scenarios)]
            path = submitted / f"{i:03}_{s.student}" / args.assignment / ASSIGNMENTS[args.assignment].notebook
            path.parent.mkdir(parents=True)
            nbformat.write(submission_notebook(s), path)
        print(f"{args.count} submissions of {args.assignment}; {os.cpu_count()} cores; "
              f"load average {os.getloadavg()[0]:.1f}")
        if args.before:
            before = work / "before"
            subprocess.run(["git", "worktree", "add", "--detach", str(before), args.before], cwd=ROOT,
                           check=True, capture_output=True)
            try:
                measure(before, "before", work, submitted, args.assignment, args.singles, not args.no_nbgrader)
            finally:
                subprocess.run(["git", "worktree", "remove", "--force", str(before)], cwd=ROOT, check=False)
        measure(ROOT, "now", work, submitted, args.assignment, args.singles, not args.no_nbgrader)


if __name__ == "__main__":
    main()

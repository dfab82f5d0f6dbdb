"""The instructor's pipeline on the sample submissions, in this course directory.

generate the release -> write samples into submitted/ -> `nbgrader autograde` into
gradebook.db -> `nbgrader export` -> `python -m autograder grade` on the same
submissions; prints both sets of grades side by side and the time each took.
"""

from __future__ import annotations

import csv
import shutil
import subprocess
import sys
import time

from autograder.instructor.build import tool_env
from autograder.course import ASSIGNMENTS, ROOT
from autograder.instructor.samples import write_submitted


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), cwd=ROOT, env=tool_env(), capture_output=True, text=True)


def _step(message: str) -> None:
    print(f"\n== {message}", flush=True)


def demo(assignments: list[str] | None = None, jobs: int | None = None, every: bool = False) -> int:
    chosen = assignments or [a for a in ASSIGNMENTS if ASSIGNMENTS[a].source.is_file()]
    _step(f"nbgrader generate_assignment ({', '.join(chosen)})")
    for assignment in chosen:
        done = _run("nbgrader", "generate_assignment", assignment, "--force", "--log-level=ERROR")
        if done.returncode:
            print(done.stderr, file=sys.stderr)
            return 1
    submitted = ROOT / "submitted"
    shutil.rmtree(submitted, ignore_errors=True)
    scenarios = write_submitted(submitted, chosen, share=not every)
    share = "all" if every else "a representative share (--all for every one)"
    _step(f"{len(scenarios)} sample submissions, {share}, written to submitted/")
    for s in scenarios:
        print(f"  {s.assignment}/{s.student}: {s.about}")

    _step("nbgrader autograde (scores go to gradebook.db; on every core)")
    start = time.perf_counter()
    for assignment in chosen:
        count = sum(s.assignment == assignment for s in scenarios)
        print(f"  {assignment}: {count} notebooks", flush=True)
        _run("nbgrader", "autograde", assignment, "--force", "--log-level=ERROR")
    nbgrader_seconds = time.perf_counter() - start
    _run("nbgrader", "export", "--log-level=ERROR")
    with open(ROOT / "grades.csv") as f:
        theirs = {(r["student_id"], r["assignment"]): float(r["score"]) for r in csv.DictReader(f)}

    _step("python -m autograder grade submitted --out feedback_json")
    start = time.perf_counter()
    command = [sys.executable, "-m", "autograder", "grade", "submitted", "--out", "feedback_json",
               "--quiet"] + (["--jobs", str(jobs)] if jobs else [])
    subprocess.run(command, cwd=ROOT, env=tool_env(), check=True, stderr=subprocess.DEVNULL)
    ours_seconds = time.perf_counter() - start
    with open(ROOT / "feedback_json" / "grades.csv") as f:
        ours = {(r["student"], r["assignment"]): (float(r["score"]), float(r["max_score"]))
                for r in csv.DictReader(f)}

    _step("grades (nbgrader gradebook vs python -m autograder)")
    width = max([len(s.student) for s in scenarios] + [7])
    print(f"  {'assignment':26} {'student':{width}} {'nbgrader':>9} {'autograder':>11}")
    for s in sorted(scenarios, key=lambda s: (s.assignment, s.student)):
        key = (s.student, s.assignment)
        score, max_score = ours.get(key, (float("nan"), 0))
        note = ""
        if theirs.get(key) != score:
            note = "  <- the notebook kernel died (os._exit): nbgrader records 0" \
                if not s.nbgrader else "  <- DIFFERENT"
        print(f"  {s.assignment:26} {s.student:{width}} {theirs.get(key, 0):9g} "
              f"{score:6g} / {max_score:g}{note}")
    n = len(scenarios)
    _step("time")
    print(f"  nbgrader autograde:       {nbgrader_seconds:7.1f} s for {n} notebooks "
          f"({nbgrader_seconds / n:.2f} s per notebook)")
    print(f"  python -m autograder grade: {ours_seconds:5.1f} s for {n} notebooks "
          f"({ours_seconds / n:.2f} s per notebook)")
    print("\nFiles: gradebook.db, grades.csv (nbgrader export), autograded/, "
          "feedback_json/<student>/<assignment>.json and feedback_json/grades.csv")
    import contextlib
    import io
    _step("similar answers (python -m autograder similarity submitted --out "
          "feedback_json/report/similarity --results feedback_json)")
    from autograder.similarity.run import main as similarity
    with contextlib.redirect_stdout(io.StringIO()) as said:
        similarity(submitted, ROOT / "feedback_json" / "report" / "similarity",
                   results=ROOT / "feedback_json")
    print(f"  {said.getvalue().strip()}")
    _step("class report (python -m autograder report feedback_json --out feedback_json/report)")
    from autograder.instructor.classreport.page import write_report
    with contextlib.redirect_stdout(io.StringIO()):  # its own "report: PATH" line, said below
        write_report(ROOT / "feedback_json", ROOT / "feedback_json" / "report")
    print("  open it in a browser: file://"
          f"{(ROOT / 'feedback_json' / 'report' / 'index.html').as_posix()}")
    compared = [s for s in scenarios if s.nbgrader]
    unexpected = [s for s in compared
                  if theirs.get((s.student, s.assignment)) != ours.get((s.student, s.assignment), (None,))[0]]
    print(f"\n{verdict(len(compared), len(unexpected), len(scenarios) - len(compared))}")
    print("Next: `jupyter lab`, Nbgrader menu -> Formgrader to grade the written answers; "
          "`nbgrader generate_feedback` and `release_feedback` for the learners.")
    return 1 if unexpected else 0


def verdict(compared: int, different: int, kernel_deaths: int) -> str:
    """The demo's last line: whether the two graders gave every notebook the same grade."""
    died = (f" ({kernel_deaths} more where the notebook's kernel dies, which nbgrader records as 0 "
            "by design)") if kernel_deaths else ""
    if different:
        return f"GRADES DIFFER: {different} of {compared} notebooks got another grade from nbgrader{died}."
    return f"All grades agree: {compared} of {compared} notebooks, nbgrader and python -m autograder{died}."

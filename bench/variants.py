"""Correct variants nobody tuned the grader to: every one must pass, none may be refused.

`bench/variants/correct.py` holds 92 correct answers to the 16 by-hand functions, written (issue
28) by a helper that read only the release notebooks, in 4-6 styles each (loops, vectorized,
helpers and computed constants in an added cell, functools/itertools/operator/math, deepcopy,
no_grad/.data, printing, asserts). This script writes each as a submission (the solution
elsewhere), asks the grader's subset check (autograder/rules/subset/) whether it refuses it, grades
them all with `python -m autograder grade`, and prints what was refused or lost points.

    .venv/bin/python bench/variants.py       # last run (2026-12-06): 92 graded, 0 refused, 0 lost points
    .venv/bin/python bench/variants.py bench/variants/fresh_2026_12_07.py   # another set (issue 36)
"""

from __future__ import annotations

import csv
import importlib.util
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from autograder.course import ASSIGNMENTS  # noqa: E402
from autograder.grade.submission import load_submission  # noqa: E402
from autograder.instructor.samples import Scenario, submission_notebook  # noqa: E402


def main() -> int:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "bench" / "variants" / "correct.py"
    spec = importlib.util.spec_from_file_location("correct", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with tempfile.TemporaryDirectory() as tmp:
        root, out = Path(tmp) / "submitted", Path(tmp) / "out"
        refused = 0
        for i, v in enumerate(module.VARIANTS):
            s = Scenario(f"v{i:03d}", v["assignment"], v["style"], {v["function"]: v["code"]},
                         added={v["function"]: v["added"]} if v.get("added") else {})
            path = root / s.student / s.assignment / ASSIGNMENTS[s.assignment].notebook
            path.parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(submission_notebook(s), path)
            for function, found in load_submission(path).refused:
                refused += 1
                print(f"refused: {s.student} {function} ({v['style']}): {found[0].describe()}")
        subprocess.run([sys.executable, "-m", "autograder", "grade", str(root), "--out", str(out)],
                       cwd=ROOT, check=True, capture_output=True)
        rows = list(csv.DictReader(open(out / "grades.csv", newline="")))
        lost = [r for r in rows if float(r["score"]) < float(r["max_score"])]
        for r in lost:
            result = json.loads((out / r["student"] / f"{r['assignment']}.json").read_text())
            failed = [t["name"] for t in result["tests"] if t["status"] == "failed" and t["max_score"]]
            print(f"lost points: {r['student']} {r['assignment']} {r['score']}/{r['max_score']}: {failed[:3]}")
        print(f"{len(rows)} graded, {refused} refused, {len(lost)} lost points")
        return 1 if refused or lost else 0


if __name__ == "__main__":
    sys.exit(main())

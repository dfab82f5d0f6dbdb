"""Results as Gradescope's results.json and as a grades.csv for the whole batch."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from autograder.plugin import TestResult


def results_json(results: list[TestResult], *, error: str | None = None) -> dict:
    """Gradescope results.json for one submission."""
    tests = [{
        "name": r.name,
        "score": r.score,
        "max_score": r.max_score,
        "status": "passed" if r.passed else "failed",
        "output": r.output,
        "visibility": "visible" if r.visible else "after_published",
    } for r in results]
    out = {"score": sum(r.score for r in results), "max_score": sum(r.max_score for r in results),
           "tests": tests}
    if error:
        out["output"] = error
    return out


def write_json(data: dict, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def write_grades_csv(rows: list[tuple[str, str, float, float]], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["student", "assignment", "score", "max_score"])
        for student, assignment, score, max_score in rows:
            writer.writerow([student, assignment, f"{score:g}", f"{max_score:g}"])


def summary_lines(results: list[TestResult]) -> list[str]:
    """Plain-text lines for a terminal or a notebook cell."""
    lines = []
    for r in results:
        mark = "ok  " if r.passed else "FAIL"
        lines.append(f"{mark} {r.score:g}/{r.max_score:g}  {r.name}")
        if r.output:
            lines.extend("       " + line for line in r.output.splitlines())
    return lines

"""The class report's numbers: a batch's result files read (`load`) and counted.

`DIR/<student>/<assignment>.json`, as `python -m autograder grade SUBMITTED --out DIR` writes them,
become `Result`s; from them: the pass rate of every graded function (`function_table`), the named
mistakes, counted once per notebook, most frequent first (`mistakes`), and the flags for the
instructor (`needs_review`). No HTML, no figures: page.py and figures.py show them.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from autograder.course import ASSIGNMENTS

_HINT = re.compile(r"Hint: (.+)")
_NOT_WRITTEN = ("is not written yet", "is not defined")


@dataclass
class Result:
    """One DIR/<student>/<assignment>.json."""

    student: str
    assignment: str
    score: float
    max_score: float
    tests: list[dict]
    output: str = ""
    seconds: float | None = None
    retry: bool = False

    @property
    def graded(self) -> bool:
        """Whether hidden tests ran (False: scored 0 with a message, e.g. not a notebook)."""
        return bool(self.tests)


@dataclass
class Mistake:
    assignment: str
    function: str
    hint: str
    students: list[str] = field(default_factory=list)


def _function(test: dict) -> str:
    return str(test.get("name", "")).split(":", 1)[0].strip()


def load(folder: Path) -> list[Result]:
    """Every readable result file of a batch's DIR (others are named on stderr and left out)."""
    out = []
    for path in sorted(Path(folder).glob("*/*.json")):
        try:
            data = json.loads(path.read_bytes())
            extra = data.get("extra_data") if isinstance(data.get("extra_data"), dict) else {}
            seconds = extra.get("seconds")
            out.append(Result(
                path.parent.name, path.stem, float(data["score"]), float(data["max_score"]),
                [t for t in data.get("tests", []) if isinstance(t, dict)],
                str(data.get("output") or ""),
                float(seconds) if isinstance(seconds, (int, float)) else None,
                bool(extra.get("retry"))))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            print(f"warning: {path}: not a readable result file; left out of the report",
                  file=sys.stderr)
    return out


REVIEW = ": needs review"
"""How the name of a flag for the instructor ends (autograder/rules/review.py)."""


def needs_review(results: list[Result]) -> list[tuple[str, str, str, list[str]]]:
    """(student, assignment, cell, flagged lines quoted) of every flag for the instructor: code
    that used what no exercise needs (frames, gc, sys.modules, the grader's modules, ...)."""
    out = []
    for r in results:
        for t in r.tests:
            name = str(t.get("name", ""))
            if name.endswith(REVIEW) and float(t.get("max_score") or 0) == 0:
                lines = [line for line in str(t.get("output", "")).splitlines()
                         if line.startswith("cell ")]
                out.append((r.student, r.assignment, name[:-len(REVIEW)], lines))
    return out


def assignment_order(assignments) -> list[str]:
    """The course's assignments among these, in course order, then any other, sorted."""
    known = [a for a in ASSIGNMENTS if a in assignments]
    return known + sorted(set(assignments) - set(known))


def function_table(results: list[Result]) -> list[tuple[str, str, int, int, int]]:
    """(assignment, function, passed, failed, not written) per graded function, counting the
    notebooks whose tests ran; a function passes when all its autograded tests pass."""
    counts: dict[tuple[str, str], Counter] = defaultdict(Counter)
    for r in results:
        outcome: dict[str, str] = {}
        for t in r.tests:
            if float(t.get("max_score") or 0) <= 0:
                continue  # a written answer graded by hand
            f = _function(t)
            if t.get("status") == "passed":
                outcome.setdefault(f, "passed")
            elif any(p in str(t.get("output", "")) for p in _NOT_WRITTEN):
                outcome[f] = "missing"
            elif outcome.get(f) != "missing":
                outcome[f] = "failed"
        for f, o in outcome.items():
            counts[(r.assignment, f)][o] += 1
    rows = []
    for a in assignment_order({a for a, _ in counts}):
        functions = [f for f in ASSIGNMENTS[a].functions if (a, f) in counts] \
            if a in ASSIGNMENTS else []
        functions += sorted(f for b, f in counts if b == a and f not in functions)
        for f in functions:
            c = counts[(a, f)]
            rows.append((a, f, c["passed"], c["failed"], c["missing"]))
    return rows


def mistakes(results: list[Result]) -> list[Mistake]:
    """The named mistakes (hints), most frequent first, each counted once per notebook."""
    found: dict[tuple[str, str, str], Mistake] = {}
    for r in results:
        seen = set()
        for t in r.tests:
            if t.get("status") != "failed":
                continue
            for hint in _HINT.findall(str(t.get("output", ""))):
                key = (r.assignment, _function(t), hint.strip())
                if key not in seen:
                    seen.add(key)
                    found.setdefault(key, Mistake(*key)).students.append(r.student)
    found = _merge_variants(found)
    order = {a: i for i, a in enumerate(assignment_order({k[0] for k in found}))}
    return sorted(found.values(), key=lambda m: (-len(m.students), order[m.assignment],
                                                  m.function, m.hint))


_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z`(])")


def _merge_variants(found: dict[tuple[str, str, str], Mistake]) -> dict:
    """One mistake named with the input it was seen on ("Here t = sum(w * x + b). Skip None:
    ...") is one mistake: hints of a function that end with the same sentences, making up most
    of each hint, are counted together under those sentences."""
    suffixes: dict[tuple[str, str, str], set[str]] = defaultdict(set)
    for a, f, hint in found:
        parts = _SENTENCE.split(hint)
        for i in range(1, len(parts)):
            tail = " ".join(parts[i:])
            if len(tail) >= 40 and len(tail) >= 0.6 * len(hint):
                suffixes[(a, f, tail)].add(hint)
    merged: dict[tuple[str, str, str], Mistake] = {}
    for (a, f, hint), m in found.items():
        shared = [tail for (b, g, tail), hints in suffixes.items()
                  if (b, g) == (a, f) and hint in hints and len(hints) > 1]
        key = (a, f, max(shared, key=len)) if shared else (a, f, hint)
        target = merged.setdefault(key, Mistake(*key))
        target.students += [s for s in m.students if s not in target.students]
    return merged

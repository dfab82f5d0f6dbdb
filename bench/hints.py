#!/usr/bin/env python
"""Do the hidden tests name the learner's mistake? A probe of hand-written wrong submissions.

bench/probe/<id>.toml lists, for every graded function, mistakes a class makes (a transpose, a
dropped factor 2, a kink at 0, state kept across calls, values compared instead of identities,
...): the learner's whole answer cell, a label, and `words`, what a message naming that mistake
must contain (every item, case-insensitive; "a|b" is either), written with the mistake before
the grader's message was seen. The probe is kept apart from samples/ (which the hints were
written against). Each mistake becomes a submission (that one answer cell replaced, the rest the
worked solution: tools/mutants.py builds and grades them) and all are graded in one batch by
the standalone grader (`python -m autograder grade DIR --out OUT`).

For each mistake, over the failed hidden tests of its function (the messages the learner gets):
* false pass: it lost no points;
* misleading: a hint (the text after "Hint:", each alternative of a several-mistakes hint apart)
  lacks the entry's words: the message blames another mistake;
* named: no misleading hint, and one message holds every word;
* described: none of the above, and a message describes the difference itself ("What differs:",
  autograder/grade/difference.py: computed from the values, so truthful, in other words than the entry's)
  or the error itself ("What the error means:", autograder/grade/errors.py: read from its message);
* generic: caught, none of the above (no hint, no description, and the message does not say it).

With --visible, the same mistakes go through what the learner sees instead: the notebook's
visible checks of that function (its setup cells, the answer cells, the check cell without its
hidden tests, as tests/nbgrader/test_validate.py runs them), each in a forked child of one warm process per
assignment. "false pass" is then a mistake the visible checks let through (hidden tests exist for
those), and the kinds are decided on the one message the check raised.

    python bench/hints.py                              # every assignment
    python bench/hints.py 06_putting_it_together -v    # also every mistake's first message
    python bench/hints.py --visible                    # the visible checks' messages instead
"""

from __future__ import annotations

import argparse
import re
import sys
import time
import tomllib
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tools")]

from autograder.course import ASSIGNMENTS  # noqa: E402
from mutants import Mutant, grade, outcome, solutions  # noqa: E402

PROBE = ROOT / "bench" / "probe"
KINDS = ("named", "described", "generic", "misleading", "false pass")
DESCRIBED = ("What differs:", "What the error means:")
SEVERAL = "on this input more than one mistake gives this value:"


def load(assignments, probe: Path = PROBE) -> list[tuple[Mutant, list[str]]]:
    """(mutant, words) for every mistake of the probe, in file order."""
    out = []
    for assignment in assignments:
        path = probe / f"{assignment}.toml"
        if not path.is_file():
            continue
        for i, entry in enumerate(tomllib.loads(path.read_text())["mistake"]):
            if entry["function"] not in ASSIGNMENTS[assignment].functions:
                raise SystemExit(f"{path}: {entry['function']} is not a graded function of {assignment}")
            out.append((Mutant(assignment, entry["function"], i, entry["label"], entry["code"]),
                        list(entry["words"])))
    return out


def hints(text: str) -> list[str]:
    """Each hint of a message: what follows "Hint:" to the end of its line, a several-mistakes
    hint split into its alternatives."""
    found = []
    for hint in re.findall(r"Hint:\s*(.*)", text):
        if hint.startswith(SEVERAL):
            found += [re.sub(r"^\(\d+\)\s*", "", part.strip())
                      for part in hint[len(SEVERAL):].split(" Or: ")]
        else:
            found.append(hint)
    return found


def says(text: str, words: list[str]) -> bool:
    low = text.lower()
    return all(any(alt.lower() in low for alt in item.split("|")) for item in words)


def classify(m: Mutant, words: list[str], result: dict) -> tuple[str, str]:
    """(kind, the message that decided it)."""
    killed, failed, _ = outcome(m, result)
    if not killed:
        return "false pass", ""
    texts = [t["output"] for t in failed]
    for text in texts:
        wrong = [h for h in hints(text) if not says(h, words)]
        if wrong:
            return "misleading", text
    for text in texts:
        if says(text, words):
            return "named", text
    for text in texts:
        if any(d in text for d in DESCRIBED):
            return "described", text
    return "generic", texts[0] if texts else "(no test of the function ran)"


def visible(entries) -> dict[tuple[str, str], str]:
    """(mistake key, assignment) -> what the notebook's visible checks of the mistake's function
    say: "passed" or "raised <Type>: <message>"."""
    import os
    from concurrent.futures import ThreadPoolExecutor
    sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "nbgrader")]
    from test_validate import run_jobs, visible_checks

    def run(assignment):
        setup, checks = visible_checks(assignment)
        answers = solutions(assignment)
        jobs = [{"key": "solution", "cells": list(answers.values()) + list(checks.values())}]
        for m, _ in entries:
            if m.assignment == assignment:
                cells = [m.source if name == m.function else code for name, code in answers.items()]
                jobs.append({"key": m.key, "cells": cells + [checks[m.function]]})
        said = run_jobs(setup, jobs)
        if said["solution"] != "passed":
            raise SystemExit(f"the worked solution of {assignment} fails its visible checks: "
                             f"{said['solution']}")
        return {(key, assignment): text for key, text in said.items()}

    out = {}
    with ThreadPoolExecutor(max_workers=len(os.sched_getaffinity(0))) as pool:
        for part in pool.map(run, sorted({m.assignment for m, _ in entries})):
            out |= part
    return out


def classify_visible(words: list[str], said: str) -> tuple[str, str]:
    """(kind, the message) for what a visible check said of one mistake."""
    if said == "passed":
        return "false pass", ""
    if any(not says(h, words) for h in hints(said)):
        return "misleading", said
    return ("named" if says(said, words) else "described" if any(d in said for d in DESCRIBED)
            else "generic"), said


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("assignments", nargs="*", help="assignment ids (default: all in bench/probe)")
    parser.add_argument("--jobs", type=int, help="grading worker processes (default: the grader's)")
    parser.add_argument("--keep", type=Path, help="write the submissions and results here")
    parser.add_argument("--visible", action="store_true",
                        help="the notebook's visible checks instead of the hidden tests")
    parser.add_argument("--probe", type=Path, default=PROBE,
                        help="the folder of the probe's files (default bench/probe; bench/probe_fresh: "
                             "a held-out probe written from the release notebooks alone)")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="print every mistake's verdict and deciding message, not only the unnamed")
    args = parser.parse_args(argv)
    unknown = set(args.assignments) - set(ASSIGNMENTS)
    if unknown:
        parser.error(f"unknown assignment {sorted(unknown)}; known: {', '.join(ASSIGNMENTS)}")
    wanted = args.assignments or [a for a in ASSIGNMENTS if (args.probe / f"{a}.toml").is_file()]
    entries = load(wanted, args.probe)
    start = time.monotonic()
    if args.visible:
        said = visible(entries)
        problems = []
        verdicts = [(m, words, *classify_visible(words, said[(m.key, m.assignment)]))
                    for m, words in entries]
    else:
        results = grade([m for m, _ in entries], args.jobs, args.keep)
        problems = [f"the worked solution of {a} scores {r['score']:g} / {r['max_score']:g}"
                    for (student, a), r in results.items()
                    if student == "original" and r["score"] != r["max_score"]]
        verdicts = [(m, words, *classify(m, words, results[(m.key, m.assignment)]))
                    for m, words in entries]
    elapsed = time.monotonic() - start

    print(("The notebooks' visible checks" if args.visible else "Hints") + " on a probe of "
          "hand-written mistakes (bench/probe): of the mistakes caught, how many get a message "
          "naming them")
    header = f"{'assignment':26s} {'mistakes':>8s} {'caught':>6s} {'named':>6s} {'described':>9s} " \
             f"{'generic':>7s} {'misleading':>10s} {'false pass':>10s}  named/caught  +described"
    print(header)
    total = Counter()
    for assignment in wanted + ["total"]:
        if assignment == "total":
            count = total
        else:
            count = Counter(kind for m, _, kind, _ in verdicts if m.assignment == assignment)
            total.update(count)
        n = sum(count.values())
        if not n:
            continue
        caught = n - count["false pass"]
        print(f"{assignment:26s} {n:8d} {caught:6d} {count['named']:6d} {count['described']:9d} "
              f"{count['generic']:7d} {count['misleading']:10d} {count['false pass']:10d}  "
              f"{100 * count['named'] / max(caught, 1):11.1f}%  "
              f"{100 * (count['named'] + count['described']) / max(caught, 1):9.1f}%")

    shown = [v for v in verdicts if args.verbose or v[2] != "named"]
    if shown:
        print("\nMistakes" + ("" if args.verbose else " not named") + ": the message that decided")
    for m, words, kind, text in shown:
        print(f"  [{kind}] {m.assignment} {m.function}: {m.change}   (words: {' + '.join(words)})")
        for line in text.strip().splitlines()[:4]:
            print(f"      {line[:200]}")
    for line in problems:
        print(f"\nWARNING: {line}")
    print(f"\n{len(entries)} mistakes {'checked' if args.visible else 'graded'} in {elapsed:.0f} s. "
          "Re-run: python bench/hints.py " + " ".join(sys.argv[1:] if argv is None else argv))
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())

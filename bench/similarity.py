"""How well `python -m autograder similarity` tells copies from independent answers, and how fast.

The test set is this pack's own material: the correct answers of bench/variants/*.py (written
independently, from the release notebooks alone, in several styles each), the sample answers of
samples/*.toml (mostly wrong: the mistakes the hidden tests name) and the worked solution. Every
answer of at least MIN_TOKENS tokens gets a disguised copy (bench/disguise.py: identifiers renamed,
comments and blank lines changed, independent statements swapped, a loop turned into a
comprehension or back, one-line helpers inlined), and the class of each exercise is all of them:

* recall: the share of disguised copies reported with their original (similarity >= threshold);
* false positives: the share of independent pairs reported (two variants, or a variant and a
  sample: different authors; two samples are not independent, one author edited one solution);
* too short: answers under MIN_TOKENS are listed as such and never compared;
* speed: `python -m autograder similarity` end to end (notebooks read, compared, page written) on a
  class of --learners learners x 7 notebooks made from the same material (a tenth of them handing
  in a disguised copy of another's notebook), on the cores this machine has.

    .venv/bin/python bench/similarity.py                 # all three figures
    .venv/bin/python bench/similarity.py --no-speed      # recall and false positives only
    .venv/bin/python bench/similarity.py --threshold 0.5 # another threshold
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import random
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from disguise import disguise  # noqa: E402

from autograder.course import ASSIGNMENTS  # noqa: E402
from autograder.instructor.samples import load_scenarios  # noqa: E402
from autograder.similarity import compare  # noqa: E402
from autograder.similarity.answers import MIN_TOKENS, code_answer, release  # noqa: E402

VARIANT_FILES = sorted((ROOT / "bench" / "variants").glob("*.py"))


def variants() -> list[dict]:
    out = []
    for path in VARIANT_FILES:
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        out += [dict(v, source=f"{path.stem}#{i}") for i, v in enumerate(module.VARIANTS)]
    return out


def samples() -> list[dict]:
    """Each sample's answer to each function it writes (the solution's own answers left out, and
    the samples that are disguised copies of another, `copy_of`: the test set makes its own)."""
    out = []
    for a in ASSIGNMENTS:
        scenarios = load_scenarios(a)
        full = next((s.expect for s in scenarios if s.student == "solution"), {})
        for s in scenarios:
            if s.copy_of:
                continue
            for item, code in s.code.items():
                wrong = s.expect.get(item, full.get(item)) != full.get(item)
                out.append(dict(assignment=a, function=item, code=code,
                                added=s.added.get(item, ""), source=f"sample {s.student}",
                                wrong=wrong))
    return out


def material() -> dict[tuple[str, str], list[dict]]:
    """(assignment, function) -> every answer of the test set, the solution among them."""
    by = defaultdict(list)
    for v in variants():
        by[(v["assignment"], v["function"])].append(dict(v, kind="variant", wrong=False))
    for s in samples():
        by[(s["assignment"], s["function"])].append(dict(s, kind="sample"))
    for a in ASSIGNMENTS:
        for item, code in release(a).solution.items():
            if item in ASSIGNMENTS[a].functions:
                by[(a, item)].append(dict(assignment=a, function=item, code=code, added="",
                                          source="solution", kind="solution", wrong=False))
    return by


def _parses(code: str) -> bool:
    import ast
    try:
        ast.parse(code)
        return True
    except (SyntaxError, ValueError):
        return False


def build_class() -> list[tuple]:
    """Per exercise: (assignment, function, answers, origin, stub, solution), the class of the
    test set with a disguised copy of every answer long enough to tell apart."""
    out = []
    for (a, item), entries in sorted(material().items()):
        rel = release(a)
        stub, solution = rel.code.get(item, ""), rel.solution.get(item, "")
        answers, origin = [], {}
        for n, e in enumerate(entries):
            if not (_parses(e["code"]) and _parses(e["added"] or "")):
                continue
            name = f"{e['kind']}{n:03d}"
            ans = code_answer(name, a, item, [e["code"]], [e["added"]] if e["added"] else [], stub)
            if not ans.too_short:
                try:
                    code, added, _ = disguise(e["code"], e["added"] or "", {item}, seed=n)
                except RecursionError:  # a sample nested past Python's limit: no copy
                    continue
                copy = code_answer(f"copy{n:03d}", a, item, [code], [added] if added else [],
                                   stub)
                answers.append(copy)
                origin[copy.student] = dict(e, kind="copy", of=name)
            answers.append(ans)
            origin[name] = e
        out.append((a, item, answers, origin, stub, solution))
    return out


def judged(classes: list[tuple]):
    """Every pair the figures judge, per exercise of `build_class()`'s classes: (assignment,
    function, group, pairs), group the compared answers (too short ones apart) and pairs
    (x, y, kind, origin of x, origin of y), kind "copy" (an answer and its disguised copy) or
    "independent" (two answers of different authors; two samples, or a sample and the solution,
    are not: one author edited one solution)."""
    for a, item, answers, origin, stub, solution in classes:
        group = compare.Group(a, item, "code", [x for x in answers if not x.too_short],
                              [x for x in answers if x.too_short])
        pairs = []
        for x in answers:
            if origin[x.student]["kind"] != "copy" and f"copy{x.student[-3:]}" in origin:
                pairs.append((x.student, f"copy{x.student[-3:]}", "copy", origin[x.student],
                              origin[f"copy{x.student[-3:]}"]))
        long_ones = [x for x in group.answers if origin[x.student]["kind"] != "copy"]
        for i, x in enumerate(long_ones):
            for y in long_ones[i + 1:]:
                if {origin[x.student]["kind"], origin[y.student]["kind"]} <= {"sample",
                                                                             "solution"}:
                    continue
                pairs.append((x.student, y.student, "independent", origin[x.student],
                              origin[y.student]))
        yield a, item, group, pairs


def tally(found: list[tuple], thresholds: list[float]) -> dict:
    """Recall and false positives per threshold from (assignment, function, kind, origin of x,
    origin of y, similarity, same token for token) of every judged pair."""
    results = {t: dict(copies=0, found=0, independent=0, reported=0, misses=[], false=[],
                       same_tokens=0, lowest=1.0) for t in thresholds}
    for a, item, kind, ox, oy, value, same in found:
        for t, r in results.items():
            if kind == "copy":
                r["copies"] += 1
                r["lowest"] = min(r["lowest"], value)
                if value >= t:
                    r["found"] += 1
                else:
                    r["misses"].append((a, item, ox["source"], value))
            else:
                r["independent"] += 1
                if value >= t:
                    r["reported"] += 1
                    r["same_tokens"] += same
                    r["false"].append((a, item, ox["source"], oy["source"], value))
    return results


def measure(classes: list[tuple], thresholds: list[float], verbose: bool = False) -> dict:
    """Recall and false positives of each threshold, on `build_class()`'s classes."""
    found, short = [], 0
    weights = {"wrong": [], "right": []}
    for a, item, group, pairs in judged(classes):
        _, _, answers, origin, stub, solution = next(c for c in classes if c[:2] == (a, item))
        short += sum(origin[x.student]["kind"] != "copy" for x in group.short)
        compare.compare_group(group, stub, solution, threshold=0.0)
        scores = {(p.a.student, p.b.student): p for p in group.pairs}
        scores.update({(p.b.student, p.a.student): p for p in group.pairs})
        text = {x.student: x.text for x in group.answers}
        for x, y, kind, ox, oy in pairs:
            p = scores.get((x, y))
            value = p.similarity if p else 0.0
            same = kind != "copy" and value > 0 and \
                compare.filter_code(text[x]).text == compare.filter_code(text[y]).text
            found.append((a, item, kind, ox, oy, value, same))
            if kind == "copy" and p is not None:
                weights["wrong" if ox["wrong"] else "right"].append(p.weight)
    results = tally(found, thresholds)
    for r in results.values():
        r["short"], r["weights"] = short, weights
    if verbose:
        report_verbose(results[thresholds[0]])
    return results


def report_verbose(r: dict) -> None:
    for m in r["misses"]:
        print("missed copy:", *m)
    for f in sorted(r["false"], key=lambda f: -f[-1]):
        print("independent pair reported:", *f)


def write_class(root: Path, learners: int, seed: int = 0) -> int:
    """`learners` x 7 notebooks in root/<student>/<assignment>/: the release notebook with the
    outputs and figures of the executed worked solution (solutions/, as a learner hands in a
    notebook that ran) and every answer cell holding an answer of the test set, half of them
    disguised; returns the notebooks written."""
    import json

    rng = random.Random(seed)
    by = material()
    written = 0
    for a, spec in ASSIGNMENTS.items():
        path = ROOT / "release" / a / spec.notebook
        if not path.is_file():
            continue
        notebook = json.loads(path.read_text())
        executed = ROOT / "solutions" / a / spec.notebook
        if executed.is_file():
            outputs = {c.get("id"): c.get("outputs") for c in json.loads(executed.read_text())["cells"]
                       if c.get("outputs")}
            notebook["cells"] = [dict(c, outputs=outputs[c.get("id")]) if c.get("id") in outputs
                                 else c for c in notebook["cells"]]
        answer_cells = [i for i, c in enumerate(notebook["cells"])
                        if c.get("metadata", {}).get("nbgrader", {}).get("solution")
                        and c["cell_type"] == "code"]
        pool = {item: [e for e in by.get((a, item), []) if _parses(e["code"])
                       and _parses(e["added"] or "")] for item in spec.functions}
        for n in range(learners):
            cells = list(notebook["cells"])
            for i in answer_cells:
                item = cells[i]["metadata"]["nbgrader"]["grade_id"]
                if not pool.get(item):
                    continue
                e = rng.choice(pool[item])
                code, added = e["code"], e["added"] or ""
                if rng.random() < 0.5:
                    try:
                        code, added, _ = disguise(code, added, {item}, seed=rng.randrange(10**6))
                    except RecursionError:
                        pass
                cells[i] = dict(cells[i], source=code + (f"\n\n{added}" if added else ""))
            out = root / f"learner{n:03d}" / a / spec.notebook
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(dict(notebook, cells=cells)))
            written += 1
    return written


def speed(learners: int) -> tuple[int, float, str]:
    """Notebooks, seconds and the last line of `python -m autograder similarity` on a class."""
    import subprocess
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "submitted"
        count = write_class(root, learners)
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "autograder", "similarity", str(root),
                               "--out", str(Path(tmp) / "out")], cwd=ROOT, check=True,
                              capture_output=True, text=True)
        seconds = time.perf_counter() - start
    return count, seconds, done.stdout.strip().splitlines()[-1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threshold", type=float, default=compare.THRESHOLD)
    parser.add_argument("--no-speed", action="store_true")
    parser.add_argument("--learners", type=int, default=300)
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()
    r = measure(build_class(), [args.threshold], args.verbose)[args.threshold]
    print(f"threshold {args.threshold:g}")
    print(f"recall: {r['found']} of {r['copies']} disguised copies of answers of at least "
          f"{MIN_TOKENS} tokens reported ({r['found'] / max(1, r['copies']):.1%}); the lowest "
          f"copy's similarity {r['lowest']:.3f}")
    print(f"false positives: {r['reported']} of {r['independent']} independent pairs reported "
          f"({r['reported'] / max(1, r['independent']):.2%}), {r['same_tokens']} of them the same "
          "token for token")
    print(f"too short: {r['short']} answers listed as too short to tell apart, never compared")
    if not args.no_speed:
        count, seconds, line = speed(args.learners)
        print(f"speed: {count} notebooks of {args.learners} learners in {seconds:.1f} s, end to "
              f"end on {os.cpu_count()} cores ({line})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

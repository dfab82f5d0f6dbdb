"""Dolos on the test set of bench/similarity.py, beside copydetect (issue 42 item 2: which library).

Dolos (Ghent University; @dodona/dolos-lib, a Node package) fingerprints the tree-sitter syntax tree
of each file by winnowing; the similarity command is built on copydetect (PyPI). This script gives
Dolos the very answers bench/similarity.py measures copydetect on (the same disguised copies, the
same independent pairs, the too-short answers left out the same way; the release's answer cell as
Dolos's ignored file, what more than --max-share of an exercise's answers hold left out, as
copydetect's side does) and prints, for Dolos's defaults and the settings asked for:

* recall at the highest threshold that reports at most 5 % of independent pairs, and at most
  copydetect's own share (at its threshold);
* the share of independent pairs reported at the highest threshold that reports every copy;
* speed: the answers of --learners x 7 notebooks (bench/similarity.py's class), compared by
  Dolos, and by copydetect, on this machine (reading the notebooks is the same for both and timed
  apart).

Optional: it needs node and npm, which the course pack does not (so `make test` and CI do not run
it). Without them it says so and stops; the first run installs @dodona/dolos-lib (DOLOS_VERSION)
with npm into --dolos-dir.

    .venv/bin/python bench/similarity_dolos.py                      # Dolos's defaults and 12x8
    .venv/bin/python bench/similarity_dolos.py --settings 23x17,8x4 # k-gram length x window
    .venv/bin/python bench/similarity_dolos.py --no-speed
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import similarity as bench  # noqa: E402  (bench/similarity.py)

from autograder.course import ASSIGNMENTS  # noqa: E402
from autograder.similarity import compare  # noqa: E402
from autograder.similarity.answers import release  # noqa: E402

DOLOS_VERSION = "3.5.1"
SCRIPT = ROOT / "bench" / "dolos_compare.mjs"
DEFAULT_DIR = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "autograder-dolos"


def missing_tools() -> list[str]:
    return [tool for tool in ("node", "npm") if shutil.which(tool) is None]


def install(folder: Path) -> str | None:
    """Install @dodona/dolos-lib into `folder` unless it is there; None, or why it failed."""
    if (folder / "node_modules" / "@dodona" / "dolos-lib" / "package.json").is_file():
        return None
    folder.mkdir(parents=True, exist_ok=True)
    print(f"installing @dodona/dolos-lib@{DOLOS_VERSION} into {folder} (npm; a minute or two)",
          flush=True)
    done = subprocess.run(["npm", "install", "--prefix", str(folder), "--no-audit", "--no-fund",
                           f"@dodona/dolos-lib@{DOLOS_VERSION}"], capture_output=True, text=True)
    if done.returncode:
        return done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "npm failed"
    return None


def run_dolos(folder: Path, groups: list[dict], k: int, window: int,
              max_share: float | None) -> dict:
    """dolos_compare.mjs on `groups`: {"pairs": {id: [[a, b, similarity]]}, "seconds", ...},
    plus "wall": the seconds of the whole node process (start, parsers loaded, compared)."""
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "groups.json"
        data.write_text(json.dumps(dict(groups=groups, options=dict(
            kgramLength=k, kgramsInWindow=window, maxFingerprintPercentage=max_share))))
        start = time.perf_counter()
        done = subprocess.run(["node", str(SCRIPT), str(folder), str(data)], capture_output=True,
                              text=True)
        wall = time.perf_counter() - start
    if done.returncode:
        raise RuntimeError(f"dolos_compare.mjs failed:\n{done.stderr[-2000:]}")
    return dict(json.loads(done.stdout), wall=wall)


def test_set_groups() -> tuple[list[tuple], list[dict]]:
    """The judged pairs of bench/similarity.py's test set, and its compared answers as groups."""
    judged, groups = [], []
    for a, item, group, pairs in bench.judged(bench.build_class()):
        stub = release(a).code.get(item, "")
        groups.append(dict(id=f"{a}/{item}", stub=stub,
                           answers=[dict(name=x.student, text=x.text) for x in group.answers]))
        judged.append((a, item, pairs))
    return judged, groups


def similarities(judged: list[tuple], pairs: dict) -> list[tuple]:
    """bench.tally's rows from Dolos's pairs (a pair Dolos does not list shares nothing: 0)."""
    rows = []
    for a, item, judged_pairs in judged:
        got = {}
        for x, y, value in pairs.get(f"{a}/{item}", []):
            got[(x, y)] = got[(y, x)] = value
        for x, y, kind, ox, oy in judged_pairs:
            rows.append((a, item, kind, ox, oy, got.get((x, y), 0.0), False))
    return rows


def figures(rows: list[tuple], cap: float) -> dict:
    """Recall at the highest threshold with at most `cap` of independent pairs reported, and the
    false positives at the highest threshold that reports every copy."""
    copies = np.array([r[5] for r in rows if r[2] == "copy"])
    independent = np.sort(np.array([r[5] for r in rows if r[2] != "copy"]))[::-1]
    allowed = int(np.floor(cap * len(independent)))
    # the lowest threshold reporting at most `allowed`: just above the (allowed+1)-th highest
    t_cap = float(np.nextafter(independent[allowed], 2)) if allowed < len(independent) else 0.0
    t_all = float(copies.min()) if len(copies) else 1.0
    return dict(copies=len(copies), independent=len(independent),
                cap_threshold=t_cap, cap_found=int((copies >= t_cap).sum()),
                cap_reported=int((independent >= t_cap).sum()),
                all_threshold=t_all, all_reported=int((independent >= t_all).sum()))


def speed(learners: int, folder: Path, settings: list[tuple[int, int]],
          max_share: float | None) -> None:
    from autograder.similarity.run import groups_of, read_all
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "submitted"
        count = bench.write_class(root, learners)
        start = time.perf_counter()
        answers, problems, filtered = read_all(root)
        reading = time.perf_counter() - start
    print(f"speed: {count} notebooks of {learners} learners read (answers out, shared by both) "
          f"in {reading:.1f} s on {os.cpu_count()} cores")
    start = time.perf_counter()
    compared = groups_of(answers, problems, filtered=filtered)
    print(f"  copydetect: {time.perf_counter() - start:.1f} s to compare them "
          f"({sum(len(g.pairs) for g in compared)} pairs reported)")
    groups = []
    for g in compared:
        if g.kind != "code":  # written answers: Dolos has no plain-text language
            continue
        groups.append(dict(id=f"{g.assignment}/{g.item}", stub=release(g.assignment).code.get(
            g.item, ""), answers=[dict(name=x.student, text=x.text) for x in g.answers]))
    for k, window in settings:
        got = run_dolos(folder, groups, k, window, max_share)
        print(f"  Dolos {k}x{window}: {got['wall']:.1f} s to compare the code answers "
              f"({got['seconds']:.1f} s of it comparing, the rest node starting; "
              f"{sum(len(v) for v in got['pairs'].values())} pairs sharing a fingerprint)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--settings", default="23x17,12x8",
                        help="Dolos's k-gram length x window, comma-separated (23x17: its "
                             "defaults)")
    parser.add_argument("--max-share", type=float, default=compare.COMMON,
                        help="Dolos's maxFingerprintPercentage (copydetect's side: COMMON); 0: "
                             "none, Dolos's default")
    parser.add_argument("--dolos-dir", type=Path, default=DEFAULT_DIR)
    parser.add_argument("--no-speed", action="store_true")
    parser.add_argument("--learners", type=int, default=300)
    args = parser.parse_args()
    missing = missing_tools()
    if missing:
        print(f"skipped: {' and '.join(missing)} not found; Dolos is a Node package, so this "
              "measurement needs node and npm (the course pack itself does not)")
        return 0
    failed = install(args.dolos_dir)
    if failed:
        print(f"error: npm could not install @dodona/dolos-lib: {failed}", file=sys.stderr)
        return 1
    settings = [tuple(int(n) for n in s.split("x")) for s in args.settings.split(",")]
    max_share = args.max_share or None

    judged, groups = test_set_groups()
    ours = bench.measure(bench.build_class(), [compare.THRESHOLD])[compare.THRESHOLD]
    ours_share = ours["reported"] / max(1, ours["independent"])
    print(f"copydetect (threshold {compare.THRESHOLD:g}): {ours['found']} of {ours['copies']} "
          f"copies, {ours['reported']} of {ours['independent']} independent pairs "
          f"({ours_share:.2%})")
    for k, window in settings:
        got = run_dolos(args.dolos_dir, groups, k, window, max_share)
        rows = similarities(judged, got["pairs"])
        name = f"Dolos {got['version']} {k}x{window}"
        for cap in sorted({0.05, ours_share}, reverse=True):
            f = figures(rows, cap)
            print(f"{name}: at most {cap:.2%} of independent pairs (threshold "
                  f"{f['cap_threshold']:.3f}): {f['cap_found']} of {f['copies']} copies "
                  f"({f['cap_found'] / max(1, f['copies']):.1%}), {f['cap_reported']} of "
                  f"{f['independent']} independent pairs")
        print(f"{name}: every copy (threshold {f['all_threshold']:.3f}): {f['all_reported']} of "
              f"{f['independent']} independent pairs "
              f"({f['all_reported'] / max(1, f['independent']):.2%})")
    if not args.no_speed:
        speed(args.learners, args.dolos_dir, settings, max_share)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Does the pack work on the newest torch that pip installs? (`make newest-torch`)

Grading pins torch (constraints.txt); a learner's `pip install torch` gets whatever is newest.
This script builds a side venv (default .venv-newest/, gitignored) with the newest torch pip
gives on this machine (constraints.txt's other pins kept, its torch pin not), installs the pack
into it (`pip install -e .`), and then, under that venv's python and torch:

  a. runs every solutions/ notebook top to bottom with nbclient (pass/fail, seconds): no
     error and nothing written to stderr (a warning fails a graded cell in nbgrader);
  b. runs `nbgrader validate` on every solutions notebook (must pass) and every release
     notebook (must fail);
  c. grades every solution with `python -m autograder grade` (full marks) and every unanswered
     release (0); the jailed grader runs the side venv's python (the jail binds sys.prefix).

It prints the torch versions and a table of figures, and exits non-zero if any expectation
fails. Minutes (the first run also downloads or copies torch), so `make test` does not run it.

    python3 tools/newest_torch.py                  # build or update .venv-newest, then check
    python3 tools/newest_torch.py --no-install     # reuse the side venv as it is
    python3 tools/newest_torch.py --venv DIR 07_custom_autograd

With --python PYTHON the side venv is built with that interpreter (`make newest-python`: the
newest CPython found here, e.g. python3.13), and --tests also runs the grader's own tests of the
jail, the sandbox, the recorder and the by-hand subset (TESTS) under it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
INSIDE = "--inside-side-venv"


def _pins_without_torch(tmp: Path) -> list[str]:
    """pip arguments for constraints.txt's pins, the torch pin left out ([] if none is left)."""
    kept = [line for line in (ROOT / "constraints.txt").read_text().splitlines()
            if line.strip() and not line.lstrip().startswith("#")
            and re.split(r"[\s<>=!~;\[]", line.strip(), maxsplit=1)[0].lower() != "torch"]
    if not kept:
        return []
    path = tmp / "constraints-without-torch.txt"
    path.write_text("\n".join(kept) + "\n")
    return ["-c", str(path)]


TESTS = ["tests/jail/test_jail.py", "tests/jail/test_sandbox.py", "tests/jail/test_forgery.py",
         "tests/rules/test_subset.py", "tests/course/test_solutions.py"]
"""The tests `--tests` runs in the side venv: the ones that depend on the interpreter's internals
(threads, audit hooks, sys.monitoring, the ast of by-hand answers)."""


def build_venv(venv: Path, interpreter: str = sys.executable, tests: bool = False) -> None:
    python = venv / "bin" / "python"
    if not python.exists():
        print(f"creating {venv} with {interpreter}", flush=True)
        subprocess.run([interpreter, "-m", "venv", str(venv)], check=True)
    with tempfile.TemporaryDirectory() as tmp:
        pins = _pins_without_torch(Path(tmp))
        pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        print("installing the newest torch pip gives here (this can take minutes)", flush=True)
        subprocess.run(pip + ["--upgrade", "torch"] + pins, check=True)
        print("installing the pack: pip install -e .", flush=True)
        subprocess.run(pip + ["-e", str(ROOT) + ("[test]" if tests else "")] + pins, check=True, cwd=ROOT)


# ----------------------------------------------------------------------------------------------
# Inside the side venv.

def _version(python: Path) -> str:
    if not python.exists():
        return "(no such venv)"
    run = subprocess.run([str(python), "-c", "import torch; print(torch.__version__)"],
                         capture_output=True, text=True)
    return run.stdout.strip() or "(torch not importable)"


def _env() -> dict[str, str]:
    bin_dir = str(Path(sys.executable).parent)
    return {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""), "MPLBACKEND": "Agg"}


def run_notebook(path: Path, work: Path) -> tuple[bool, str]:
    """Execute a copy of `path` top to bottom; also check that its kernel ran this venv's torch."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    import torch

    nb = nbformat.read(path, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell("import sys, torch\nprint(sys.prefix, torch.__version__)"))
    try:
        NotebookClient(nb, timeout=600, kernel_name="python3",
                       resources={"metadata": {"path": str(work)}}).execute()
    except CellExecutionError as error:
        return False, str(error).strip().splitlines()[-1][:300]
    printed = "".join(o.get("text", "") for o in nb.cells[-1].outputs).split()
    if printed != [sys.prefix, torch.__version__]:
        return False, f"the kernel ran {printed}, not {sys.prefix} with torch {torch.__version__}"
    # A warning (a deprecation, say) lands in the cell's stderr, which nbgrader scores as a
    # failure in a graded cell and a learner sees in red anywhere.
    stderr = [f"cell {i}: {o.get('text', '')[:200]}" for i, c in enumerate(nb.cells) if c.cell_type == "code"
              for o in c.outputs if o.output_type == "stream" and o.name == "stderr"]
    return (False, f"stderr output in {'; '.join(stderr)}") if stderr else (True, "")


def validate(path: Path, course: Path) -> tuple[bool, str]:
    """(passed, the last lines nbgrader validate printed)."""
    run = subprocess.run([sys.executable, "-m", "nbgrader", "validate", str(path)], cwd=course,
                         env=_env(), capture_output=True, text=True, timeout=900)
    out = run.stdout + run.stderr
    passed = "Success! Your notebook passes all the tests." in out
    failed = "VALIDATION FAILED" in out
    if passed == failed:
        return failed, f"neither success nor failure: {out[-500:]}"
    return passed, ""


def grade(path: Path, work: Path) -> tuple[float, float, str]:
    """(score, max score, problem) from `python -m autograder grade NOTEBOOK --json`."""
    out = work / f"{path.parent.name}-{path.parent.parent.name}.json"
    run = subprocess.run([sys.executable, "-m", "autograder", "grade", str(path), "--json", str(out),
                          "--quiet"], cwd=work, env=_env(), capture_output=True, text=True, timeout=900)
    if not out.exists():
        return 0.0, 0.0, f"no result (exit {run.returncode}): {(run.stdout + run.stderr)[-500:]}"
    result = json.loads(out.read_text())
    tests = result.get("tests", [])
    score = float(result.get("score", sum(t.get("score", 0) for t in tests)))
    top = float(sum(t.get("max_score", 0) for t in tests))
    broken = [t.get("name", "?") for t in tests if "could not grade" in str(t.get("output", ""))]
    return score, top, f"could not grade: {broken}" if broken else ""


def check(assignments: list[str], pinned: str) -> int:
    import nbgrader
    import torch

    from autograder.course import ASSIGNMENTS

    chosen = assignments or [a for a in ASSIGNMENTS if ASSIGNMENTS[a].source.is_file()]
    print(f"side venv {sys.prefix}: python {sys.version.split()[0]}, torch {torch.__version__}, "
          f"nbgrader {nbgrader.__version__}; grading pins torch {pinned}", flush=True)
    rows, problems = [], []
    with tempfile.TemporaryDirectory(prefix="newest-torch-") as tmp:
        work = Path(tmp)
        shutil.copy(ROOT / "nbgrader_config.py", work)
        for assignment in chosen:
            nb = ASSIGNMENTS[assignment].notebook
            solution, release = ROOT / "solutions" / assignment / nb, ROOT / "release" / assignment / nb
            run_dir = work / "run" / assignment
            run_dir.mkdir(parents=True)
            start = time.perf_counter()
            ran, why = run_notebook(solution, run_dir)
            seconds = time.perf_counter() - start
            if not ran:
                problems.append(f"{assignment}: solution stops: {why}")
            start = time.perf_counter()
            sol_valid, why = validate(solution, work)
            if not sol_valid:
                problems.append(f"{assignment}: nbgrader validate fails the solution {why}")
            rel_valid, why = validate(release, work)
            if rel_valid or why:
                problems.append(f"{assignment}: nbgrader validate passes the unanswered release {why}")
            validate_s = time.perf_counter() - start
            start = time.perf_counter()
            sol_score, sol_max, why = grade(solution, work)
            if why or sol_max == 0 or sol_score != sol_max:
                problems.append(f"{assignment}: grade of the solution {sol_score:g}/{sol_max:g} {why}")
            rel_score, rel_max, why = grade(release, work)
            if why or rel_score != 0:
                problems.append(f"{assignment}: grade of the release {rel_score:g}/{rel_max:g} {why}")
            grade_s = time.perf_counter() - start
            rows.append((assignment, "pass" if ran else "FAIL", seconds,
                         "pass" if sol_valid else "FAIL", "fails" if not rel_valid else "PASSES", validate_s,
                         f"{sol_score:g}/{sol_max:g}", f"{rel_score:g}/{rel_max:g}", grade_s))
            print(f"{assignment}: run {rows[-1][1]} {seconds:.1f} s, validate solution {rows[-1][3]} "
                  f"release {rows[-1][4]}, grade solution {rows[-1][6]} release {rows[-1][7]}", flush=True)
    print(f"\ntorch {torch.__version__} (side venv) vs {pinned} (pinned)")
    print("| assignment | solution runs | s | validate solution | validate release | s "
          "| grade solution | grade release | s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]:.1f} | {r[3]} | {r[4]} | {r[5]:.1f} | {r[6]} | {r[7]} | {r[8]:.1f} |")
    for p in problems:
        print("FAILED", p)
    print(f"{len(chosen) - len({p.split(':')[0] for p in problems})} of {len(chosen)} assignments "
          f"as expected on torch {torch.__version__}")
    return 1 if problems else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("assignments", nargs="*", help="assignment ids (default: all)")
    parser.add_argument("--venv", default=str(ROOT / ".venv-newest"), help="the side venv (default .venv-newest)")
    parser.add_argument("--no-install", action="store_true", help="reuse the side venv as it is")
    parser.add_argument("--pinned", default=str(ROOT / ".venv" / "bin" / "python"),
                        help="the python of the pinned venv, to print its torch version")
    parser.add_argument("--python", default=sys.executable,
                        help="the interpreter the side venv is built with (default: this one)")
    parser.add_argument("--tests", action="store_true",
                        help="also run the interpreter-dependent tests (TESTS) in the side venv")
    parser.add_argument(INSIDE, action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inside_side_venv:
        return check(args.assignments, _version(Path(args.pinned)))
    venv = Path(args.venv).absolute()
    if not args.no_install or not (venv / "bin" / "python").exists():
        build_venv(venv, args.python, args.tests)
    python = str(venv / "bin" / "python")
    code = subprocess.run([python, str(Path(__file__).resolve()), INSIDE,
                           "--pinned", args.pinned, *args.assignments], cwd=ROOT).returncode
    if args.tests:
        print(f"\nthe grader's interpreter-dependent tests under {python}", flush=True)
        tested = subprocess.run([python, "-m", "pytest", "-q", "-n", "2", "-p", "no:cacheprovider",
                                 *TESTS], cwd=ROOT).returncode
        code = code or tested
    return code


if __name__ == "__main__":
    sys.exit(main())

"""Gradescope: `python -m autograder gradescope ASSIGNMENT --out autograder.zip`.

The zip holds, at its root, what Gradescope's autograder image expects:

* `setup.sh`, run once when Gradescope builds the image: bubblewrap (the jail)
  and the Python venv for the grader, i.e. `/autograder/venv` with the pinned
  torch (from `constraints.txt`), the grading dependencies and this package
  (`pip install -e /autograder/source`);
* `run_autograder`, run for each submission: grades the one `.ipynb` in
  `/autograder/submission/` in the jail and writes
  `/autograder/results/results.json` (CONTRACT.md's format, the same scores as
  `python -m autograder grade NB --json`);
* the grader for this one assignment: the `autograder/` package with only this
  assignment's hidden tests, its source notebook (the setup cells), and
  `pyproject.toml`, `constraints.txt`, `gradescope.json` (what was built).

Gradescope unpacks the zip into `/autograder/source/`. `run_autograder` runs
`$AUTOGRADER_PYTHON` when it is set (an already-installed environment, as the
tests do), else `/autograder/venv/bin/python`, else `python3`;
`$AUTOGRADER_ROOT` replaces `/autograder`.
"""

from __future__ import annotations

import argparse
import importlib
import io
import json
import os
import re
import shlex
import sys
import time
import zipfile
from pathlib import Path

from autograder.course import ASSIGNMENTS, ROOT

PACKAGE = ROOT / "autograder"
NOT_FOR_GRADING = ("torch", "nbgrader", "jupyterlab", "notebook", "nbclient", "ipykernel")
"""pyproject dependencies that setup.sh leaves out: torch (installed first, pinned) and the
Jupyter stack (grading one notebook never runs a kernel); it installs all the others."""
CONFIG = "gradescope.json"
_EPOCH = (2020, 1, 1, 0, 0, 0)
"""Every zip entry's timestamp: the same inputs give the same zip."""


# --- building the zip -------------------------------------------------------------------------

def package_files(assignment: str) -> list[Path]:
    """The package's files the grader of `assignment` needs (no other assignment's hidden tests)."""
    keep = []
    for path in sorted(PACKAGE.rglob("*")):
        rel = path.relative_to(PACKAGE)
        if not path.is_file() or "__pycache__" in rel.parts or path.suffix in (".pyc", ".pyo"):
            continue
        if rel.parts[0] == "tests" and path.name.startswith("test_") \
                and path.name != f"test_{assignment}.py":
            continue
        keep.append(path)
    return keep


def torch_pin() -> str:
    """`torch==<version>` as pinned in constraints.txt."""
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if re.match(r"torch\s*==", line):
            return line.replace(" ", "")
    raise SystemExit("error: constraints.txt pins no torch==<version>")


def grading_requirements() -> list[str]:
    """The pyproject's requirements that grading needs besides torch (its ranges as written)."""
    import tomllib  # Python 3.11; building the zip only (Gradescope's python3 may be 3.10)
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    out = []
    for dep in deps:
        name = re.split(r"[<>=!~ \[;]", dep, maxsplit=1)[0].lower()
        if name not in NOT_FOR_GRADING:
            out.append(dep)
    return out


def max_score(assignment: str) -> float:
    """The autograded points of `assignment`: the sum of its hidden tests' graded markers."""
    module = importlib.import_module(f"autograder.tests.test_{assignment}")
    total = 0.0
    for name, value in vars(module).items():
        if name.startswith("test_") and callable(value):
            for mark in getattr(value, "pytestmark", []):
                if mark.name == "graded":
                    total += float(mark.kwargs.get("points", 1))
    return total


SETUP = """#!/usr/bin/env bash
# Gradescope autograder setup for {assignment} (written by `python -m autograder gradescope`).
# Gradescope runs this once, as root, from /autograder/source where the zip is unpacked.
# Installs bubblewrap (the jail for learner code) and a venv in $ROOT/venv holding
# {torch}, the grading dependencies and the grader itself.
set -euo pipefail
ROOT="${{AUTOGRADER_ROOT:-/autograder}}"
SOURCE="$ROOT/source"
VENV="$ROOT/venv"
# PyTorch's CPU-only wheel index (the small CPU build); empty: pip's configured index.
TORCH_INDEX_URL="${{TORCH_INDEX_URL:-{torch_index}}}"

need=()
command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
command -v setpriv >/dev/null 2>&1 || need+=(util-linux)
command -v python3 >/dev/null 2>&1 || need+=(python3)
python3 -c "import ensurepip" >/dev/null 2>&1 || need+=(python3-venv)
if [ "${{#need[@]}}" -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${{need[@]}}"
fi

[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip install --quiet --disable-pip-version-check)
if [ -n "$TORCH_INDEX_URL" ]; then
  "${{PIP[@]}}" --index-url "$TORCH_INDEX_URL" {torch}
else
  "${{PIP[@]}}" {torch}
fi
"${{PIP[@]}}" {requirements}
"${{PIP[@]}}" --no-deps -e "$SOURCE"
"$VENV/bin/python" -c "import torch, autograder.instructor.gradescope; print('torch', torch.__version__)"
"""

RUN = """#!/usr/bin/env bash
# Gradescope runs this for each submission: grades the one .ipynb in $ROOT/submission/ in the
# jail and writes $ROOT/results/results.json. $AUTOGRADER_PYTHON: an already-installed
# environment to use instead of the one setup.sh made (e.g. a test's).
ROOT="${{AUTOGRADER_ROOT:-/autograder}}"
PYTHON="${{AUTOGRADER_PYTHON:-$ROOT/venv/bin/python}}"
[ -x "$PYTHON" ] || PYTHON=python3
cd "$ROOT/source" || exit 1
exec "$PYTHON" -m autograder.instructor.gradescope run --root "$ROOT"
"""


def _add(z: zipfile.ZipFile, name: str, data: bytes, mode: int = 0o644) -> None:
    info = zipfile.ZipInfo(name, _EPOCH)
    info.external_attr = (0o100000 | mode) << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    z.writestr(info, data)


def build_zip(assignment: str, out: Path, *, torch_index: str = "", jailed: bool = True) -> Path:
    """Write the Gradescope autograder zip of `assignment` to `out`."""
    a = ASSIGNMENTS[assignment]
    if not a.source.is_file():
        raise ValueError(f"{assignment}: no source notebook {a.source.relative_to(ROOT)}")
    if not (PACKAGE / "tests" / f"test_{assignment}.py").is_file():
        raise ValueError(f"{assignment}: no hidden tests autograder/tests/test_{assignment}.py")
    if any(c in torch_index for c in "\"'`$\\\n "):
        raise ValueError("--torch-index-url: not a plain URL")
    config = {"assignment": assignment, "notebook": a.notebook, "max_score": max_score(assignment),
              "jail": jailed, "torch": torch_pin()}
    setup = SETUP.format(assignment=assignment, torch=shlex.quote(torch_pin()),
                         torch_index=torch_index,
                         requirements=" ".join(shlex.quote(r) for r in grading_requirements()))
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        _add(z, "setup.sh", setup.encode(), 0o755)
        _add(z, "run_autograder", RUN.format().encode(), 0o755)
        _add(z, CONFIG, (json.dumps(config, indent=2) + "\n").encode())
        for name in ("pyproject.toml", "constraints.txt"):
            _add(z, name, (ROOT / name).read_bytes())
        _add(z, f"source/{a.id}/{a.notebook}", a.source.read_bytes())
        for path in package_files(assignment):
            _add(z, path.relative_to(ROOT).as_posix(), path.read_bytes())
    out.write_bytes(buffer.getvalue())
    return out


def build(assignment: str, out: Path, torch_index: str = "", jailed: bool = True) -> int:
    """The `gradescope` command."""
    if assignment not in ASSIGNMENTS:
        print(f"error: no assignment {assignment!r} (one of: {', '.join(ASSIGNMENTS)})",
              file=sys.stderr)
        return 2
    try:
        path = build_zip(assignment, out, torch_index=torch_index, jailed=jailed)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    with zipfile.ZipFile(path) as z:
        count = len(z.namelist())
    print(f"wrote {path} ({count} files, {path.stat().st_size / 1024:.0f} KiB): upload it as the "
          f"autograder of {assignment} on Gradescope (Ubuntu base image)")
    if not torch_index:
        print("note: setup.sh installs torch from pip's default index; pass --torch-index-url "
              "with PyTorch's CPU-only wheel index for the small CPU build")
    if not jailed:
        print("warning: --no-jail: learner code will run with the grader's rights (it can read "
              "the hidden tests and write results.json)", file=sys.stderr)
    return 0


# --- grading one submission on Gradescope -----------------------------------------------------

def _zero(message: str, config: dict) -> dict:
    return {"score": 0.0, "max_score": config.get("max_score", 0.0), "output": message,
            "tests": []}


def _uploaded(submission: Path) -> tuple[list[Path], list[Path]]:
    """(.ipynb files, symbolic links) in what a learner uploaded, checkpoints and macOS zip
    debris left out. Links are never followed: the links listed are those named *.ipynb and
    those to folders (a GitHub or Bitbucket submission can carry them)."""
    found, links = [], []
    if not submission.is_dir() or submission.is_symlink():
        return found, links
    for folder, dirs, files in os.walk(submission):  # does not descend into linked folders
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__MACOSX")
        here = Path(folder)
        for name in dirs:
            if (here / name).is_symlink():
                links.append(here / name)
        for name in sorted(files):
            path = here / name
            if name.startswith(".") or not name.endswith(".ipynb"):
                continue
            if path.is_symlink():
                links.append(path)
            elif path.is_file():
                found.append(path)
    return sorted(found), sorted(links)


def notebooks(submission: Path) -> list[Path]:
    """The .ipynb files a learner uploaded (checkpoints, macOS zip debris and links left out)."""
    return _uploaded(submission)[0]


def symbolic_links(submission: Path) -> list[Path]:
    """The links in a submission that grading would have to follow (see `_uploaded`)."""
    return _uploaded(submission)[1]


def grade_submission(submission: Path, config: dict) -> dict:
    """results.json for the one notebook in `submission` (score 0 with a message otherwise)."""
    assignment, expected = config["assignment"], config["notebook"]
    found, links = _uploaded(submission)
    if links:  # another file of this machine (the source notebook, its answers), not a hand-in
        names = ", ".join(str(p.relative_to(submission)) for p in links)
        verb = "is a symbolic link" if len(links) == 1 else "are symbolic links"
        return _zero(f"{names} {verb}, not a handed-in file: nothing was graded (0). Upload "
                     f"your {expected} itself, not a link to it.", config)
    if not found:
        return _zero(f"No notebook (.ipynb file) was submitted: upload your {expected}.", config)
    if len(found) > 1:
        names = ", ".join(str(p.relative_to(submission)) for p in found)
        return _zero(f"{len(found)} notebooks were submitted ({names}); upload only your "
                     f"{expected}, then this assignment is graded.", config)
    path = found[0]
    name = str(path.relative_to(submission))
    from autograder.grade.submission import NotGradable, read_cells, recognise
    try:
        recognised = recognise(read_cells(path))
    except NotGradable as error:
        return _zero(f"{name} cannot be graded: {str(error).replace(str(path) + ': ', '')}.",
                     config)
    if recognised is None:
        return _zero(f"{name} is not a notebook of this course (no graded function found): "
                     f"upload your {expected}.", config)
    if recognised.id != assignment:
        return _zero(f"{name} is the notebook of {recognised.id}, not of {assignment}: upload "
                     f"your {expected}.", config)
    from autograder.jail import jailer; from autograder.grade import results as report
    jailer.configure(jailed=config.get("jail", True))
    if config.get("jail", True):
        try:
            jailer.check()
        except jailer.JailUnavailable as error:
            print(f"error: {error}")
            return _zero("The grader could not start its sandbox on this machine, so nothing "
                         "was graded (not your fault); your instructor has been told.", config)
    else:
        print("warning: built with --no-jail: learner code runs with the grader's rights")
    jailer.warm_up(recognised.warm)
    from autograder.grade.batch import grade_notebook
    try:
        graded = grade_notebook(path)
    except NotGradable as error:
        return _zero(f"{name} cannot be graded: {str(error).replace(str(path) + ': ', '')}.",
                     config)
    for line in report.summary_lines(graded.results):
        print(line)
    for error in sorted({r.internal_error for r in graded.results if r.internal_error}):
        print(f"warning: a hidden test broke (scored 0; not the learner's fault): {error}")
    return report.results_json(graded.results)


def run(root: Path) -> int:
    """Grade `root`/submission into `root`/results/results.json; always writes it, exits 0."""
    from autograder.grade import results as report
    start = time.perf_counter()
    try:
        config = json.loads((ROOT / CONFIG).read_text())
    except (OSError, ValueError) as error:
        config = {}
        data = _zero("The autograder is misconfigured (not your fault); your instructor has "
                     "been told.", config)
        print(f"error: {ROOT / CONFIG}: {error}")
    else:
        try:
            data = grade_submission(root / "submission", config)
        except Exception as error:  # noqa: BLE001 - the grader broke: still write results.json
            import traceback
            traceback.print_exc(file=sys.stdout)
            data = _zero("The grader could not grade this notebook (an internal error, not your "
                         f"fault); your instructor has been told. ({type(error).__name__})",
                         config)
    data["execution_time"] = round(time.perf_counter() - start, 2)
    report.write_json(data, root / "results" / "results.json")
    print(f"score: {data['score']:g} / {data['max_score']:g}  "
          f"-> {root / 'results' / 'results.json'}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.instructor.gradescope",
                                     description="run_autograder's side of the Gradescope zip")
    commands = parser.add_subparsers(dest="command", required=True)
    grade = commands.add_parser("run", help="grade ROOT/submission into ROOT/results/results.json")
    grade.add_argument("--root", type=Path, default=Path("/autograder"))
    args = parser.parse_args(argv)
    return run(args.root)


if __name__ == "__main__":
    raise SystemExit(main())

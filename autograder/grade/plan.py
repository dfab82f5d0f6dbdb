"""Plan a batch: which notebook under submitted/ is graded as what, and what decides a result.

`plan` finds every notebook and the rule for one in another assignment's folder (a `Task` each);
`grader_version` and `fingerprint` say whether a result already in DIR is still current (see
`batch`); `in_shard` splits the students into shares. Nothing here grades.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import os
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from autograder.course import ASSIGNMENTS, ROOT
from autograder.grade.submission import NotGradable, find_submissions

BROKEN = ("The grader could not grade this notebook (an internal error, not your fault); "
          "your instructor has been told.")
"""The learner-facing message of a submission that broke the grader itself."""


# --- which notebook is graded as what ---------------------------------------------------------

@dataclass
class Task:
    """One found notebook and where its result goes."""

    student: str
    folder: str
    """The submitted/<student>/<folder>/ it was found in."""
    path: Path
    assignment: str
    """The result's name: DIR/<student>/<assignment>.json and grades.csv's assignment column."""
    graded_as: str | None
    """The assignment the notebook's content is graded as; None: recorded as 0 without grading."""
    error: str | None = None
    """Why it scores 0 without grading (graded_as is None)."""
    note: str | None = None
    sha256: str = ""
    retry: bool = False
    """The error is the grader's (e.g. the file could not be read): try again next run."""


def _recognised(path: Path) -> str:
    """The assignment id a notebook's content belongs to (NotGradable if none)."""
    from autograder.grade.submission import read_cells, recognise
    assignment = recognise(read_cells(path))
    if assignment is None:
        raise NotGradable(f"{path}: not a notebook of this course (no graded function found)")
    return assignment.id


def plan(root: Path, students=None) -> list[Task]:
    """Every notebook under submitted/ `root` (of the given students), with the rule for
    notebooks in another assignment's folder:

    A notebook is graded as the assignment its content belongs to. When it lies in another
    assignment's folder, its result goes under the assignment it is, unless the student also has a
    submission in that assignment's own folder (or an earlier folder already holds that
    assignment): then it is recorded under the folder it was found in, as 0, with a message.
    So each result file comes from exactly one notebook and none overwrites another.
    """
    root = Path(root)
    found = defaultdict(list)
    for student, folder, path in find_submissions(root):
        if students is None or student in students:
            found[student].append((folder, path))
    tasks = []
    for student, notebooks in found.items():
        folders = {folder for folder, _ in notebooks}
        taken = set()
        pending = []
        for folder, path in notebooks:
            task = Task(student, folder, path, folder, None)
            linked = next((p for p in (path, path.parent, path.parent.parent) if p.is_symlink()), None)
            if linked is not None:  # another student's file, or one outside submitted/
                task.error = (f"{linked.relative_to(root)} is a symbolic link, not a handed-in "
                              "file: not graded (0). Hand in the notebook itself.")
                pending.append(task)
                continue
            try:
                task.sha256 = hashlib.sha256(path.read_bytes()).hexdigest()
                task.graded_as = _recognised(path)
            except NotGradable as error:
                task.error = str(error)
            except Exception as error:  # noqa: BLE001 - unreadable file, ...
                task.error, task.retry = BROKEN, True
                task.note = f"{path}: {type(error).__name__}: {error}"
            if task.graded_as == folder:
                taken.add(folder)
            pending.append(task)
        for task in pending:  # folders in sorted order: the first wrong-folder copy wins
            if task.graded_as is None or task.graded_as == task.folder:
                continue
            rel = f"{task.folder}/{task.path.name}"
            if task.graded_as in folders or task.graded_as in taken:
                where = ("its own folder holds another submission" if task.graded_as in folders
                         else "another folder already holds one")
                task.error = (f"{rel} is a notebook of {task.graded_as}, not {task.folder}, and "
                              f"{where}: not graded here (0). Submit the {task.folder} notebook "
                              f"in {task.folder}/.")
                task.graded_as = None
            else:
                taken.add(task.graded_as)
                task.assignment = task.graded_as
                task.note = (f"{rel} is a notebook of {task.graded_as} (found in the folder "
                             f"{task.folder}); graded as {task.graded_as}.")
        tasks += pending
    return tasks


# --- fingerprints -----------------------------------------------------------------------------

_NOT_GRADING = {"cli.py", "demo.py", "build.py", "samples.py", "__main__.py"}
"""Modules of the package that do not change a result (the rest do)."""


@functools.lru_cache(maxsize=None)
def grader_version(assignment: str | None) -> str:
    """A hash of everything that decides a result for `assignment`: the grader's code, that
    assignment's hidden tests and source notebook, and the versions of torch and pytest.

    The environment variable AUTOGRADER_GRADER_VERSION, when set, replaces that hash (an
    operator who pins a release; the tests, which must not see other edits of the package)."""
    pinned = os.environ.get("AUTOGRADER_GRADER_VERSION")
    if pinned:
        return f"{pinned}/{assignment}"
    package = ROOT / "autograder"
    h = hashlib.sha256()
    files = [p for p in sorted(package.rglob("*.py")) if "__pycache__" not in p.parts
             and p.name not in _NOT_GRADING and not
             (p.parent.name == "tests" and p.name.startswith("test_"))]
    if assignment in ASSIGNMENTS:
        files += [package / "tests" / f"test_{assignment}.py", ASSIGNMENTS[assignment].source]
    for path in files:
        h.update(str(path.relative_to(ROOT)).encode() + b"\0")
        h.update(path.read_bytes() if path.is_file() else b"(missing)")
    for dist in ("torch", "pytest"):
        try:
            h.update(f"{dist}=={importlib.metadata.version(dist)}".encode())
        except importlib.metadata.PackageNotFoundError:
            pass
    return h.hexdigest()[:16]


def fingerprint(task: Task, only: set[str] | None) -> str:
    h = hashlib.sha256()
    for part in (task.sha256, grader_version(task.graded_as), task.assignment, task.folder,
                 task.graded_as or "", task.error or "", ",".join(sorted(only or ()))):
        h.update(part.encode("utf-8", "surrogateescape") + b"\0")
    return h.hexdigest()


def in_shard(student: str, shard: tuple[int, int] | None) -> bool:
    """Whether `student` belongs to share K of N: sha256(student) mod N == K - 1.

    A share is a set of whole students (all their assignments), so adding students never moves
    another one, and each DIR/<student>/ is written by exactly one share."""
    if shard is None:
        return True
    k, n = shard
    digest = hashlib.sha256(student.encode("utf-8", "surrogateescape")).digest()
    return int.from_bytes(digest[:8], "big") % n == k - 1

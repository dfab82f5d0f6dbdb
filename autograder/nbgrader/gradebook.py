"""nbgrader's gradebook, as this course fills it.

`SaveGrades` (nbgrader's `SaveAutoGrades`; no manual grade for an unanswered written answer);
`gradebook_from_source`, the `Autograde.pre_convert_hook` that puts an assignment in the
gradebook from source/ on a fresh clone and stamps hand-placed submissions (`stamp_hand_in`);
`put_in_gradebook`. nbgrader's own SQLAlchemy warnings, which no instructor can act on, are not
printed.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

from nbgrader.api import MissingEntry
from nbgrader.preprocessors import SaveAutoGrades

from autograder.nbgrader.cells import nbgrader_metadata

try:  # nbgrader's gradebook (0.9.6) trips SQLAlchemy's autoflush three times per notebook it
    # autogrades; nothing is lost and no instructor can act on it, so it is not printed
    import warnings

    from sqlalchemy.exc import SAWarning
    warnings.filterwarnings("ignore", message=r"Object of type <Submitted\w+> not in session, add "
                            r"operation along", category=SAWarning)
except ImportError:
    pass


class SaveGrades(SaveAutoGrades):
    """nbgrader's `SaveAutoGrades`, and: a written answer left unanswered ("YOUR ANSWER HERE" or
    blank) scores 0 and needs no manual grade; a 0-point task cell (one that only carries the
    mark scheme for the grader) needs no manual grade. nbgrader flags both, so every submission
    was "Needs Manual Grade?", the empty ones included; an answered one still is."""

    def preprocess_cell(self, cell, resources, cell_index):
        cell, resources = super().preprocess_cell(cell, resources, cell_index)
        meta = nbgrader_metadata(cell)
        unanswered = (meta.get("grade") and meta.get("solution") and cell.cell_type == "markdown"
                      and cell.source.strip() in ("", "YOUR ANSWER HERE"))
        no_points = meta.get("task") and float(meta.get("points") or 0) == 0
        if unanswered or no_points:
            try:
                grade = self.gradebook.find_grade(meta["grade_id"], self.notebook_id,
                                                  self.assignment_id, self.student_id)
            except MissingEntry:
                return cell, resources
            grade.auto_score = 0.0
            grade.needs_manual_grade = grade.manual_score is not None
            self.gradebook.db.commit()
        return cell, resources


_IN_GRADEBOOK: set[tuple[str, str]] = set()


def put_in_gradebook(root: str, assignment: str, config=None) -> None:
    """Put `assignment` in the gradebook of the course at `root` when it is in source/ but not
    (yet) in the gradebook, by nbgrader's own `generate_assignment` into a throwaway release
    folder. `config`: the course config (its course id and gradebook)."""
    import subprocess
    import sys

    from nbgrader.api import Gradebook
    from nbgrader.coursedir import CourseDirectory

    from autograder.instructor.build import tool_env

    if not assignment or (root, assignment) in _IN_GRADEBOOK:
        return
    coursedir = CourseDirectory(config=config, root=root) if config else CourseDirectory(root=root)
    folder = Path(coursedir.format_path(coursedir.source_directory, ".", assignment))
    wanted = {p.stem for p in folder.glob("*.ipynb")}
    with Gradebook(coursedir.db_url, coursedir.course_id) as gb:
        try:
            have = {nb.name for nb in gb.find_assignment(assignment).notebooks}
        except MissingEntry:
            have = set()
    if wanted and not wanted <= have:
        with tempfile.TemporaryDirectory() as tmp:
            done = subprocess.run(
                [sys.executable, "-m", "nbgrader", "generate_assignment", assignment,
                 f"--CourseDirectory.release_directory={tmp}", "--log-level=ERROR"],
                cwd=root, env=tool_env(), capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"nbgrader generate_assignment {assignment}: {done.stderr}")
    _IN_GRADEBOOK.add((root, assignment))


def stamp_hand_in(folder: Path) -> None:
    """A submission placed in submitted/STUDENT/ASSIGNMENT/ by hand (not through the exchange)
    gets the two files `nbgrader submit` writes beside it: timestamp.txt (the newest notebook's
    time, in nbgrader's format) and submission_secret.txt. Autograde copies them on, and without
    them `release_feedback` stops for every learner with FileNotFoundError. Feedback released for
    such a submission reaches the exchange; the learner, who submitted nothing through it, is
    given the HTML from feedback/ directly."""
    import secrets
    from datetime import datetime, timezone
    folder = Path(folder)
    if not folder.is_dir() or (folder / "timestamp.txt").exists():
        return
    times = [p.stat().st_mtime for p in folder.glob("*.ipynb")] or [time.time()]
    when = datetime.fromtimestamp(max(times), timezone.utc)
    try:
        (folder / "timestamp.txt").write_text(when.strftime("%Y-%m-%d %H:%M:%S.%f %Z"))
        if not (folder / "submission_secret.txt").exists():
            (folder / "submission_secret.txt").write_text(secrets.token_hex(64))
    except OSError:
        pass  # a read-only submission: autograde proceeds; release_feedback then skips it


def gradebook_from_source(config=None):
    """`Autograde.pre_convert_hook`: an assignment that is in source/ but not in the gradebook
    (a fresh clone: release/ is committed, gradebook.db is not) is put there before the first
    submission is graded (`put_in_gradebook`); nbgrader's autograde would otherwise stop with
    "No assignment ... in the database". `config` is the course config."""
    from nbgrader.coursedir import CourseDirectory

    def hook(assignment, student, notebooks):
        for folder in {Path(n).parent for n in notebooks or ()}:
            stamp_hand_in(folder)
        root = os.getcwd()  # nbgrader's converters run from the course root
        coursedir = CourseDirectory(config=config, root=root) if config else CourseDirectory(root=root)
        # nbgrader passes the assignment id as given: `autograde '*'` passes the glob
        source = Path(coursedir.format_path(coursedir.source_directory, ".", ".")).resolve()
        for folder in sorted(source.glob(assignment)) if assignment else ():
            put_in_gradebook(root, folder.name, config)
    return hook

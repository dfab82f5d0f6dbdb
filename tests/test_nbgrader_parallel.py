"""`nbgrader autograde` on every core (autograder/nbgrader_parallel.py) grades as nbgrader's own
one-after-another loop does: the same gradebook rows and the same feedback HTML; and a `kill -9`
of nbgrader's process alone leaves nothing of the run behind."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from nbgrader.api import Gradebook

from autograder.build import tool_env
from conftest import alive, cmdline, descendants, proc_stat
from test_grader_death import GONE_WITHIN, _kill, _marked

STUDENTS = {"01_linear_algebra": ["solution", "unanswered", "bias_column", "kills_process",
                                  "forge_sys_modules"],
            "04_computational_graph": ["graph_nodes_default_seen"]}
"""A right answer, none, a wrong one, learner code that kills its process, state kept between
calls, a flagged forgery attempt: over two assignments, more submissions than workers."""

pytestmark = pytest.mark.early


def _course(root: Path, course: Path, submitted: Path) -> Path:
    shutil.copytree(course, root)
    for assignment, students in STUDENTS.items():
        for student in students:
            shutil.copytree(submitted / student / assignment, root / "submitted" / student / assignment)
    return root


def _rows(root: Path) -> dict:
    """Every grade and comment nbgrader's gradebook holds for the submissions."""
    out = {}
    with Gradebook(f"sqlite:///{root}/gradebook.db") as gb:
        for assignment in STUDENTS:
            for sub in gb.assignment_submissions(assignment):
                for nb in sub.notebooks:
                    for g in nb.grades:
                        out[(assignment, sub.student.id, g.name)] = (
                            g.auto_score, g.max_score, g.needs_manual_grade)
                    for c in nb.comments:
                        out[(assignment, sub.student.id, "comment " + c.name)] = c.auto_comment
    return out


def _feedback(root: Path) -> dict[str, str]:
    """The feedback HTML of every submission, without what differs from run to run: timestamps
    and the addresses of objects the notebook prints (`<UnbindBackward0 object at 0x7f...>`)."""
    def steady(text: str) -> str:
        text = re.sub(r"\d{4}-\d\d-\d\d[ T][\d:.]+( ?[A-Z]{3,4})?", "", text)
        return re.sub(r" at 0x[0-9a-f]+", " at 0x", text)
    return {str(p.relative_to(root)): steady(p.read_text())
            for p in sorted((root / "feedback").glob("*/*/*.html"))}


def _grade(root: Path, jobs: int) -> tuple[subprocess.CompletedProcess, subprocess.CompletedProcess]:
    """`nbgrader autograde` of every assignment with `jobs` workers, then generate_feedback."""
    env = {**tool_env(), "AUTOGRADER_NBGRADER_JOBS": str(jobs)}
    return tuple(subprocess.run(["nbgrader", *step, "*", f"--log-level={level}"], cwd=root,
                                env=env, capture_output=True, text=True)
                 for step, level in ((["autograde"], "INFO"), (["generate_feedback"], "ERROR")))


def test_parallel_autograde_grades_as_nbgrader_alone(course, submitted, tmp_path):
    """The same gradebook rows and feedback HTML with 3 workers as with nbgrader's own loop; a
    submission nbgrader cannot read (not JSON) is logged, the others are graded, and the run
    ends with nbgrader's error, in both."""
    roots = {jobs: _course(tmp_path / f"jobs{jobs}", course, submitted) for jobs in (1, 3)}
    for root in roots.values():
        broken = root / "submitted" / "broken" / "01_linear_algebra"
        broken.mkdir(parents=True)
        (broken / "linear_algebra.ipynb").write_text("{ not a notebook")
    done = {jobs: _grade(root, jobs) for jobs, root in roots.items()}
    for jobs, (autograde, feedback) in done.items():
        assert autograde.returncode != 0 and "for student 'broken'" in autograde.stderr, jobs
        assert "database is locked" not in autograde.stderr
        assert feedback.returncode == 0, feedback.stderr[-3000:]
    assert "7 submissions in 3 worker processes" in done[3][0].stderr
    assert "worker processes" not in done[1][0].stderr
    rows = _rows(roots[1])
    graded = {(a, s) for a, s, _ in rows}
    assert graded == {(a, s) for a, students in STUDENTS.items() for s in students} | {
        ("01_linear_algebra", "broken")}   # a submission row, no score
    assert sum(v[0] or 0 for k, v in rows.items() if not k[2].startswith("comment")) > 0
    assert rows == _rows(roots[3])
    feedback = _feedback(roots[1])
    assert len(feedback) == sum(map(len, STUDENTS.values()))
    assert feedback == _feedback(roots[3])


def test_kill_9_of_parallel_autograde_leaves_no_process_behind(course, submitted, tmp_path):
    """kill -9 of nbgrader's own process (not its group) while its workers run learner code:
    workers, their jailed kernels and grader servers are gone within seconds."""
    root = _course(tmp_path / "course", course, submitted)
    mark = uuid.uuid4().hex
    env = {**tool_env(), "AUTOGRADER_NBGRADER_JOBS": "2", "AUTOGRADER_TEST_RUN": mark}
    first = subprocess.Popen(["nbgrader", "autograde", "*", "--log-level=ERROR"], cwd=root, env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
    seen: dict[int, str] = {}
    try:
        deadline = time.monotonic() + 300
        while True:  # until both workers run a jailed kernel
            seen = descendants([first.pid])
            kernels = [p for p in seen if "autograder.jail.notebook_kernel" in cmdline(p)
                       and not cmdline(p).startswith("bwrap")]
            if len(kernels) >= 2:
                break
            assert first.poll() is None, "autograde ended before its workers ran kernels"
            assert time.monotonic() < deadline, "the workers never started kernels"
            time.sleep(0.05)
        os.kill(first.pid, signal.SIGKILL)
        killed = time.monotonic()
        first.wait()
        while True:
            seen.update(_marked(mark))
            seen.update(descendants(list(alive(seen))))
            still = alive(seen)
            if not still:
                break
            assert time.monotonic() - killed < GONE_WITHIN, (
                f"{len(still)} processes of the killed run still alive: {still}")
            time.sleep(0.05)
    finally:
        _kill(seen)
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
            first.wait()
    assert proc_stat(first.pid) is None or proc_stat(first.pid)[0] == "Z"

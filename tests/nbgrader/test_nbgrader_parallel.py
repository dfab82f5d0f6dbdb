"""`nbgrader autograde` on every core (autograder/nbgrader/parallel.py), with kernels forked from
the warm jailed server (autograder/nbgrader/kernels.py `_ForkedKernelProvisioner`), grades as nbgrader's own
one-after-another loop with a freshly started jailed kernel per notebook: the same gradebook rows
and the same feedback HTML; and a `kill -9` of nbgrader's process alone leaves nothing behind."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook

from autograder.instructor.build import tool_env
from autograder.course import ASSIGNMENTS, ROOT
from conftest import cmdline, descendants, kill_all, proc_stat, wait_until_gone

STUDENTS = {"01_linear_algebra": ["solution", "unanswered", "kills_process", "forge_sys_modules"],
            "05_gradient_descent": ["momentum_own_buffer"]}
"""A right answer, none, learner code that kills its process, a flagged forgery attempt, state
kept between calls (in a notebook whose kernels are forked with its `notebook_warm` imports):
over two assignments, more submissions than workers."""

A1 = "01_linear_algebra"

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


FRESH_KERNEL_NOISE = re.compile(
    r'\s*<div class="output_wrapper">\s*<div class="output">\s*<div class="output_area">\s*'
    r'<div class="prompt"></div>\s*<div class="output_subarea output_stream output_stderr '
    r'output_text">\s*<pre>Fontconfig error: [^<]*</pre>\s*</div>\s*</div>\s*</div>\s*</div>')
"""What a kernel started afresh in the jail prints into the first cell that imports pyplot (a
font cache it cannot find); a kernel forked from the warm server imported pyplot there."""


def _feedback(root: Path) -> dict[str, str]:
    """The feedback HTML of every submission, without what differs from run to run: timestamps,
    the addresses of objects the notebook prints (`<UnbindBackward0 object at 0x7f...>`), a
    freshly started kernel's FRESH_KERNEL_NOISE, and execution counts (a kernel that kills
    itself in a cell may or may not have sent that cell's count first, forked or fresh)."""
    def steady(text: str) -> str:
        text = FRESH_KERNEL_NOISE.sub("", text)
        text = re.sub(r"(In|Out)\s*\[\s*\d*\s*\]:", r"\1 [ ]:", text)
        text = re.sub(r"\d{4}-\d\d-\d\d[ T][\d:.]+( ?[A-Z]{3,4})?", "", text)
        return re.sub(r" at 0x[0-9a-f]+", " at 0x", text)
    return {str(p.relative_to(root)): steady(p.read_text())
            for p in sorted((root / "feedback").glob("*/*/*.html"))}


def _grade(root: Path, env: dict[str, str]) -> tuple[subprocess.CompletedProcess, ...]:
    """`nbgrader autograde` of every assignment, then generate_feedback."""
    env = {**tool_env(), **env}
    return tuple(subprocess.run(["nbgrader", *step, "*", f"--log-level={level}"], cwd=root,
                                env=env, capture_output=True, text=True)
                 for step, level in ((["autograde"], "INFO"), (["generate_feedback"], "ERROR")))


def test_parallel_warm_autograde_grades_as_one_fresh_kernel_at_a_time(course, submitted, tmp_path):
    """The same gradebook rows and feedback HTML with 3 workers and kernels forked from the warm
    jailed server as with nbgrader's own loop and a fresh jailed kernel per notebook; a submission
    nbgrader cannot read (not JSON) is logged, the others are graded, and the run ends with
    nbgrader's error, in both."""
    runs = {"today": {"AUTOGRADER_NBGRADER_JOBS": "1", "AUTOGRADER_WARM_KERNEL": "0"},
            "new": {"AUTOGRADER_NBGRADER_JOBS": "3"}}
    roots = {run: _course(tmp_path / run, course, submitted) for run in runs}
    for root in roots.values():
        broken = root / "submitted" / "broken" / "01_linear_algebra"
        broken.mkdir(parents=True)
        (broken / "linear_algebra.ipynb").write_text("{ not a notebook")
    done = {run: _grade(roots[run], env) for run, env in runs.items()}
    for run, (autograde, feedback) in done.items():
        assert autograde.returncode != 0 and "for student 'broken'" in autograde.stderr, run
        assert "database is locked" not in autograde.stderr
        assert feedback.returncode == 0, feedback.stderr[-3000:]
    assert "6 submissions in 3 worker processes" in done["new"][0].stderr
    assert "worker processes" not in done["today"][0].stderr
    rows = _rows(roots["today"])
    graded = {(a, s) for a, s, _ in rows}
    assert graded == {(a, s) for a, students in STUDENTS.items() for s in students} | {
        ("01_linear_algebra", "broken")}   # a submission row, no score
    assert sum(v[0] or 0 for k, v in rows.items() if not k[2].startswith("comment")) > 0
    assert rows == _rows(roots["new"])
    feedback = _feedback(roots["today"])
    assert len(feedback) == sum(map(len, STUDENTS.values()))
    assert all("<img" in html for html in feedback.values()), "the notebooks' figures are shown"
    assert feedback == _feedback(roots["new"])


def test_a_gradebook_that_cannot_be_prepared_is_graded_one_submission_at_a_time(course, tmp_path):
    """Without `alembic` on PATH nbgrader cannot stamp a new gradebook: the preparation before the
    fork fails, and workers started anyway raced to create the course's row (UNIQUE constraint
    failed: course.id), dropping a submission (exported as 0). The run is then nbgrader's own
    loop instead, and every submission is graded."""
    root = tmp_path / "course"
    shutil.copytree(course, root)
    for student in ("a", "b"):
        folder = root / "submitted" / student / A1
        folder.mkdir(parents=True)
        shutil.copy(ROOT / "release" / A1 / ASSIGNMENTS[A1].notebook, folder)
    nbgrader = Path(sys.executable).parent / "nbgrader"
    env = {**os.environ, "PATH": "/usr/bin:/bin", "AUTOGRADER_NBGRADER_JOBS": "2"}
    done = subprocess.run([str(nbgrader), "autograde", A1], cwd=root, env=env,
                          capture_output=True, text=True)
    assert "grading one submission at a time" in done.stderr, done.stderr[-3000:]
    assert "UNIQUE constraint" not in done.stderr and "worker processes" not in done.stderr
    with Gradebook(f"sqlite:///{root}/gradebook.db") as gb:
        graded = {s.student.id for s in gb.assignment_submissions(A1)}
    assert graded == {"a", "b"}
    assert all((root / "autograded" / s / A1 / ASSIGNMENTS[A1].notebook).is_file() for s in graded)


def test_kill_9_of_parallel_autograde_leaves_no_process_behind(course, submitted, tmp_path):
    """kill -9 of nbgrader's own process (not its group) while its workers run learner code:
    workers, their jailed kernels and grader servers are gone within seconds."""
    root = tmp_path / "course"
    shutil.copytree(course, root)
    for student in (f"s{i}" for i in range(8)):  # one assignment: to its kernels sooner
        shutil.copytree(submitted / "solution" / A1, root / "submitted" / student / A1)
    mark = uuid.uuid4().hex
    env = {**tool_env(), "AUTOGRADER_NBGRADER_JOBS": "2", "AUTOGRADER_TEST_RUN": mark}
    first = subprocess.Popen(["nbgrader", "autograde", A1, "--log-level=ERROR"], cwd=root, env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
    seen: dict[int, str] = {}
    try:
        deadline = time.monotonic() + 300
        while True:  # until both workers' jailed servers have forked a learner's kernel
            seen = descendants([first.pid])
            servers = {p for p in seen if "autograder.jail.inside.server" in cmdline(p)
                       and not cmdline(p).startswith("bwrap")}
            kernels = [p for p in seen if (proc_stat(p) or ("", 0))[1] in servers]
            if len(kernels) >= 2:
                break
            assert first.poll() is None, "autograde ended before its workers ran kernels"
            assert time.monotonic() < deadline, "the workers never started kernels"
            time.sleep(0.05)
        os.kill(first.pid, signal.SIGKILL)
        killed = time.monotonic()
        first.wait()
        wait_until_gone(seen, mark, killed)
    finally:
        kill_all(seen)
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
            first.wait()
    assert proc_stat(first.pid) is None or proc_stat(first.pid)[0] == "Z"


def test_kernels_of_notebooks_that_import_torch_dynamo_are_forked_with_it():
    """A notebook that builds a torch.optim optimizer, calls torch.func or enters a
    TorchDispatchMode that keeps torch's dynamo wrapper imports torch._dynamo (1.2-1.4 s) at the
    first one: its assignment's `notebook_warm` says so (the server imports it once), and only
    then."""
    first_use = re.compile(r"\boptim\.[A-Z]\w*\(|\btorch\.func\.")
    for a in ASSIGNMENTS.values():
        code = "\n".join(c.source for c in nbformat.read(a.source, 4).cells if c.cell_type == "code")
        wrapped_modes = code.count("(TorchDispatchMode):") - code.count("def _should_skip_dynamo")
        imports = bool(first_use.search(code)) or wrapped_modes > 0
        assert imports == ("torch._dynamo" in a.notebook_warm), a.id

"""Grade one notebook or a whole submitted/ folder, in parallel worker processes.

A batch (`grade_batch`) is resumable: each result is written, atomically, to
DIR/<student>/<assignment>.json as soon as its notebook is graded, together
with a fingerprint of what produced it (the notebook's bytes, the grader's
version for that assignment, where the result lives and `--only`). A run finds
the results that are still current and grades only the others, so a batch
killed at any moment and run again ends with every notebook graded exactly
once. DIR/grades.csv is rebuilt from the result files at the end of each run.
Which notebook is graded as what, and the fingerprints, come from `plan`.
See docs/batch.md.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import threading
import traceback
import uuid
from collections import deque
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from autograder.grade.plan import BROKEN, Task, fingerprint, in_shard, plan
from autograder.grade.submission import NotGradable, Submission, load_submission
from autograder.jail.jailer import warm_up
from autograder.grade.flags import review_results
from autograder.timing import phase

if TYPE_CHECKING:
    from autograder.grade.plugin import TestResult


@dataclass
class Graded:
    """The outcome for one notebook."""

    student: str
    assignment: str
    results: list[TestResult] = field(default_factory=list)
    error: str | None = None
    """Why the notebook could not be graded at all (then it scores 0)."""
    operator: str | None = None
    """For the operator: the grader itself broke on this notebook (scored 0, retried next run)."""
    note: str | None = None
    """A remark for learner and operator that does not cost points (e.g. graded from another folder)."""
    seconds: float | None = None
    """How long its hidden tests ran (None: not measured); extra_data.seconds in a batch result."""

    @property
    def autograded(self) -> list[TestResult]:
        return [r for r in self.results if not r.manual and not r.review]

    @property
    def reviews(self) -> list[TestResult]:
        """Flags for the instructor (autograder/rules/review.py): 0 points, not shown to the learner."""
        return [r for r in self.results if r.review]

    @property
    def score(self) -> float:
        return sum(r.score for r in self.results)

    @property
    def max_score(self) -> float:
        return sum(r.max_score for r in self.results)


def written_results(submission: Submission, only: set[str] | None = None) -> list[TestResult]:
    """Answers graded by hand: listed with max_score 0 (their points live in nbgrader's gradebook
    or a manual Gradescope question), so they never count and never show as failed."""
    from autograder.grade.plugin import TestResult
    out = []
    for grade_id, points, text in submission.written:
        if only is not None and grade_id not in only:
            continue
        answered = text.strip() not in ("", "YOUR ANSWER HERE")
        worth = f"{points:g} point{'s' if points != 1 else ''}"
        message = (f"Answer received; it is graded by hand by your instructor ({worth}, not "
                   f"included in this score)." if answered else
                   f"No answer written yet (the cell still says YOUR ANSWER HERE); this answer "
                   f"is graded by hand by your instructor ({worth}, not included in this score).")
        out.append(TestResult(grade_id, f"{grade_id}: written answer, graded by hand", 0.0, 0.0,
                              message, True, manual=True))
    return out


def grade_notebook(path: Path, only: set[str] | None = None) -> Graded:
    """Grade one notebook in this process (learner code still runs in a sandbox)."""
    from autograder.grade.plugin import run_tests, settle
    settle()  # torch and the grader are imported: collections skip them from now on
    with phase("grader: read the notebook, check the code"):
        submission = load_submission(path)
    with phase("grader: the hidden tests (children included)"):
        plugin = run_tests([submission], only)
    return Graded(path.stem, submission.assignment.id,
                  plugin.results[submission.key] + written_results(submission, only)
                  + review_results(submission.path),
                  seconds=plugin.seconds.get(submission.key))


# --- the work of one worker process -----------------------------------------------------------

PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int, sentinel: int | None = None) -> None:
    """Make this process die with its parent `parent`, however the parent ends (kill -9 too).

    The kernel sends SIGKILL when the parent goes (PR_SET_PDEATHSIG; strictly, when the parent's
    thread that started this process ends: `_pools` starts and shuts down its workers in the
    one thread that called it, so they never outlive that thread anyway). A thread watching the
    parent's `sentinel` (an fd that becomes readable when the parent is gone) is a second line.
    What runs below a worker follows it: its jail (bwrap --die-with-parent, and the jailed
    server exits when its control socket closes), and multiprocessing's resource tracker exits
    once no process holds its pipe."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux
        pass
    if sentinel is not None:
        def watch() -> None:
            multiprocessing.connection.wait([sentinel])
            os.kill(os.getpid(), signal.SIGKILL)
        threading.Thread(target=watch, name="parent-watch", daemon=True).start()
    if os.getppid() != parent:  # the parent died before the signal was asked for
        os.kill(os.getpid(), signal.SIGKILL)


def _start_worker(parent: int) -> None:
    """A batch worker's initializer: die with the grader, then start the jailed server."""
    process = multiprocessing.parent_process()
    die_with_parent(parent, process.sentinel if process is not None else None)
    warm_up()
    from autograder.grade.plugin import settle  # torch, while the jailed server starts
    settle()


def _broken(student: str, assignment: str, error: BaseException) -> Graded:
    summary = "".join(traceback.format_exception_only(type(error), error)).strip()
    return Graded(student, assignment, error=BROKEN, operator=summary.splitlines()[-1][:500])


def _run(submissions: list[Submission], only: set[str] | None,
         seconds: dict[str, float] | None = None) -> dict[str, list[TestResult]]:
    # Imported here: the batch's main process never imports torch (only its workers do).
    from autograder.grade.plugin import run_tests
    with phase("grader: the hidden tests (children included)"):
        plugin = run_tests(submissions, only)
    if seconds is not None:
        seconds.update(plugin.seconds)
    return {s.key: plugin.results[s.key] + written_results(s, only) + review_results(s.path)
            for s in submissions}


def _grade_chunk(items: list[tuple[int, str, str, str]], only: set[str] | None = None
                 ) -> list[tuple[int, Graded]]:
    """Grade (index, student, assignment, path) items together; a failure costs only its notebook.

    The hidden tests of all items run in one pytest session; if that session fails as a whole,
    each notebook is graded again on its own, so only the one that breaks the grader scores 0.
    """
    out, loaded, seconds = [], [], {}
    for index, student, assignment, path in items:
        try:
            submission = load_submission(path, student)
        except NotGradable as error:
            out.append((index, Graded(student, assignment, error=str(error))))
        except Exception as error:  # noqa: BLE001 - the grader broke on this notebook
            out.append((index, _broken(student, assignment, error)))
        else:
            loaded.append((index, assignment, submission))
    groups = [loaded]
    if len({s.key for _, _, s in loaded}) < len(loaded):  # the same key twice: grade apart
        groups = [[item] for item in loaded]
    for group in groups:
        try:
            results = _run([s for _, _, s in group], only, seconds) if group else {}
        except Exception as error:  # noqa: BLE001
            if len(group) == 1:
                index, assignment, s = group[0]
                out.append((index, _broken(s.student, assignment, error)))
                continue
            for index, assignment, s in group:
                try:
                    out.append((index, Graded(s.student, assignment,
                                              _run([s], only, seconds)[s.key],
                                              seconds=seconds.get(s.key))))
                except Exception as error:  # noqa: BLE001
                    out.append((index, _broken(s.student, assignment, error)))
        else:
            out += [(index, Graded(s.student, assignment, results[s.key],
                                   seconds=seconds.get(s.key)))
                    for index, assignment, s in group]
    return out


def _pools(tasks: list[tuple[str, str, str]], jobs: int | None, only: set[str] | None,
           emit) -> None:
    """Grade (student, assignment, path) tasks; call emit(index, Graded) as each finishes.

    `jobs` worker processes, each its own one-worker pool fed one chunk at a time: a worker that
    dies takes down only its chunk, whose notebooks are then graded one by one; a notebook that
    kills its worker on its own is scored 0 for the operator. Each worker imports torch once and
    keeps its sandbox server for all its chunks.
    """
    if not tasks:
        return
    jobs = max(1, min(jobs or len(os.sched_getaffinity(0)), len(tasks)))
    size = max(1, min(4, len(tasks) // (jobs * 2) or 1))
    queue = deque(list(range(i, min(i + size, len(tasks)))) for i in range(0, len(tasks), size))
    context = multiprocessing.get_context("spawn")
    pools: list[ProcessPoolExecutor | None] = [None] * jobs
    running: dict = {}  # future -> (pool slot, chunk)

    def submit(slot: int) -> None:
        chunk = queue.popleft()
        if pools[slot] is None:
            pools[slot] = ProcessPoolExecutor(1, mp_context=context, initializer=_start_worker,
                                              initargs=(os.getpid(),))
        items = [(i, *tasks[i]) for i in chunk]
        running[pools[slot].submit(_grade_chunk, items, only)] = (slot, chunk)

    def fail(chunk: list[int], error: BaseException) -> None:
        if len(chunk) > 1:
            queue.extendleft([i] for i in reversed(chunk))
        else:
            student, assignment, _ = tasks[chunk[0]]
            emit(chunk[0], _broken(student, assignment, error))

    try:
        for slot in range(min(jobs, len(queue))):
            submit(slot)
        while running:
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                slot, chunk = running.pop(future)
                try:
                    results = future.result()
                except BrokenProcessPool:
                    pools[slot].shutdown(wait=False, cancel_futures=True)
                    pools[slot] = None
                    fail(chunk, RuntimeError("the grader's worker process died while grading "
                                             "this notebook"))
                except Exception as error:  # noqa: BLE001 - e.g. a result that cannot be pickled
                    fail(chunk, error)
                else:
                    for index, graded in results:
                        emit(index, graded)
                if queue:
                    submit(slot)
    finally:
        for pool in pools:
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)


# --- a batch into DIR -------------------------------------------------------------------------

RESERVED = {"grades.csv", ".grades.lock"}
"""Names in DIR that are the batch's own files, so no student's folder there."""

@dataclass
class Batch:
    """What one run of `grade_batch` did."""

    tasks: list[Task]
    graded: list[Graded] = field(default_factory=list)
    """Results written by this run, in the order they finished."""
    current: int = 0
    """Results already in DIR and current (not graded again)."""


def grade_batch(root: Path, out: Path, *, jobs: int | None = None,
                shard: tuple[int, int] | None = None, force: bool = False,
                only: set[str] | None = None, on_result=None, on_start=None) -> Batch:
    """Grade submitted/ `root` into `out`, resuming from the results already there.

    on_start(number to grade) is called once the plan is known; on_result(Task, Graded) after each
    result file is written."""
    from autograder.grade import results as report
    root, out = Path(root), Path(out)
    students = {s.name for s in root.iterdir() if s.is_dir() and in_shard(s.name, shard)}
    for clash in sorted(students & RESERVED):
        print(f"warning: {root / clash}: a student folder named {clash} would clash with "
              f"{out / clash}: not graded (rename the folder)", file=sys.stderr)
    students -= RESERVED
    tasks = plan(root, students)
    run = uuid.uuid4().hex[:12]
    for student in students:
        report.remove_stale_temporaries(out / student)
    todo = []
    batch = Batch(tasks)
    for task in tasks:
        fp = fingerprint(task, only)
        existing = report.read_extra(out / task.student / f"{task.assignment}.json")
        if not force and existing.get("fingerprint") == fp and not existing.get("retry"):
            batch.current += 1
        else:
            todo.append((task, fp))

    def write(task: Task, fp: str, graded: Graded) -> None:
        graded.assignment = task.assignment
        if graded.note is None:
            graded.note = task.note if task.graded_as else None
        extra = {"fingerprint": fp, "notebook": str(task.path.relative_to(root)),
                 "sha256": task.sha256, "graded_as": task.graded_as, "run": run}
        if graded.operator:
            extra |= {"operator": graded.operator, "retry": True}
        if graded.seconds is not None:
            extra["seconds"] = round(graded.seconds, 3)
        data = report.results_json(graded.results, error=graded.error, note=graded.note)
        data["extra_data"] = extra
        report.write_json(data, out / task.student / f"{task.assignment}.json")
        batch.graded.append(graded)
        if on_result:
            on_result(task, graded)

    if on_start:
        on_start(len(todo))
    to_grade = []
    for task, fp in todo:
        if task.graded_as is None:
            write(task, fp, Graded(task.student, task.assignment, error=task.error,
                                   operator=task.note if task.retry else None))
        else:
            to_grade.append((task, fp))
    _pools([(t.student, t.assignment, str(t.path)) for t, _ in to_grade], jobs, only,
           lambda i, graded: write(*to_grade[i], graded))
    report.rebuild_grades_csv(out)
    return batch


def grade_folder(root: Path, jobs: int | None = None, progress=None) -> list[Graded]:
    """Grade every submitted/<student>/<assignment>/<notebook>.ipynb under `root`, writing nothing.

    Notebooks in another assignment's folder follow `plan`'s rule."""
    tasks = plan(Path(root))
    graded: list[Graded | None] = [None] * len(tasks)
    grade = []
    for index, task in enumerate(tasks):
        if task.graded_as is None:
            graded[index] = Graded(task.student, task.assignment, error=task.error)
        else:
            grade.append(index)
    if progress and len(grade) < len(tasks):
        progress(len(tasks) - len(grade))

    def emit(i: int, g: Graded) -> None:
        g.note = g.note or tasks[grade[i]].note
        graded[grade[i]] = g
        if progress:
            progress(1)

    _pools([(tasks[i].student, tasks[i].assignment, str(tasks[i].path)) for i in grade], jobs,
           None, emit)
    return sorted(graded, key=lambda g: (g.student, g.assignment))

"""Grade one notebook or a whole submitted/ folder, in parallel worker processes."""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from autograder.notebook import NotGradable, Submission, find_submissions, load_submission
from autograder.plugin import TestResult, run_tests
from autograder.server import warm_up


@dataclass
class Graded:
    """The outcome for one notebook."""

    student: str
    assignment: str
    results: list[TestResult] = field(default_factory=list)
    error: str | None = None
    """Why the notebook could not be graded at all (then it scores 0)."""

    @property
    def autograded(self) -> list[TestResult]:
        return [r for r in self.results if not r.manual]

    @property
    def score(self) -> float:
        return sum(r.score for r in self.results)

    @property
    def max_score(self) -> float:
        return sum(r.max_score for r in self.results)


def written_results(submission: Submission, only: set[str] | None = None) -> list[TestResult]:
    """Answers graded by hand: listed with 0 points until the instructor grades them."""
    out = []
    for grade_id, points, text in submission.written:
        if only is not None and grade_id not in only:
            continue
        answered = text.strip() not in ("", "YOUR ANSWER HERE")
        message = ("Answer received: your instructor grades it by hand." if answered
                   else "No answer written (the cell still says YOUR ANSWER HERE).")
        out.append(TestResult(grade_id, f"{grade_id}: written answer, graded by hand", points, 0.0,
                              message, True, manual=True))
    return out


def grade_notebook(path: Path, only: set[str] | None = None) -> Graded:
    """Grade one notebook in this process (learner code still runs in a sandbox)."""
    submission = load_submission(path)
    plugin = run_tests([submission], only)
    return Graded(path.stem, submission.assignment.id,
                  plugin.results[submission.key] + written_results(submission, only))


def _grade_chunk(items: list[tuple[str, str, str]]) -> list[Graded]:
    submissions, out = [], []
    for student, folder, path in items:
        try:
            submissions.append(load_submission(path, student))
        except NotGradable as error:
            out.append(Graded(student, folder, error=str(error)))
    plugin = run_tests(submissions)
    out += [Graded(s.student, s.assignment.id, plugin.results[s.key] + written_results(s))
            for s in submissions]
    return out


def grade_folder(root: Path, jobs: int | None = None, progress=None) -> list[Graded]:
    """Grade every submitted/<student>/<assignment>/<notebook>.ipynb under `root`.

    Submissions are split into small chunks run by `jobs` worker processes;
    each worker imports torch once and keeps its sandbox server for all its chunks.
    """
    items = [(s, a, str(p)) for s, a, p in find_submissions(root)]
    jobs = max(1, min(jobs or len(os.sched_getaffinity(0)), len(items) or 1))
    chunk = max(1, min(4, len(items) // (jobs * 2) or 1))
    chunks = [items[i:i + chunk] for i in range(0, len(items), chunk)]
    graded: list[Graded] = []
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(jobs, mp_context=context, initializer=warm_up) as pool:
        futures = [pool.submit(_grade_chunk, c) for c in chunks]
        for future in as_completed(futures):
            done = future.result()
            graded += done
            if progress:
                progress(len(done))
    return sorted(graded, key=lambda g: (g.student, g.assignment))

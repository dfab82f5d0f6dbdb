"""The `similarity` command: DIR -> OUT/index.html and OUT/pairs.csv."""

from __future__ import annotations

import os
import sys
import time
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

from autograder.course import ASSIGNMENTS, ROOT
from autograder.similarity import page
from autograder.grade.submission import _source
from autograder.similarity.answers import Problem, notebook_answers, notebooks, outcomes, release
from autograder.similarity.compare import THRESHOLD, Group, compare_group, filter_code

PROGRESS_FROM = 50
"""Notebooks from which a progress bar is shown (on stderr)."""


def _read(task) -> tuple[list, list, list]:
    """One notebook's answers, what was left out, and each code answer's `filter_code` (the
    costly part of fingerprinting, done where the notebook is read)."""
    student, folder, path, root = task
    answers, problems = notebook_answers(path, student, folder, root)
    return answers, problems, [filter_code(a.text) if a.kind == "code" else None
                               for a in answers]


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def read_all(folder: Path, root: Path = ROOT, jobs: int | None = None, progress=None):
    """(answers, problems, {(student, assignment, item): filtered}) of a folder, read by `jobs`
    processes when there are many notebooks."""
    found, problems = notebooks(folder)
    tasks = [(student, assignment, path, root) for student, assignment, path in found]
    jobs = min(jobs or _cores(), max(1, len(tasks) // 25))
    if progress:
        progress(len(tasks))
    for assignment in {a for _, a, _, _ in tasks if a in ASSIGNMENTS}:  # read once, before forking
        release(assignment, root)
        _source(assignment)
    answers, filtered = [], {}
    if jobs > 1:
        import multiprocessing
        methods = multiprocessing.get_all_start_methods()
        context = multiprocessing.get_context("fork" if "fork" in methods else None)
        with context.Pool(jobs) as pool:
            results = list(_each(pool.imap(_read, tasks, chunksize=8), progress))
    else:
        results = list(_each(map(_read, tasks), progress))
    for got, lost, prints in results:
        answers += got
        problems += lost
        for answer, f in zip(got, prints):
            filtered[(answer.student, answer.assignment, answer.item)] = f
    return answers, problems, filtered


def _each(results, progress):
    for result in results:
        if progress:
            progress(None)
        yield result


def groups_of(answers, problems, root: Path = ROOT, threshold: float = THRESHOLD,
              filtered: dict | None = None) -> list[Group]:
    """One compared Group per exercise that has answers, in the course's order."""
    by = defaultdict(list)
    for a in answers:
        by[a.key].append(a)
    order = {a: i for i, a in enumerate(ASSIGNMENTS)}
    out = []
    for (assignment, item) in sorted(by, key=lambda k: (order.get(k[0], 99), k[0], _item(k))):
        found = by[(assignment, item)]
        kind = found[0].kind
        group = Group(assignment, item, kind, [a for a in found if not a.too_short],
                      [a for a in found if a.too_short])
        if filtered:
            group.filtered = {a.student: filtered.get((a.student, a.assignment, a.item))
                              for a in group.answers}
        given = release(assignment, root)
        stub = (given.code if kind == "code" else given.text).get(item, "")
        solution = given.solution.get(item, "") if kind == "code" else ""
        out.append(compare_group(group, stub, solution, threshold))
    return out


def _item(key) -> int:
    assignment, item = key
    functions = ASSIGNMENTS[assignment].functions if assignment in ASSIGNMENTS else ()
    return functions.index(item) if item in functions else len(functions)


def main(folder: Path, out: Path, threshold: float | None = None, results: Path | None = None,
         root: Path = ROOT) -> int:
    folder, out = Path(folder), Path(out)
    threshold = THRESHOLD if threshold is None else threshold
    if not 0 < threshold <= 1:
        print(f"error: --threshold {threshold:g}: a share between 0 (excluded) and 1",
              file=sys.stderr)
        return 2
    if not folder.is_dir():
        print(f"error: {folder}: no such folder (nbgrader's submitted/ or autograded/)",
              file=sys.stderr)
        return 2
    start = time.perf_counter()
    bar = None

    def progress(count):
        nonlocal bar
        if count is not None:
            from tqdm import tqdm
            bar = tqdm(total=count, unit="notebook", file=sys.stderr,
                       disable=count < PROGRESS_FROM, desc="reading")
        elif bar is not None:
            bar.update(1)

    answers, problems, filtered = read_all(folder, root, progress=progress)
    if bar is not None:
        bar.close()
    if results is not None:
        if not Path(results).is_dir():
            print(f"error: --results {results}: no such folder (a batch's --out DIR)",
                  file=sys.stderr)
            return 2
        known = outcomes(results)
        answers = [replace(a, right=known.get((a.student, a.assignment, a.item)))
                   for a in answers]
    students = sorted({a.student for a in answers} | {p.student for p in problems})
    if len(students) < 2:
        problems.append(Problem("", "", "", f"{len(students)} learner in {folder}: nothing to "
                                "compare" if students else f"no learner's notebook in {folder}"))
    groups = groups_of(answers, problems, root, threshold, filtered)
    seconds = time.perf_counter() - start
    page.write(out, groups, problems, str(folder), threshold, students, seconds)
    pairs = sum(len(g.pairs) for g in groups)
    print(f"similar answers: {pairs} pair{'s' if pairs != 1 else ''} at or above "
          f"{threshold:.0%} in {sum(bool(g.pairs) for g in groups)} of {len(groups)} exercises, "
          f"{len(students)} learners, {seconds:.1f} s; page: {out / 'index.html'}")
    return 0

"""Sample submissions: the released notebook with answer cells filled from a scenario file.

`samples/<assignment>.toml` lists students. Each gives code for some answer
cells (the rest take the solution from source/), the score each graded
function must get, and words the failure messages must contain. The same
files drive the instructor demo and the grader's own tests.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from autograder.instructor.build import _SOLUTION_MARKER
from autograder.course import ASSIGNMENTS, ROOT
from autograder.grade.submission import answer_id

SAMPLES = ROOT / "samples"


@dataclass
class Scenario:
    """One sample student for one assignment."""

    student: str
    assignment: str
    about: str
    """What this submission does wrong (or right)."""
    code: dict[str, str]
    """grade_id of an answer cell -> the learner's code for it."""
    answers: str = "solution"
    """"solution": unlisted answer cells hold the solution; "release": they stay unanswered."""
    expect: dict[str, float] = field(default_factory=dict)
    """graded function -> the score it must get."""
    messages: dict[str, list[str]] = field(default_factory=dict)
    """graded function -> phrases that must appear in its failure messages."""
    nbgrader: bool = True
    """False for code that kills a notebook kernel (os._exit): nbgrader cannot grade it alike."""
    added: dict[str, str] = field(default_factory=dict)
    """grade_id of an answer cell -> a code cell the learner added just above it."""
    flags: list[str] = field(default_factory=list)
    """"grade_id: construct" of every flag autograder/rules/review.py must raise ("matmul: gc");
    none for a sample without the key."""
    copy_of: str = ""
    """The sample of the same assignment this one is a disguised copy of (its answers renamed,
    re-commented, reordered): the similarity report must pair the two (issue 42)."""


def load_scenarios(assignment: str) -> list[Scenario]:
    path = SAMPLES / f"{assignment}.toml"
    if not path.is_file():
        return []
    data = tomllib.loads(path.read_text())
    return [Scenario(student=s["student"], assignment=assignment, about=s.get("about", ""),
                     code=s.get("code", {}), answers=s.get("answers", "solution"),
                     expect=s.get("expect", {}),
                     messages={k: [v] if isinstance(v, str) else v
                               for k, v in s.get("messages", {}).items()},
                     nbgrader=s.get("nbgrader", True), flags=s.get("flags", []),
                     added=s.get("added", {}), copy_of=s.get("copy_of", ""))
            for s in data["student"]]


def path_through_nbgrader(s: Scenario) -> tuple:
    """What decides how nbgrader treats a sample, beyond its scores: which assignment, whether the
    answer cells hold the release or answers, whether the learner added cells (metadata-less
    cells nbgrader's steps must leave ordinary), whether the review flags it (comments in the
    gradebook), and whether it is hostile (its kernel run for feedback must survive)."""
    return (s.assignment, s.answers, bool(s.added), bool(s.flags), "hostile" in s.about.lower())


def one_per_path(scenarios: list[Scenario]) -> list[Scenario]:
    """The first sample of each path through nbgrader (`path_through_nbgrader`), told apart also
    by whether it keeps every point (a sample that loses some writes scores below the maximum into
    the grade cells); per assignment the solution and the unanswered release come first. What
    nbgrader does with a notebook depends on these, not on which mistake it holds: its scores
    come from the grader, which `python -m autograder grade` runs on every sample."""
    full = {s.assignment: s.expect for s in scenarios if s.student == "solution"}

    def path(s: Scenario) -> tuple:
        best = full.get(s.assignment, {})
        return path_through_nbgrader(s) + (all(s.expect.get(f, 0) >= v for f, v in best.items()),)

    chosen = [s for s in scenarios if s.student in ("solution", "unanswered")]
    seen = {path(s) for s in chosen}
    for s in scenarios:
        if path(s) not in seen:
            seen.add(path(s))
            chosen.append(s)
    return chosen


def representative(scenarios: list[Scenario]) -> list[Scenario]:
    """A share that exercises every graded function and every path through nbgrader: the
    solution, the unanswered release, every sample the review flags, the first sample of each
    `path_through_nbgrader`, and, for each function, the first sample that costs it points
    (a sample per path, not per sample: nbgrader takes its scores from the same grader)."""
    full = {s.assignment: s.expect for s in scenarios if s.student == "solution"}
    chosen = [s for s in scenarios if s.student in ("solution", "unanswered") or s.flags]
    paths = {path_through_nbgrader(s) for s in chosen}
    covered = set()
    for s in scenarios:
        if s.student == "unanswered":
            continue
        costs = {(s.assignment, f) for f, v in s.expect.items()
                 if v < full.get(s.assignment, {}).get(f, float("inf"))}
        new_path = path_through_nbgrader(s) not in paths
        if costs - covered or new_path:
            covered |= costs
            paths.add(path_through_nbgrader(s))
            if s not in chosen:
                chosen.append(s)
    return chosen


def submission_notebook(scenario: Scenario, root: Path = ROOT) -> nbformat.NotebookNode:
    a = ASSIGNMENTS[scenario.assignment]
    release = nbformat.read(root / "release" / a.id / a.notebook, as_version=4)
    source = nbformat.read(root / "source" / a.id / a.notebook, as_version=4)
    solutions = {answer_id(c): _SOLUTION_MARKER.sub("", c.source) for c in source.cells if answer_id(c)}
    unknown = (set(scenario.code) | set(scenario.added)) - set(solutions)
    if unknown:
        raise ValueError(f"{scenario.student}: no answer cell with grade_id {sorted(unknown)} "
                         f"in {a.id}")
    cells = []
    for cell in release.cells:
        grade_id = answer_id(cell)
        if grade_id in scenario.added:
            cells.append(nbformat.v4.new_code_cell(scenario.added[grade_id].strip("\n"),
                                                   metadata={"sample_added": True}))
        if grade_id in scenario.code:
            cell.source = scenario.code[grade_id].strip("\n")
        elif grade_id and scenario.answers == "solution":
            cell.source = solutions[grade_id]
        cells.append(cell)
    release.cells = cells
    return release


def write_submitted(dest: Path, assignments: list[str] | None = None,
                    share: bool = False) -> list[Scenario]:
    """Write nbgrader's submitted/<student>/<assignment>/<notebook> layout; return the scenarios.

    With `share`, only the `representative` share of the samples, and the disguised copies
    (`copy_of`) with their originals, for the similarity report to find.
    """
    scenarios = [s for a in assignments or list(ASSIGNMENTS) for s in load_scenarios(a)]
    if share:
        chosen = representative(scenarios)
        copied = {(s.assignment, s.copy_of) for s in scenarios if s.copy_of}
        chosen += [s for s in scenarios if s not in chosen
                   and (s.copy_of or (s.assignment, s.student) in copied)]
        scenarios = chosen
    written = []
    for scenario in scenarios:
        a = ASSIGNMENTS[scenario.assignment]
        out = dest / scenario.student / a.id / a.notebook
        out.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(submission_notebook(scenario), out)
        written.append(scenario)
    return written

"""The answers to compare: per learner, per graded function and per written answer.

An answer is the learner's answer cell (all of them, when the cell was copied) with the
definitions of the cells the learner added that it uses, by name (a helper written above it).
The release notebook's answer cell is the boilerplate: an answer equal to it is "not answered",
and its lines (the signature, the docstring, the class and decorator lines) never count toward
the length that decides whether an answer is long enough to be told apart from others.
"""

from __future__ import annotations

import ast
import functools
import io
import json
import re
import tokenize
from dataclasses import dataclass
from pathlib import Path

from autograder.course import ASSIGNMENTS, ROOT
from autograder.grade.submission import (NotGradable, _source, find_submissions, read_cells, recognise,
                                 with_course_metadata)

MIN_TOKENS = 40
"""Code shorter than this (tokens of the learner's own lines: not the release's signature or
docstring, no comments) is listed as too short to tell apart: `return z.clamp(min=0)` is 9."""
MIN_WORDS = 20
"""A written answer shorter than this (words beyond the release's text) is too short to tell
apart."""
ADDED = "# (from a cell the learner added)"


@dataclass(frozen=True)
class Answer:
    """One learner's answer to one graded function or written answer."""

    student: str
    assignment: str
    item: str
    """The graded function's name, or the written answer's grade_id."""
    kind: str
    """"code" or "text"."""
    text: str
    """What is compared and shown: the answer cell(s), and the added definitions it uses."""
    tokens: int
    """Tokens (words, for text) of the learner's own lines."""
    path: str = ""
    right: bool | None = None
    """Whether the answer passed all its hidden tests (from the grader's results; None: not
    known)."""

    @property
    def key(self) -> tuple[str, str]:
        return self.assignment, self.item

    @property
    def too_short(self) -> bool:
        return self.tokens < (MIN_TOKENS if self.kind == "code" else MIN_WORDS)


@dataclass(frozen=True)
class Problem:
    """A notebook, or a learner's answer, left out of the comparison, and why."""

    student: str
    assignment: str
    item: str
    """"" for the whole notebook."""
    reason: str


@dataclass(frozen=True)
class Release:
    """What the release notebook gives for one assignment: the boilerplate."""

    code: dict
    """grade_id -> the release's answer cell (the stub)."""
    text: dict
    """grade_id -> the release's written-answer cell ("YOUR ANSWER HERE")."""
    solution: dict
    """grade_id -> the source notebook's solution (the answer most right answers resemble)."""


_SOLUTION = re.compile(r"^[ \t]*### BEGIN SOLUTION\n(.*?)^[ \t]*### END SOLUTION[ \t]*\n?",
                       re.S | re.M)


@functools.lru_cache(maxsize=None)
def release(assignment_id: str, root: Path = ROOT) -> Release:
    """The release notebook's answer cells (or the source's, solutions taken out, if there is no
    release), and the source notebook's solutions."""
    a = ASSIGNMENTS[assignment_id]
    source = read_cells(a.source)
    solution = {c.grade_id: _SOLUTION.sub(lambda m: m.group(1), c.source) for c in source
                if c.solution and c.grade_id}
    path = root / "release" / a.id / a.notebook
    cells = read_cells(path) if path.is_file() else \
        [type(c)(c.cell_type, _SOLUTION.sub("", c.source), c.grade_id, c.solution, c.grade)
         for c in source]
    code = {c.grade_id: c.source for c in cells
            if c.cell_type == "code" and c.solution and c.grade_id}
    text = {c.grade_id: c.source for c in cells
            if c.cell_type == "markdown" and c.solution and c.grade_id}
    return Release(code, text, solution)


# --- lengths --------------------------------------------------------------------------------

_TOKEN = re.compile(r"[A-Za-z_]\w*|\d[\w.]*|\*\*|//|==|!=|<=|>=|->|:=|\S")
_SKIP = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
         tokenize.ENDMARKER, tokenize.ENCODING}


def code_tokens(text: str) -> list[str]:
    """Python tokens of `text` (no comments, no layout); a rough split if it does not tokenize."""
    try:
        return [t.string for t in tokenize.generate_tokens(io.StringIO(text).readline)
                if t.type not in _SKIP]
    except (tokenize.TokenError, IndentationError, SyntaxError, ValueError):
        return _TOKEN.findall(re.sub(r"#[^\n]*", "", text))


def own_code(text: str, stub: str) -> str:
    """`text` without the lines the release stub also has (signature, docstring, class and
    decorator lines, `# YOUR CODE HERE`) and without docstrings."""
    given = {line.strip() for line in stub.splitlines() if line.strip()}
    lines = text.splitlines()
    for first, last in _docstrings(text):
        for n in range(first - 1, last):
            lines[n] = ""
    return "\n".join(line for line in lines if line.strip() not in given)


@functools.lru_cache(maxsize=64)
def parsed(text: str):
    """The syntax tree of `text`, None if it does not parse (one parse for every reader of the
    same answer; nobody changes the tree)."""
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _docstrings(text: str) -> list[tuple[int, int]]:
    tree = parsed(text)
    if tree is None:
        return []
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) \
                and node.body and isinstance(node.body[0], ast.Expr) \
                and isinstance(node.body[0].value, ast.Constant) \
                and isinstance(node.body[0].value.value, str):
            out.append((node.body[0].lineno, node.body[0].end_lineno))
    return out


def count_code(text: str, stub: str) -> int:
    return len(code_tokens(own_code(text, stub)))


_WORD = re.compile(r"\w+")


def count_words(text: str, stub: str) -> int:
    given = set(_WORD.findall(stub.lower()))
    return sum(w not in given for w in _WORD.findall(text.lower()))


# --- helpers the learner added --------------------------------------------------------------

def _used(tree) -> set[str]:
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | \
        {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}


def _bound(node) -> set[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in node.names}
    return set()


def helpers(answer: str, added: list[str]) -> list[str]:
    """The top-level statements of the added cells (`added`, in notebook order) that bind a name
    the answer uses, directly or through another such statement, as source text."""
    tree = parsed(answer)
    if tree is None:
        return []
    statements = []
    for text in added:
        tree_added = parsed(text)
        if tree_added is None:
            continue
        for node in tree_added.body:
            names = _bound(node)
            if names and not isinstance(node, (ast.Import, ast.ImportFrom)):
                statements.append((names, node, ast.get_source_segment(text, node) or ""))
    wanted, kept = _used(tree), set()
    changed = True
    while changed:
        changed = False
        for i, (names, node, _) in enumerate(statements):
            if i not in kept and names & wanted:
                kept.add(i)
                wanted |= _used(node)
                changed = True
    return [statements[i][2] for i in sorted(kept)]


def code_answer(student: str, assignment: str, item: str, cells: list[str], added: list[str],
                stub: str, path: str = "") -> Answer:
    """The answer made of the learner's answer cells for `item` and, of the cells they added
    (`added`, in notebook order), the definitions it uses."""
    body = "\n\n".join(cells)
    extra = helpers(body, added)
    shown = "\n\n".join([*(f"{ADDED}\n{h}" for h in extra), body])
    tokens = count_code(body, stub) + sum(len(code_tokens(h)) for h in extra)
    return Answer(student, assignment, item, "code", shown, tokens, path)


# --- one notebook ---------------------------------------------------------------------------

def _assignment(cells, folder: str):
    """The folder's assignment when the notebook's answer cells are its (cheap), else the
    grader's `recognise` (which parses every code cell)."""
    known = ASSIGNMENTS.get(folder)
    answers = {c.grade_id for c in cells if c.cell_type == "code" and c.solution and c.grade_id}
    if known is not None and answers & set(known.functions):
        return known
    return recognise(cells)


def notebook_answers(path: Path, student: str, folder: str = "",
                     root: Path = ROOT) -> tuple[list[Answer], list[Problem]]:
    """The answers of one learner's notebook, and what was left out of it (with the reason)."""
    try:
        cells = read_cells(path)
    except NotGradable as error:
        return [], [Problem(student, folder, "", str(error).removeprefix(f"{path}: "))]
    except OSError as error:
        return [], [Problem(student, folder, "", f"cannot be read ({error.strerror or error})")]
    assignment = _assignment(cells, folder)
    if assignment is None:
        return [], [Problem(student, folder, "",
                            "not a notebook of this course (no graded function found)")]
    cells = with_course_metadata(cells, _source(assignment.id))
    given = release(assignment.id, root)
    known = _source(assignment.id).known
    code: dict[str, list[str]] = {}
    text: dict[str, list[str]] = {}
    added: list[str] = []
    for cell in cells:
        if cell.cell_type == "code" and cell.solution and cell.grade_id in given.code:
            code.setdefault(cell.grade_id, []).append(cell.source)
        elif cell.cell_type == "markdown" and cell.grade_id in given.text:
            text.setdefault(cell.grade_id, []).append(cell.source)
        elif cell.cell_type == "code" and cell.grade_id is None \
                and cell.source.strip() not in known:
            added.append(cell.source)
    answers, problems = [], []
    for item, stub in given.code.items():
        found = [s for s in code.get(item, []) if s.strip() != stub.strip()]
        if not found:
            problems.append(Problem(student, assignment.id, item, "not answered"))
            continue
        answers.append(code_answer(student, assignment.id, item, found, added, stub, str(path)))
    for item, stub in given.text.items():
        found = [s for s in text.get(item, []) if s.strip() != stub.strip()]
        if not found:
            problems.append(Problem(student, assignment.id, item, "not answered"))
            continue
        body = "\n\n".join(found)
        answers.append(Answer(student, assignment.id, item, "text", body,
                              count_words(body, stub), str(path)))
    return answers, problems


def notebooks(folder: Path) -> tuple[list[tuple[str, str, Path]], list[Problem]]:
    """(student, assignment folder, notebook) of every submission in a submitted/ (or nbgrader
    autograded/) folder, and the assignment folders that hold no notebook."""
    folder = Path(folder)
    problems = []
    for student_dir in sorted(p for p in folder.iterdir() if p.is_dir()
                              and not p.name.startswith(".")):
        for assignment_dir in sorted(p for p in student_dir.iterdir() if p.is_dir()):
            if not any(assignment_dir.glob("*.ipynb")):
                problems.append(Problem(student_dir.name, assignment_dir.name, "",
                                        "no notebook (.ipynb) in the folder"))
    return find_submissions(folder), problems


def collect(folder: Path, root: Path = ROOT) -> tuple[list[Answer], list[Problem]]:
    """Every answer in a submitted/ (or nbgrader autograded/) folder, and every notebook or
    answer left out, with the reason (in one process; the command reads in several)."""
    found, problems = notebooks(folder)
    answers = []
    for student, assignment, path in found:
        got, lost = notebook_answers(path, student, assignment, root)
        answers += got
        problems += lost
    return answers, problems


def outcomes(results: Path) -> dict[tuple[str, str, str], bool]:
    """(student, assignment, function) -> whether all its hidden tests passed, from a batch's
    result files (`python -m autograder grade SUBMITTED --out RESULTS`: RESULTS/<student>/
    <assignment>.json); unreadable files are left out (the answers are then of unknown outcome)."""
    out: dict[tuple[str, str, str], bool] = {}
    for path in sorted(Path(results).glob("*/*.json")):
        try:
            tests = json.loads(path.read_bytes()).get("tests", [])
        except (OSError, ValueError, AttributeError):
            continue
        for test in tests if isinstance(tests, list) else []:
            try:
                if not isinstance(test, dict) or not float(test.get("max_score") or 0) > 0:
                    continue
            except (TypeError, ValueError):
                continue
            function = str(test.get("name", "")).split(":", 1)[0].strip()
            key = (path.parent.name, path.stem, function)
            out[key] = out.get(key, True) and test.get("status") == "passed"
    return out

"""Read a submitted notebook: which assignment it is, and the learner's code.

Submissions are untrusted files: anything that is not a readable notebook of
this course is refused with one line (`NotGradable`), and oddities inside a
readable one (metadata that is not a dict, a cell without source, a copied
answer cell, an answer cell turned markdown) are handled, never a traceback.
"""

from __future__ import annotations

import ast
import functools
import json
import sys
from dataclasses import dataclass
from pathlib import Path

# nbformat validates with jsonschema, whose format checkers import rfc3987_syntax when it is
# installed (jupyter's packages pull it in); that module compiles a grammar at import, about
# 1.9 s on every grader start. Notebook schemas use no IRI format, so the grader goes without
# it: jsonschema skips a checker whose module cannot be imported.
sys.modules.setdefault("rfc3987_syntax", None)
# nbformat itself (about 0.13 s) is imported where it is used: recognising a notebook's
# assignment needs only json and ast, and a single grade does that before it starts the jail.

from autograder.course import (ASSIGNMENTS, Assignment, _source, _Source, answer_id,  # noqa: F401
                               stand_ins, subset_rules)
from autograder.rules.subset import _parse, lines_of

MAX_BYTES = 128 << 20
"""Larger files are refused (a notebook of this course is well under 1 MB without outputs)."""
MAX_CONTAINERS = 1_000_000
"""'[' and '{' characters one file may hold, counted before it is parsed (each may open a list or
an object, 50-60 bytes apiece once parsed; a notebook of this course holds a few thousand)."""
MAX_CELL_CODE = 200_000
"""Characters of code one cell may hold (the course's largest, the setup cell, holds 25,000):
a longer one is refused before anything parses it."""
MAX_NOTEBOOK_CODE = 1_000_000
"""Characters of code (all code cells) one notebook may hold."""



class NotGradable(Exception):
    """The input is not a notebook of this course; the message is one line for the operator."""


@dataclass(frozen=True)
class Cell:
    """One code cell as the grader sees it."""

    cell_type: str
    source: str
    grade_id: str | None
    """nbgrader grade_id (None for cells nbgrader does not know)."""
    solution: bool
    grade: bool
    cell_id: str | None = None
    """The cell's id (nbformat 4.5): a copy of a course notebook keeps the course's ids."""


@dataclass(frozen=True)
class Submission:
    """One learner's notebook, ready to grade."""

    path: Path
    assignment: Assignment
    cells: tuple[dict, ...]
    """The code to run, in order: the source notebook's setup cells, then the learner's answer
    cells and what the answers reach of the cells the learner added ({"source"})."""
    written: tuple[tuple[str, float, str], ...] = ()
    """(grade_id, points, text) of each answer graded by hand (markdown answer cells)."""
    student: str | None = None
    cutoffs: tuple[tuple[str, int], ...] = ()
    """(function, n): the first n of `cells` are what runs above that function's check cell
    in the learner's notebook (functions without a check cell run every cell)."""
    refused: tuple[tuple[str, tuple], ...] = ()
    """(function, refusals): what a by-hand function's code uses outside its subset of Python
    (autograder/rules/subset/), decided here from the code; its tests then fail without running."""
    not_run: tuple[str, ...] = ()
    """Statements of the cells the learner added that grading does not run although they use a
    global it does run (`_ = K.setdefault("k", 1.0)` beside `K = {}`): named when a function
    fails with an error a missing entry or name gives."""
    programs: tuple[tuple[str, tuple[dict, ...]], ...] = ()
    """(function, cells): for a by-hand function whose code is inside its subset, the only code
    its grading process runs: the setup cells and, of the learner's cells, exactly the
    statements the subset check read (`subset.reach`), in their places (the world is closed)."""

    def cells_for(self, function: str | None) -> int:
        """How many of `cells` a child grading `function` runs: the notebook top to bottom as
        far as the function's check cell, as Restart & Run All reaches it (a later cell that
        rebinds the name, or a definition below the check, does not count)."""
        return dict(self.cutoffs).get(function, len(self.cells))

    @property
    def key(self) -> str:
        return f"{self.student or self.path.stem}/{self.assignment.id}"


def _text(value) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(v for v in value if isinstance(v, str))
    return ""


def _cells(data) -> list[Cell]:
    """The cells of a notebook read as plain JSON, tolerating any malformed part."""
    if isinstance(data, dict) and data.get("nbformat") == 3 and isinstance(data.get("worksheets"), list):
        import nbformat
        try:
            data = nbformat.v4.upgrade(nbformat.from_dict(data), from_version=3)
        except Exception:  # noqa: BLE001 - a broken v3 file
            raise NotGradable("an nbformat 3 notebook that cannot be converted") from None
    raw = data.get("cells") if isinstance(data, dict) else None
    if not isinstance(raw, list):
        raise NotGradable("not a notebook (no list of cells)")
    out = []
    for cell in raw:
        if not isinstance(cell, dict):
            continue
        metadata = cell.get("metadata")
        meta = metadata.get("nbgrader") if isinstance(metadata, dict) else None
        meta = meta if isinstance(meta, dict) else {}
        grade_id = meta.get("grade_id") if isinstance(meta.get("grade_id"), str) else None
        cell_id = cell.get("id") if isinstance(cell.get("id"), str) else None
        out.append(Cell(str(cell.get("cell_type")), _text(cell.get("source")), grade_id,
                        meta.get("solution") is True, meta.get("grade") is True, cell_id))
    return out


def defined_names(source: str) -> set[str]:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return set()
    return {node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))}


def read_cells(path: str | Path) -> list[Cell]:
    """The cells of the notebook at `path`, or NotGradable with one line saying why not."""
    path = Path(path)
    raw = read_bounded(path)
    if not raw.strip():
        raise NotGradable(f"{path}: the file is empty")
    try:
        data = json.loads(raw.decode("utf-8", errors="replace"))
    except (ValueError, RecursionError):
        raise NotGradable(f"{path}: not a readable notebook (invalid JSON)") from None
    try:
        cells = _cells(data)
    except NotGradable as error:
        raise NotGradable(f"{path}: {error}") from None
    _bounded(path, cells)
    return cells


def read_bounded(path: Path) -> bytes:
    """The bytes of the file at `path`, or NotGradable naming the limit it is over (MAX_BYTES,
    MAX_CONTAINERS): what parsing it would cost is bounded before anything parses it."""
    if not path.is_file():
        raise NotGradable(f"{path}: no such file")
    size = path.stat().st_size
    if size > MAX_BYTES:
        raise NotGradable(f"{path}: {size} bytes, more than the {MAX_BYTES} a notebook file may hold")
    raw = path.read_bytes()
    opened = raw.count(b"[") + raw.count(b"{")
    if opened > MAX_CONTAINERS:
        raise NotGradable(f"{path}: {opened} '[' and '{{' characters, more than the "
                          f"{MAX_CONTAINERS} a notebook file may hold")
    return raw


def _bounded(path: Path, cells: list[Cell]) -> None:
    """Refuse, before any of it is parsed, a notebook past the limits on what is read from it."""
    code = [c for c in cells if c.cell_type == "code"]
    big = next((i for i, c in enumerate(code) if len(c.source) > MAX_CELL_CODE), None)
    if big is not None:
        raise NotGradable(f"{path}: code cell {big + 1} holds {len(code[big].source)} characters, "
                          f"more than the {MAX_CELL_CODE} a cell may hold")
    total = sum(len(c.source) for c in code)
    if total > MAX_NOTEBOOK_CODE:
        raise NotGradable(f"{path}: {total} characters of code, more than the {MAX_NOTEBOOK_CODE} "
                          f"a notebook may hold")


def recognise(cells: list[Cell]) -> Assignment | None:
    """The assignment these cells belong to, from answer-cell ids, else from function names."""
    answers = {c.grade_id for c in cells if c.cell_type == "code" and c.solution and c.grade_id}
    defined = set().union(*(defined_names(c.source) for c in cells if c.cell_type == "code"))
    scores = {a.id: (len(answers & set(a.functions)), len(defined & set(a.functions)))
              for a in ASSIGNMENTS.values()}
    best = max(scores, key=scores.get)
    return None if scores[best] == (0, 0) else ASSIGNMENTS[best]


def load_submission(path: str | Path, student: str | None = None) -> Submission:
    """Read `path` and recognise its assignment from its content."""
    path = Path(path)
    cells = read_cells(path)
    assignment = recognise(cells)
    if assignment is None:
        raise NotGradable(f"{path}: not a notebook of this course (no graded function found)")
    source = _source(assignment.id)
    cells = with_course_metadata(cells, source)
    # Setup cells (imports, given helpers) come from the trusted source notebook, as nbgrader's
    # autograde restores locked cells; then, in the learner's order, their answer cells (a copied
    # answer cell too: the later definition wins, as in the notebook) and, from cells they added,
    # only the imports and definitions (a helper they wrote; no demo code that may run for long).
    from autograder.rules.subset import SETUP, reach, reached
    program = [{"source": s, "label": SETUP, "answer": None} for s in source.setup]
    has_answers = any(c.grade_id in source.answers for c in cells if c.cell_type == "code")
    cutoffs = {}
    for cell in cells:
        checked = (cell.grade_id or "").removeprefix("tests_")
        if cell.cell_type == "code" and cell.grade and not cell.solution \
                and checked in assignment.functions:
            cutoffs.setdefault(checked, len(program))
        if cell.cell_type != "code" or cell.grade_id in source.setup_ids:
            continue
        if cell.grade_id in source.answers and cell.solution:
            program.append({"source": cell.source, "label": f"cell {cell.grade_id}",
                            "answer": cell.grade_id})
        elif cell.grade_id is None and cell.source.strip() not in source.known:
            if has_answers or defined_names(cell.source) & set(assignment.functions):
                program.append({"source": cell.source, "label": "a cell you added", "answer": None})
    # What a by-hand function's code may use is decided here, from the code (rules/subset/).
    refused, reaches = {}, {}
    for function in assignment.functions:
        rules = subset_rules(assignment, function)
        if rules is not None:
            found, reaches[function] = reach(program[:cutoffs.get(function, len(program))],
                                             function, rules)
            if found:
                refused[function] = tuple(found)
    # Of the cells the learner added, only what the answers use runs (helpers, constants,
    # imports): no demo code, which may run for long or reach into the grader's process.
    keep = reached(program, assignment.functions)
    run = []
    for i, cell in enumerate(program):
        text = cell["source"]
        if cell["label"] != SETUP and cell["answer"] is None:
            lines = lines_of(text)
            text = "\n".join(line if n in keep.get(i, ()) else "" for n, line in enumerate(lines, 1))
        if cell["label"] == SETUP and "class _Checker" in text:
            text = ""  # the notebook's copy of rules/subset/: its visible checks', not the answers'
        run.append({"source": text})
    not_run = _not_run(program, keep, SETUP)
    # A by-hand function's process runs what its check read, and nothing else of the learner's.
    programs = {}
    for function, statements in reaches.items():
        if function in refused:
            continue
        cells_run = []
        for i, cell in enumerate(program[:cutoffs.get(function, len(program))]):
            if cell["label"] == SETUP:
                cells_run.append(run[i])
            elif i in statements:
                cells_run.append({"source": only(cell["source"], statements[i])})
            elif cell["answer"] == function and _parse(cell["source"]) is None:
                cells_run.append({"source": cell["source"]})  # its SyntaxError runs nothing
            else:
                cells_run.append({"source": ""})
        programs[function] = tuple(cells_run)
    texts = {c.grade_id: c.source for c in cells if c.cell_type == "markdown" and c.grade_id}
    written = tuple((grade_id, points, texts.get(grade_id, "")) for grade_id, points in source.manual)
    return Submission(path, assignment, tuple(run), written=written, student=student,
                      cutoffs=tuple(cutoffs.items()), refused=tuple(refused.items()),
                      programs=tuple(programs.items()), not_run=not_run)


def _not_run(program: list[dict], keep: dict, setup: str) -> tuple[str, ...]:
    """`Submission.not_run`: of the cells the learner added, the statements grading leaves out
    (not a def, a class or an import) that name a global a statement it keeps binds there."""
    from autograder.rules.subset.program import _bound
    out = []
    for i, cell in enumerate(program):
        if cell["label"] == setup or cell["answer"] is not None:
            continue
        tree, kept = _parse(cell["source"]), keep.get(i, set())
        body = tree.body if tree else []
        bound = set().union(*(_bound(n) for n in body if n.lineno in kept)) if body else set()
        lines = lines_of(cell["source"])
        for node in body:
            if node.lineno in kept or isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.Import,
                                                        ast.ImportFrom, ast.AsyncFunctionDef)):
                continue
            if bound & {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}:
                out.append(lines[node.lineno - 1].strip()[:120])
    return tuple(out)


def only(source: str, statements: list) -> str:
    """`source` with only `statements` (top-level statements of its tree, in source order) left,
    each on its own lines (so that line numbers still point at the learner's cell), and the
    cell's `from __future__` imports, which Python requires first."""
    tree = _parse(source)
    future = [n for n in tree.body if isinstance(n, ast.ImportFrom) and n.module == "__future__"]
    kept = sorted({id(n): n for n in (*future, *statements)}.values(),
                  key=lambda n: (n.lineno, n.col_offset))
    lines = [line.encode("utf-8") for line in lines_of(source)]
    out = [""] * len(lines)
    for node in kept:
        decorators = getattr(node, "decorator_list", [])
        first, col = (min(d.lineno for d in decorators), 0) if decorators \
            else (node.lineno, node.col_offset)
        last, end = node.end_lineno, node.end_col_offset
        if first == last:
            segment = [lines[first - 1][col:end]]
        else:
            segment = [lines[first - 1][col:], *lines[first:last - 1], lines[last - 1][:end]]
        segment = [part.decode("utf-8", errors="replace") for part in segment]
        # a statement that shared its line with one left out (`a = 1; b = 2`) keeps its line
        out[first - 1] = f"{out[first - 1]}; {segment[0]}" if out[first - 1] else segment[0]
        for k, part in enumerate(segment[1:], first):
            out[k] = part
    return "\n".join(out)


def with_course_metadata(cells: list[Cell], source: "_Source") -> list[Cell]:
    """A cell that lost its nbgrader metadata (a copy of solutions/, an editor that strips it)
    but keeps the id of a course cell is that cell again (`regained`): graded as nbgrader grades
    it once its sanitize step gives the metadata back (autograder.nbgrader.repair.RepairCellMetadata).
    A cell with a course cell's grade_id has that cell's flags (a check cell the learner marked
    ungraded still cuts the program where the notebook's check runs), and a cell with a grade_id
    the course does not have is an ordinary cell, as that sanitize step makes them too."""
    again = regained([(c.cell_type, c.cell_id, c.grade_id) for c in cells], source)
    flags = {known[1]: (known[2], known[3]) for known in source.ids.values()}
    out = []
    for i, c in enumerate(cells):
        if i in again:
            known = source.ids[again[i]]
            c = Cell(c.cell_type, c.source, known[1], known[2], known[3], c.cell_id)
        elif c.grade_id in flags:  # what makes a course cell an answer or a check is the course's
            c = Cell(c.cell_type, c.source, c.grade_id, *flags[c.grade_id], c.cell_id)
        elif c.grade_id is not None:  # a grade_id the course does not have: an ordinary cell
            c = Cell(c.cell_type, c.source, None, False, False, c.cell_id)
        out.append(c)
    return out


def regained(cells: list[tuple[str, str | None, str | None]], source: "_Source") -> dict[int, str]:
    """Which cells are a course cell again, as {index: that course cell's id}: the one rule of
    the standalone grader (`with_course_metadata`) and of nbgrader (`RepairCellMetadata`).

    `cells` holds each cell's (cell type, id, grade_id of its own nbgrader metadata or None) in
    notebook order. A cell whose own metadata holds no grade_id (none at all: a copy of
    solutions/, an editor that strips it) and whose id is a course cell's of the same type is
    that course cell again, unless a cell of the notebook carries that course cell's grade_id in
    its own metadata (the course cell is there: this one is a copy) or an earlier cell holds the
    same id (reading a notebook, nbformat gives later holders of an id new ids). Otherwise it is
    an ordinary cell the learner added."""
    carried = {grade_id for _, _, grade_id in cells if grade_id}
    seen, out = set(), {}
    for i, (cell_type, cell_id, grade_id) in enumerate(cells):
        if cell_id is None or cell_id in seen:
            continue
        seen.add(cell_id)
        known = source.ids.get(cell_id)
        if grade_id is None and known is not None and known[0] == cell_type \
                and known[1] not in carried:
            out[i] = cell_id
    return out


def find_submissions(root: str | Path) -> list[tuple[str, str, Path]]:
    """(student, assignment folder, notebook) for nbgrader's submitted/<student>/<assignment>/ layout."""
    root = Path(root)
    found = []
    for student_dir in sorted(p for p in root.iterdir() if p.is_dir()
                              and not p.name.startswith(".")):  # .ipynb_checkpoints, ...
        for assignment_dir in sorted(p for p in student_dir.iterdir() if p.is_dir()):
            notebooks = sorted(assignment_dir.glob("*.ipynb"))
            expected = ASSIGNMENTS.get(assignment_dir.name)
            preferred = [n for n in notebooks if expected and n.name == expected.notebook]
            for notebook in (preferred or notebooks)[:1]:
                found.append((student_dir.name, assignment_dir.name, notebook))
    return found

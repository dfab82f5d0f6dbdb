"""The course as one tutorial in PyTorch's own format: a sphinx-gallery script for pytorch/tutorials.

`python -m autograder tutorial --out DIR` writes DIR/training_loop_math_tutorial.py (`write`); with `--html`
it also builds it as pytorch.org does, and `--pr DIR` writes the files of a pull request to
pytorch/tutorials (autograder/tutorial/publish.py). docs/tutorial.md says how to build it and how to
contribute it.

One source. The tutorial's body is the cells of source/01-06 whose metadata.tags holds "tutorial",
in notebook order: markdown cells become reStructuredText text blocks (autograder/tutorial/to_rst.py), code
cells become code blocks, and answer cells give their reference solution (the cell as
solutions/ shows it: the `### BEGIN/END SOLUTION` lines removed). Notebook N is section N. Text
meant for a learner doing the exercises is left out: an "Exercise" subsection of a markdown cell
(from its heading to the end of the cell) and the "*What you may use*" paragraph.

What this module adds around the cells (the frame): the title block with its "What you will learn"
and "Prerequisites" cards, a setup block, one lead paragraph per section, the checks after
cells (`CHECKS`: each formula compared with PyTorch by `torch.testing.assert_close`, through
`check_close`), the figure of the parameters before and after a step, the conclusion and further
reading. A check names the cell it follows by its id, so a tagged cell that goes missing fails
`tests/tutorial/test_tutorial.py`, as does a section left without a tagged cell.

Content as data, code here. The frame's text and the tables that choose and reword the cells (`AUTHOR`,
`TITLE`, `HEADER`, `CONCLUSION`, `SECTIONS`, `HELPERS`, `CHECKS`, `LEFT_OUT`, `REWRITES`, `COURSE_VOICE`)
are in autograder/tutorial/tables.toml, read once at import. TOML because they are only strings, lists
and string-keyed tables: its literal strings ('...', '''...''') hold regular expressions, code and
reStructuredText as written (no escaped backslashes, no indentation to strip), comments say why each
entry is there, and one entry per line keeps a change to a table a one-line diff. Python's tomllib reads
it (the instructor's side already needs Python 3.11 for the samples' TOML).
"""

from __future__ import annotations

import ast
import re
import textwrap
import tomllib
from dataclasses import dataclass
from pathlib import Path

import nbformat

from autograder.instructor.build import _SOLUTION_MARKER
from autograder.course import ASSIGNMENTS
from autograder.tutorial.to_rst import inline, markdown_to_rst

TAG = "tutorial"
FILENAME = "training_loop_math_tutorial.py"
SEPARATOR = "#" * 70


@dataclass(frozen=True)
class Check:
    code: str
    text: str = ""
    """With text: a block of its own, after the cell's. Without: appended to the cell's block."""
    then: str = ""
    """With text and then: `code` is appended to the cell's block, and `then` is the block after `text`."""


_TABLES = tomllib.loads(Path(__file__).with_name("tables.toml").read_text(encoding="utf-8"))
"""autograder/tutorial/tables.toml, the tutorial's content (its comments say more of each table)."""

AUTHOR: tuple[str, str] = (_TABLES["author"]["name"], _TABLES["author"]["handle"])
"""The author line: a name and a GitHub handle (a placeholder: docs/tutorial.md)."""
TITLE: str = _TABLES["frame"]["title"]
"""The tutorial's title: its page's heading and its card's on pytorch.org."""
HEADER: str = _TABLES["frame"]["header"]
"""The script's start: the title block and its cards, the Overview and the Setup block."""
CONCLUSION: str = _TABLES["frame"]["conclusion"]
"""The last text block: the conclusion and further reading."""
SECTIONS: dict[str, str] = _TABLES["sections"]
"""The six sections, in order (notebook N is section N), each with its lead paragraph."""
HELPERS: dict[str, list[str]] = _TABLES["helpers"]
"""Helpers of the notebooks' setup cells that tagged cells call: copied into the setup block."""
CHECKS: dict[str, Check] = {cell: Check(**fields) for cell, fields in _TABLES["checks"].items()}
"""Code run right after a tagged cell (by its id), comparing what it computed with PyTorch."""
LEFT_OUT: dict[str, str] = _TABLES["left_out"]
"""Tagged cells the tutorial leaves to the notebooks, by id, and why ("course", "private API", "length")."""
REWRITES: list[tuple[str, str]] = [(r["pattern"], r["replacement"]) for r in _TABLES["rewrites"]]
"""Course wording in tagged cells, rewritten for the tutorial: (regular expression, replacement), applied
to the Markdown of every tagged markdown cell and to the code of every tagged code cell."""
COURSE_VOICE: list[str] = _TABLES["course_voice"]["patterns"]
"""Phrases of a course, not of a pytorch.org page: none may be left in the script (`render` raises), and
tests/tutorial/test_tutorial.py checks the written file with the same list."""

MAX_BYTES = 35_000
"""pytorch/tutorials' beginner tutorials are 10-15 KB; this one covers six topics in at most this."""


def author_rst() -> str:
    name, handle = AUTHOR
    return f"`{name} <https://github.com/{handle}>`__"


def course_voice(text: str) -> list[str]:
    """The COURSE_VOICE phrases in `text`, each with its line."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for pattern in COURSE_VOICE:
            m = re.search(pattern, line, re.I)
            if m:
                found.append(f"line {number}: {m.group(0)!r} in {line.strip()[:80]!r}")
    return found


def _rewritten(text: str) -> str:
    for pattern, replacement in REWRITES:
        text = re.sub(pattern, lambda m: replacement, text, flags=re.S)
    return text


def _one_check(code: str) -> str:
    """A cell's code without its own verifications (a top-level `assert`; a `print` of `torch.allclose`,
    of an `is` test or of a largest difference; a loop of such prints), used where a CHECKS entry verifies
    the same claim with check_close: one verification per claim."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return code

    def verifies(node) -> bool:
        if isinstance(node, ast.Assert):
            return True
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and \
                getattr(node.value.func, "id", "") == "print":
            return bool(re.search(r"allclose|equal\(|\.abs\(\)\.max\(\)|\w \bis\b \w", ast.get_source_segment(code, node)))
        if isinstance(node, ast.For):
            return all(verifies(n) for n in node.body)
        return False

    lines = code.splitlines()
    drop = set()
    for node in tree.body:
        if verifies(node):
            drop.update(range(node.lineno - 1, node.end_lineno))
    kept = [line for i, line in enumerate(lines) if i not in drop]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(kept)).strip("\n")


_LEARNER_ONLY = re.compile(r"^\*What you may use\*.*?(?:\n[ \t]*\n|\Z)", re.M | re.S)
"""The paragraph that tells a learner what an exercise may use."""


class TutorialError(ValueError):
    """The tagged cells do not make a tutorial (said with the cell it is about)."""


@dataclass
class Block:
    kind: str           # "text" or "code"
    body: str
    cell: str = ""      # the id of the notebook cell it came from ("" for the frame)


@dataclass
class Section:
    assignment: str
    title: str
    blocks: list[Block]


def _source(cell) -> str:
    return cell.source if isinstance(cell.source, str) else "".join(cell.source)


def _notebook(assignment: str):
    return nbformat.read(ASSIGNMENTS[assignment].source, as_version=4)


def tagged_cells(assignment: str) -> list:
    return [c for c in _notebook(assignment).cells if TAG in c.metadata.get("tags", [])]


def _title(nb, assignment: str) -> str:
    """The notebook's `# N · Title` heading, without its number."""
    first = _source(nb.cells[0]).splitlines()[0] if nb.cells else ""
    m = re.match(r"#\s+\d+\s*·\s*(.+)", first)
    if not m:
        raise TutorialError(f"{assignment}: the first cell does not start with '# N · Title': {first!r}")
    return m.group(1).strip()


_NUMBERED = re.compile(r"^##\s+(\d+[a-z]?)\.\s+(.*)$", re.M)


@dataclass
class _Numbers:
    """A notebook's numbered parts ("## 3. ...") as this tutorial numbers them: section.part,
    counting only the parts whose heading is in a tagged cell."""
    section: int
    parts: dict[str, str]
    assignment: str
    level: int = 2      # of the last heading: the section's own title is a second-level one

    def depth(self, depth: int) -> int:
        """A heading at most one level below the one before it (reStructuredText allows no jump)."""
        self.level = min(depth, self.level + 1)
        return self.level

    def rewrite(self, text: str) -> str:
        """Plain text: "notebook N" is section N here, and this notebook's "section k", "part k" and
        "§k" are section N.j; "this notebook" and "this course" are this tutorial."""
        def reference(m: re.Match) -> str:
            if m.group("notebook"):
                return ("S" if m.group("notebook")[0] == "N" else "s") + "ection" + m.group("plural") + " " + \
                    m.group("number")
            if m.group("part") not in self.parts:
                raise TutorialError(f"{self.assignment}: a tagged cell refers to {m.group(0)!r}, whose heading "
                                    "is in no tagged cell")
            return ("S" if m.group("word")[0] in "SP" else "s") + "ection " + self.parts[m.group("part")]
        text = re.sub(r"\b(?P<notebook>[Nn]otebook)(?P<plural>s?)\s+(?P<number>[1-6])\b"
                      r"|(?P<word>\b[Ss]ection|\b[Pp]art|§)\s*(?P<part>\d+[a-z]?)\b(?![.,]\d)", reference, text)
        return re.sub(r"\b([Tt]his|the whole) (notebook|course)\b", r"\1 tutorial", text)


def _learner_text_removed(markdown: str) -> str:
    """A markdown cell without its "Exercise" subsection (heading to the end of the cell)."""
    m = re.search(r"^#{1,6}\s+Exercise\b", markdown, re.M)
    return markdown[:m.start()] if m else markdown


def _numbers(nb, assignment: str, section: int) -> _Numbers:
    found = [m.group(1) for c in nb.cells if c.cell_type == "markdown" and TAG in c.metadata.get("tags", [])
             and c.id not in LEFT_OUT
             for m in _NUMBERED.finditer(_learner_text_removed(_rewritten(_source(c))))]
    return _Numbers(section, {k: f"{section}.{j}" for j, k in enumerate(found, 1)}, assignment)


def cell_rst(markdown: str, numbers: _Numbers) -> str:
    """A markdown cell as reStructuredText: its numbered parts renumbered, its headings one level down
    (the section's title is the first level), learner-only text left out."""
    markdown = _LEARNER_ONLY.sub("", _learner_text_removed(markdown))
    markdown = _NUMBERED.sub(lambda m: f"## {numbers.parts[m.group(1)]} {m.group(2)}", markdown)
    return markdown_to_rst(markdown, rewrite=numbers.rewrite, level=lambda level: numbers.depth(level + 1))


def cell_code(cell, assignment: str) -> str:
    code = _SOLUTION_MARKER.sub("", _source(cell)).strip("\n")
    for line in code.splitlines():
        if line.lstrip().startswith(("%", "!")):
            raise TutorialError(f"{assignment} cell {cell.get('id')}: IPython syntax ({line.strip()!r}) "
                                "does not run in a plain Python script")
    return code


def sections() -> list[Section]:
    """The six sections, built from the tagged cells of source/."""
    result = []
    for number, (assignment, lead) in enumerate(SECTIONS.items(), 1):
        nb = _notebook(assignment)
        numbers = _numbers(nb, assignment, number)
        blocks = [Block("text", textwrap.dedent(lead).strip() + "\n")]
        for cell in nb.cells:
            if TAG not in cell.metadata.get("tags", []) or cell.id in LEFT_OUT:
                continue
            if cell.cell_type == "markdown":
                rst = cell_rst(_rewritten(_source(cell)), numbers)
                if not rst.strip():
                    raise TutorialError(f"{assignment} cell {cell.id}: tagged, but nothing of it is left for "
                                        "the tutorial (an Exercise subsection only?)")
                blocks.append(Block("text", rst, cell.id))
            elif cell.cell_type == "code":
                code = cell_code(cell, assignment)
                check = CHECKS.get(cell.id)
                if check and not cell.metadata.get("nbgrader", {}).get("solution"):
                    code = _one_check(code)
                code = _rewritten(code)
                if check and (not check.text or check.then):   # after a definition, two blank lines (PEP 8)
                    gap = "\n\n\n" if re.search(r"^(def|class) ", code, re.M) and code.splitlines()[-1][:1] == " " \
                        else "\n\n"
                    code += gap + textwrap.dedent(check.code).strip("\n")
                blocks.append(Block("code", code, cell.id))
                if check and check.text:
                    blocks.append(Block("text", textwrap.dedent(check.text).strip() + "\n"))
                    blocks.append(Block("code", textwrap.dedent(check.then or check.code).strip("\n")))
        if not any(b.cell for b in blocks if b.kind == "text") or not any(b.cell for b in blocks if b.kind == "code"):
            raise TutorialError(f"section {number} ({assignment}) needs a tagged markdown cell and a tagged code "
                                f"cell: add the tag {TAG!r} to the cells it should show")
        result.append(Section(assignment, _title(nb, assignment), blocks))
    used = {b.cell for section in result for b in section.blocks}
    stale = sorted(set(CHECKS) - used)
    if stale:
        raise TutorialError(f"autograder/tutorial/tables.toml has checks after cells that are not tagged {TAG!r} (or no "
                            f"longer exist): {', '.join(stale)}")
    return result


def _helpers() -> str:
    """The setup cells' helper functions named in HELPERS, as their source."""
    found = []
    for assignment, names in HELPERS.items():
        setup = next(c for c in _notebook(assignment).cells
                     if c.metadata.get("nbgrader", {}).get("grade_id") == "setup")
        source = _source(setup)
        tree = ast.parse(source)
        for name in names:
            node = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name), None)
            if node is None:
                raise TutorialError(f"{assignment}: the setup cell defines no {name}()")
            found.append(ast.get_source_segment(source, node))
    return "\n\n\n".join(found) + "\n"


def _comment(rst: str) -> str:
    return "\n".join(("# " + line).rstrip() for line in rst.rstrip("\n").splitlines())


def render(parts: list[Section] | None = None) -> str:
    """The sphinx-gallery script. Raises TutorialError if any COURSE_VOICE phrase is left in it."""
    parts = sections() if parts is None else parts
    header = HEADER.replace("{title}", TITLE).replace("{rule}", "=" * len(TITLE)).replace("{author}", author_rst())
    out = [header + _helpers() + "\n"]
    for number, section in enumerate(parts, 1):
        title = inline(f"{number}. {section.title}")
        out.append(f"\n{SEPARATOR}\n" + _comment(f"{title}\n{'-' * len(title)}") + "\n")
        previous = "text"
        for block in section.blocks:
            if block.kind == "text":
                sep = "#\n" if previous == "text" else f"\n{SEPARATOR}\n"
                out.append(sep + _comment(block.body) + "\n")
            else:
                sep = "" if previous == "text" else f"\n{SEPARATOR}\n"   # a new block, not one long one
                out.append(sep + "\n" + block.body + "\n")
            previous = block.kind
    out.append(f"\n{SEPARATOR}\n" + _comment(CONCLUSION) + "\n")
    script = "".join(out)
    found = course_voice(script)
    if found:
        raise TutorialError("course words left in the tutorial (add a REWRITES entry or leave the cell out): "
                            + "; ".join(found))
    return script


def write(out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / FILENAME
    path.write_text(render())
    return path

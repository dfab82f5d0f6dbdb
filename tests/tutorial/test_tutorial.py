"""The course as one tutorial in PyTorch's format (issue 31): `python -m autograder tutorial`.

(a) The tutorial is built from the cells of source/ tagged "tutorial": each of its six sections has
    text and code from them, the checks it adds follow tagged cells, a tagged cell's fix reaches
    the tutorial, and the Markdown of every tagged cell converts to reStructuredText that docutils
    reads without a warning (autograder/tutorial/to_rst.py, mistune's RSTRenderer with math and tables,
    tested here on each construct the notebooks use and on every markdown cell of source/).
(b) It is built as pytorch.org builds it: Sphinx with sphinx-gallery (which runs the script) and
    PyTorch's theme, warnings as errors. The HTML page holds every figure, no traceback, Sphinx's
    math markup, and a "Download Jupyter notebook" .ipynb that runs top to bottom.

The Sphinx build runs once per test run (`built_site`, shared with tests/instructor/test_browser.py).
"""

from __future__ import annotations

import copy
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import docutils.core
import docutils.utils
import nbformat
import pytest

from autograder.tutorial import make as tutorial
from autograder.tutorial import publish
from autograder.instructor.build import solution_notebook
from autograder.course import ASSIGNMENTS, ROOT
from autograder.tutorial.to_rst import inline, markdown_to_rst
from conftest import once_per_run, shared_dir

SECTIONS = list(tutorial.SECTIONS)


def built_site(tmp_path_factory) -> Path:
    """The tutorial's HTML page, built once per test run by `build_site` (Sphinx + sphinx-gallery)."""
    def make() -> Path:
        start = time.perf_counter()
        page = publish.build_site(shared_dir(tmp_path_factory) / "tutorial-site")
        print(f"Sphinx build of the tutorial: {time.perf_counter() - start:.1f} s")
        return page
    return once_per_run(tmp_path_factory, "tutorial_site", make)


# ---------------------------------------------------------------------------------------------
# (a) one source: the tagged cells of source/

def test_six_sections_each_with_text_and_code_from_tagged_cells():
    sections = tutorial.sections()
    assert [s.assignment for s in sections] == SECTIONS and len(sections) == 6
    for s in sections:
        from_cells = [b for b in s.blocks if b.cell]
        assert any(b.kind == "text" and b.body.strip() for b in from_cells), s.assignment
        assert any(b.kind == "code" and b.body.strip() for b in from_cells), s.assignment
    tagged = {c.id for a in SECTIONS for c in tutorial.tagged_cells(a)}
    shown = {b.cell for s in sections for b in s.blocks if b.cell}
    assert set(tutorial.LEFT_OUT) <= tagged     # no stale entry
    assert shown == tagged - set(tutorial.LEFT_OUT)     # every tagged cell not left out, and nothing else


def test_worked_code_is_the_reference_solutions():
    """A tagged answer cell shows its solution as solutions/ does (the solution markers removed)."""
    answers = 0
    blocks = {b.cell: b.body for s in tutorial.sections() for b in s.blocks if b.kind == "code"}
    for assignment in SECTIONS:
        solved = {c.id: c.source for c in solution_notebook(ASSIGNMENTS[assignment].source).cells}
        for cell in tutorial.tagged_cells(assignment):
            if cell.metadata.get("nbgrader", {}).get("solution") and cell.id not in tutorial.LEFT_OUT:
                answers += 1
                assert blocks[cell.id].startswith(solved[cell.id].strip("\n")), cell.id
                assert "### BEGIN SOLUTION" not in blocks[cell.id]
    assert answers >= 2


def test_every_check_follows_a_tagged_cell_and_uses_assert_close():
    tagged = {c.id for a in SECTIONS for c in tutorial.tagged_cells(a) if c.cell_type == "code"}
    assert set(tutorial.CHECKS) <= tagged
    for cell, check in tutorial.CHECKS.items():
        assert "check_close(" in check.code or "check_equal(" in check.code or "plt.show()" in check.code, cell
    script = tutorial.render()
    assert "torch.testing.assert_close(got, expected" in script


def _notebooks(change):
    """tutorial._notebook, with `change(assignment, nb)` applied to the notebooks it reads."""
    real = tutorial._notebook

    def read(assignment):
        nb = copy.deepcopy(real(assignment))
        change(assignment, nb)
        return nb
    return read


def test_a_fix_to_a_tagged_cell_reaches_the_tutorial(monkeypatch):
    def fix(assignment, nb):
        for cell in nb.cells:
            if cell.id == "6a9f5d42":           # 01: the formula of nn.Linear
                cell.source = cell.source.replace("Let us check this formula", "Now check this corrected formula")
            if cell.id == "7c7eb699":
                cell.source += "\nprint('fixed in the notebook')"
    monkeypatch.setattr(tutorial, "_notebook", _notebooks(fix))
    script = tutorial.render()
    assert "Now check this corrected formula" in script and "print('fixed in the notebook')" in script


def test_drift_fails_a_missing_tagged_cell_or_an_empty_section(monkeypatch):
    def untag(ids):
        def change(assignment, nb):
            for cell in nb.cells:
                if cell.id in ids or assignment in ids:
                    cell.metadata.get("tags", []).clear()
        return change
    monkeypatch.setattr(tutorial, "_notebook", _notebooks(untag({"7c7eb699"})))
    with pytest.raises(tutorial.TutorialError, match="7c7eb699"):
        tutorial.sections()
    monkeypatch.setattr(tutorial, "_notebook", _notebooks(untag({"04_computational_graph"})))
    with pytest.raises(tutorial.TutorialError, match="section 4"):
        tutorial.sections()


def test_the_script_follows_pytorch_tutorials_template(tmp_path):
    path = tutorial.write(tmp_path)
    assert path.name.endswith("_tutorial.py")
    script = path.read_text()
    compile(script, str(path), "exec")
    header = script.split('"""')[1]
    title = header.strip().splitlines()
    assert title[1] == "=" * len(title[0]) and "**Author:**" in header
    assert ".. grid:: 2" in header and "What you will learn" in header and "Prerequisites" in header
    for heading in ("Overview", "Conclusion", "Further Reading"):
        assert f"# {heading}\n# {'-' * len(heading)}\n" in script
    numbered = re.findall(r"^# (\d)\. .*\n# -+$", script, re.M)
    assert numbered == ["1", "2", "3", "4", "5", "6"]
    for needed in ("plt.show()", "def relu(", "grad_fn", "optimizer.step()", "train_mlp("):
        assert needed in script
    name, handle = tutorial.AUTHOR
    assert f"**Author:** `{name} <https://github.com/{handle}>`__" in header


# ---------------------------------------------------------------------------------------------
# Reads as a page of pytorch.org (issue 41)

def test_no_course_words_in_the_script(tmp_path):
    """The written script, text, code and comments, holds none of tutorial.COURSE_VOICE; the same list
    makes `render` fail, and it catches the course wording of the tagged cells (so a REWRITES entry or
    a LEFT_OUT cell is what keeps it out)."""
    script = tutorial.write(tmp_path).read_text()
    assert tutorial.course_voice(script) == []
    for phrase in ("the check after Exercise 1 has", "by your function", "your walk", "Your layer against PyTorch's",
                   "packs this into the setup cell", "(You do not need to read the helper.)", "Your graph_nodes did",
                   "the course pack's authors", "a stand-in for the graph", "node._sequence_nr()",
                   "hidden tests", "graded"):
        assert tutorial.course_voice(phrase), phrase
    original = [tutorial._source(c) for a in SECTIONS for c in tutorial.tagged_cells(a)]
    assert tutorial.course_voice("\n".join(original))      # the notebooks have them; the tutorial does not


def test_course_words_fail_the_build(monkeypatch):
    monkeypatch.setattr(tutorial, "REWRITES", [r for r in tutorial.REWRITES if "setup cell" not in r[0]])
    with pytest.raises(tutorial.TutorialError, match="course words"):
        tutorial.render()


def test_every_next_cell_reference_has_its_cell():
    """A text block that announces "the next cell" (or "below") is followed by a code block."""
    for section in tutorial.sections():
        blocks = section.blocks
        for i, block in enumerate(blocks):
            if block.kind == "text" and re.search(r"\b(the next cell|below)\b", block.body, re.I):
                assert i + 1 < len(blocks) and blocks[i + 1].kind == "code", (block.cell, block.body[:120])


def test_no_private_api_in_the_code():
    code = "\n".join(b.body for s in tutorial.sections() for b in s.blocks if b.kind == "code")
    assert not re.findall(r"\._[a-z]\w*\(", code)


def test_the_reviews_l_items_stay_fixed(tmp_path):
    """The content review of 2026-12-07 (L-T1..L-T5): no output that changes with the torch version (the
    table of ReLU spellings at z = 0 is left to notebook 02); no sentence on how Adam sizes its step; the
    head gradient shown, not only stated; the versions tested named, not "v2.3 or later"; the two
    tutorials this one continues linked from the Overview and Further Reading. And no text line made
    longer than the notebook's by a rewrite."""
    script = tutorial.write(tmp_path).read_text()
    assert "clamp(min=0)" not in script.split("def train_mlp")[0]          # L-T1: the spellings table
    assert not re.search(r"Adam\W.*\b(scales|divides)\b", script)          # L-T2
    assert "y.backward(∂L/∂y) fills the same x.grad as L.backward()" in script       # L-T3
    assert "tested with 2.13 and 2.14" in script and "2.3 or later" not in script    # L-T4
    overview = script.split("# Overview")[1].split("# Setup")[0]
    further = script.split("# Further Reading")[1]
    for page in ("basics/autogradqs_tutorial.html", "basics/buildmodel_tutorial.html"):      # L-T5
        assert page in overview and page in further, page
    assert max(len(line) for line in script.splitlines() if "Sections 5 and 6" in line) <= 110


def test_beginner_length(tmp_path):
    """At most tutorial.MAX_BYTES (35 KB; pytorch/tutorials' autogradqs_tutorial.py is 11 KB, the seed
    was 98 KB), and one verification per claim: no `assert` or printed allclose beside a check_close."""
    script = tutorial.write(tmp_path).read_text()
    assert len(script.encode()) <= tutorial.MAX_BYTES, len(script.encode())
    for cell in tutorial.CHECKS:
        block = next(b.body for s in tutorial.sections() for b in s.blocks if b.cell == cell)
        assert not re.search(r"^assert |print\(.*allclose", block, re.M), cell


RUN_COUNTING_FIGURES = """
import runpy, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
figures = []
def show(*args, **kwargs):
    figures.append(len(plt.get_fignums()))
    plt.close("all")
plt.show = show
runpy.run_path(sys.argv[1], run_name="__main__")
print("FIGURES", sum(figures))
"""


@pytest.fixture(scope="module")
def plain_run(tmp_path_factory):
    """The script run as a plain Python script on the CPU: (seconds, stdout, figures shown)."""
    folder = tmp_path_factory.mktemp("plain")
    path = tutorial.write(folder)
    start = time.perf_counter()
    run = subprocess.run([sys.executable, "-c", RUN_COUNTING_FIGURES, str(path)], cwd=folder, capture_output=True,
                         text=True, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""}, timeout=180)
    seconds = time.perf_counter() - start
    assert run.returncode == 0, run.stderr[-3000:]
    figures = int(re.search(r"^FIGURES (\d+)$", run.stdout, re.M).group(1))
    return seconds, run.stdout, figures


def test_the_script_runs_as_a_plain_script_on_cpu_in_under_a_minute(plain_run):
    seconds, stdout, figures = plain_run
    assert seconds < 60, seconds
    assert stdout.count("ok  ") >= len(tutorial.CHECKS)
    assert figures >= 3     # a linear and a ReLU network, parameters before and after a step, loss curves


# ---------------------------------------------------------------------------------------------
# Ready to open as a pull request to pytorch/tutorials (issue 41)

def test_pull_request_files(tmp_path):
    """`python -m autograder tutorial --pr DIR` writes what the pull request holds, at the paths it has in
    pytorch/tutorials: the script in beginner_source/, a square thumbnail in _static/img/thumbnails/cropped/
    (named after the script, as visualizing_gradients_tutorial.png is), and the card and toctree entry to
    paste, in a text file; nothing else."""
    from matplotlib.image import imread
    from autograder.cli import main
    assert main(["tutorial", "--pr", str(tmp_path)]) == 0
    stem = Path(tutorial.FILENAME).stem
    written = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert written == sorted([f"beginner_source/{tutorial.FILENAME}", f"_static/img/thumbnails/cropped/{stem}.png",
                              publish.PR_ENTRIES])
    script = (tmp_path / "beginner_source" / tutorial.FILENAME).read_text()
    assert script == tutorial.render()

    entries = (tmp_path / publish.PR_ENTRIES).read_text()
    card = re.search(r"^\.\. customcarditem::\n((?:   :\w+: .+\n)+)", entries, re.M)
    assert card, entries
    fields = dict(re.findall(r"^   :(\w+): (.+)$", card.group(1), re.M))
    assert list(fields) == ["header", "card_description", "image", "link", "tags"]     # CONTRIBUTING.md's order
    assert fields["header"] == script.split('"""')[1].strip().splitlines()[0] == tutorial.TITLE
    assert fields["image"] == f"_static/img/thumbnails/cropped/{stem}.png"
    assert fields["link"] == f"beginner/{stem}.html"
    assert fields["tags"] == "Getting-Started"          # an existing tag, no spaces
    assert re.search(rf"^   beginner/{stem}$", entries, re.M)     # the toctree entry, indented as in a toctree
    assert "intro.rst" in entries and "index.rst" in entries     # where each goes

    image = imread(tmp_path / fields["image"])
    height, width = image.shape[:2]
    assert height == width >= 400, image.shape          # square, as CONTRIBUTING.md asks
    colours = {tuple(pixel) for pixel in image.reshape(-1, image.shape[2])[::37].round(2).tolist()}
    assert len(colours) > 20, len(colours)              # a drawing, not an empty square


# ---------------------------------------------------------------------------------------------
# Markdown to reStructuredText

def _rst_problems(rst: str) -> list[str]:
    """docutils' warnings and errors for `rst` (the math role and directive are docutils' own)."""
    messages = []
    doctree = docutils.core.publish_doctree(rst, settings_overrides={
        "report_level": 5, "halt_level": 5, "warning_stream": False})
    for node in doctree.findall(docutils.nodes.system_message):
        if node["level"] >= 2:
            messages.append(node.astext())
    return messages


def test_markdown_constructs():
    md = markdown_to_rst
    assert md("## 2. ReLU\n\ntext") == "2. ReLU\n-------\n\ntext\n"
    assert md("a **bold** and *it* and `code`s") == r"a **bold** and *it* and ``code``\ s" + "\n"
    assert md("inline $x_1 + y$ and $$\\frac12$$") .startswith(r"inline :math:`x_1 + y` and")
    assert md("$$\ny = x W^\\top\n$$") == ".. math::\n\n   y = x W^\\top\n"
    assert md("text\n$$ a = b $$\nmore") == "text\n\n.. math::\n\n   a = b\n\nmore\n"
    assert md("* one\n  more\n* two") == "* one\n  more\n* two\n"
    assert md("1. first\n   line\n2. second") == "1. first\n   line\n2. second\n"
    assert md("* top\n  * inner") == "* top\n\n  * inner\n"
    assert md("see [the docs](https://pytorch.org)") == "see `the docs <https://pytorch.org>`__\n"
    assert md("a_b * c | d") == r"a\_b \* c \| d" + "\n"
    assert md("```\nx = 1\n```") == "::\n\n   x = 1\n"
    assert md("```python\nx = 1\n```") == ".. code:: python\n\n   x = 1\n"
    assert md("```python\ndef f():\n    pass\n\n\ndef g():\n    pass\n```").count("\n\n\n") == 1    # code as written
    assert md("**Forgetting `zero_grad()` is momentum with $\\mu = 1$.**") == \
        r"**Forgetting** ``zero_grad()`` **is momentum with** :math:`\mu = 1`\ **.**" + "\n"
    table = md("| a | b |\n|---|---|\n| `x\\|y` | $\\|z\\|$ |\n|  | *c* |")     # GFM: a pipe in a cell is \|
    assert table == (".. list-table::\n   :header-rows: 1\n\n   * - a\n     - b\n   * - ``x|y``\n     - :math:`|z|`\n"
                     "   * -\n     - *c*\n")
    # a span may cross a line break (and stays on its lines); math too, as Jupyter reads it
    assert md("on **leaves that\nrequire grad**, $a +\nb$") == "on **leaves that\nrequire grad**, :math:`a +\nb`\n"
    assert md("* a **b\n  c** d") == "* a **b\n  c** d\n"
    # italics holding code: the code is set apart, the rest stays italic
    assert md("(*`a` for leaves.*)") == r"(``a`` *for leaves.*)" + "\n"
    assert md("[**the** `docs`](https://pytorch.org)") == "`the docs <https://pytorch.org>`__\n"
    assert md("1. first\n\n   more\n2. second").startswith("1. first\n\n   more\n")
    assert inline("4. What `grad_fn` records") == "4. What ``grad_fn`` records"
    # rewrite: plain text only, whole phrases (mistune splits text at characters such as _ and *)
    rewrite = lambda text: text.replace("notebook 3", "section 3")
    assert md("notebook 3 (`notebook 3`), $notebook 3$", rewrite=rewrite) == \
        "section 3 (``notebook 3``), :math:`notebook 3`\n"
    assert md("in_notebook 3", rewrite=rewrite) == r"in\_section 3" + "\n"
    for text in ("a **bold** and *it* and `code`s", "$f'(x)$s and `a``", "**Forgetting `zero_grad()` x $y$.**",
                 "| a | b |\n|---|---|\n| `x\\|y` | $|z|$ |", "* top\n  * inner\n* next", "(`x`)'s $a$-b",
                 "(*`a` for leaves.*)", "x**y**z `a`_b", "* a **b\n  c** d", "1. a\n\n   * b\n   * c\n\n2. d",
                 "```python\ndef f():\n    pass\n\n\ndef g():\n    pass\n```"):
        assert _rst_problems(md(text)) == [], text


def test_every_markdown_cell_of_source_converts():
    """Not only the tagged cells: every markdown cell of source/01-07 is reStructuredText docutils reads
    without a warning, with no Markdown math left outside math and literals."""
    cells = [c for path in sorted((ROOT / "source").glob("0*/*.ipynb")) for c in nbformat.read(path, 4).cells
             if c.cell_type == "markdown"]
    assert len(cells) > 100
    for cell in cells:
        rst = markdown_to_rst(cell.source)
        assert _rst_problems("Section\n=======\n\nPart\n-------\n\n" + rst) == [], cell.id
        assert "$" not in re.sub(r":math:`[^`]*`|``[^`]*``|\n   .*", "", rst), cell.id


def test_every_tagged_markdown_cell_is_valid_restructuredtext():
    for assignment in SECTIONS:
        nb = tutorial._notebook(assignment)
        numbers = tutorial._numbers(nb, assignment, SECTIONS.index(assignment) + 1)
        for cell in tutorial.tagged_cells(assignment):
            if cell.cell_type == "markdown" and cell.id not in tutorial.LEFT_OUT:
                rst = tutorial.cell_rst(tutorial._rewritten(cell.source), numbers)
                problems = _rst_problems("Section\n=======\n\nPart\n-------\n\n" + rst)
                assert problems == [], (cell.id, problems)
                assert "$" not in re.sub(r":math:`[^`]*`|``[^`]*``|\n   .*", "", rst), cell.id
                assert not re.search(r"^Exercise", rst, re.M) and "What you may use" not in rst, cell.id


# ---------------------------------------------------------------------------------------------
# (b) built as pytorch.org builds it

@pytest.fixture(scope="module")
def site(tmp_path_factory):
    page = built_site(tmp_path_factory)
    html = page.read_text()
    return page, html


def test_html_page_with_every_figure(site, plain_run):
    from bs4 import BeautifulSoup
    page, html = site
    soup = BeautifulSoup(html, "html.parser")
    images = [img["src"] for img in soup.find_all("img") if "sphx_glr_" in img["src"]]
    assert len(images) == plain_run[2]          # one image per figure the script draws
    for src in images:
        assert (page.parent / src).is_file(), src
    if publish.theme() == "pytorch_sphinx_theme2":     # PyTorch's theme, as on pytorch.org
        assert "pytorch-article" in html


def test_no_traceback_and_every_check_printed(site):
    from bs4 import BeautifulSoup
    _, html = site
    soup = BeautifulSoup(html, "html.parser")
    outputs = [o.get_text() for o in soup.select(".sphx-glr-script-out")]
    assert outputs, "no output block"
    assert not any("Traceback" in o for o in outputs)
    assert "Traceback" not in html
    assert sum(o.count("ok  ") for o in outputs) >= len(tutorial.CHECKS)
    # what pytorch/tutorials' .jenkins/validate_tutorials_built.py checks: the code did run
    timing = soup.select_one("p.sphx-glr-timing").get_text()
    assert "0 minutes  0.000 seconds" not in timing, timing


def test_math_is_rendered_by_sphinx(site):
    _, html = site
    assert html.count('class="math notranslate nohighlight"') > 100
    assert "mathjax" in html.lower()
    assert "$$" not in html.replace("\\$", "")


def test_the_downloaded_notebook_runs(site, plain_run):
    from bs4 import BeautifulSoup
    from nbclient import NotebookClient
    page, html = site
    soup = BeautifulSoup(html, "html.parser")
    links = [a for a in soup.find_all("a") if "Download Jupyter notebook" in a.get_text()]
    assert links, "no 'Download Jupyter notebook' link"
    notebook = (page.parent / links[0]["href"]).resolve()
    assert notebook.suffix == ".ipynb" and notebook.is_file()
    nb = nbformat.read(notebook, as_version=4)
    NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(notebook.parent)}}
                   ).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert sum("image/png" in o.get("data", {}) for o in outputs) == plain_run[2]

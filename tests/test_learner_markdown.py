"""No learner markdown runs anywhere (issue 29): a learner's markdown cell is judged after it is
rendered, by an allowlist of tags, attributes and URL schemes, in what autograde stores (the
formgrader's view) and in the feedback."""

from __future__ import annotations

import re

import nbformat
import pytest
from nbconvert import HTMLExporter

from autograder.nbgrader.feedback import LearnerHTML

PAYLOADS = [
    "[click](javascript:alert(document.cookie))",
    "[click](JaVaScRiPt:alert(1))",
    "[click](jav&#x61;script:alert(1))",
    "[click](&#106;&#97;&#118;&#97;&#115;&#99;&#114;&#105;&#112;&#116;:alert(1))",
    "[click][ref]\n\n[ref]: javascript:alert(1)",
    "<javascript:alert(1)>",
    "[click](vbscript:msgbox(1))",
    "[click](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    "![x](javascript:alert(1))",
    '<a href="javascript:alert(1)">raw</a>',
    '<img src=x onerror="alert(1)">',
    "<svg><script>alert(1)</script></svg>",
    '<math><mtext><a href="javascript:alert(1)">m</a></mtext></math>',
    "<script>alert(1)</script>",
    '<iframe src="javascript:alert(1)"></iframe>',
    "[split](java\tscript:alert(1))",
]
SAFE = ["Plain text with $a < b$ and $z > 0$.", "[PyTorch](https://pytorch.org) and [a file](notes.md)",
        "**bold**, `code <T>`, and a list:\n\n* one\n* two"]
ACTIVE = re.compile(r"<script|\bon\w+\s*=|href\s*=\s*[\"']?\s*(javascript|vbscript|data)|"
                    r"src\s*=\s*[\"']?\s*(javascript|data:text)|<iframe|<svg|<math", re.I)


def _clean(sources: list[str]) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(s) for s in sources])
    nb, _ = LearnerHTML().preprocess(nb, {})
    return nb


@pytest.mark.parametrize("payload", PAYLOADS)
def test_no_payload_survives_in_the_stored_notebook_or_its_html(payload):
    (cell,) = _clean([payload]).cells
    html, _ = HTMLExporter().from_notebook_node(_clean([payload]))
    assert not ACTIVE.search(cell.source), cell.source
    body = html.split("<body", 1)[1]
    assert not ACTIVE.search(re.sub(r"<script[^>]*(mathjax|require|jupyter)[^>]*>.*?</script>", "",
                                    body, flags=re.S | re.I).split("</main>")[0]), payload


def test_safe_markdown_stays_exactly_as_written():
    nb = _clean(SAFE)
    assert [c.source for c in nb.cells] == SAFE


@pytest.mark.parametrize("payload", PAYLOADS)
def test_no_payload_survives_in_a_markdown_or_html_output(payload):
    """A cell's rich output (display(Markdown(...)), HTML) is judged as a markdown cell is: the
    Chromium test clicked five live links in markdown outputs before (issue 29)."""
    cell = nbformat.v4.new_code_cell("display(...)")
    cell.outputs = [nbformat.v4.new_output("display_data", data={"text/markdown": payload}),
                    nbformat.v4.new_output("display_data", data={"text/html": payload})]
    nb, _ = LearnerHTML().preprocess(nbformat.v4.new_notebook(cells=[cell]), {})
    html, _ = HTMLExporter().from_notebook_node(nb)
    main = html.split("<main>", 1)[1].split("</main>")[0]
    tags = " ".join(re.findall(r"<[^>]*>", main))  # escaped text (&lt;iframe ...&gt;) is inert
    assert not ACTIVE.search(tags), payload

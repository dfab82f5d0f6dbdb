"""No learner markdown runs anywhere (issue 29), and nothing a learner wrote makes a reader's
browser send a request (issue 37): a learner's markdown cell is judged after it is rendered, by an
allowlist of tags, attributes and URLs (images only from data in the notebook, links only to a web
or mail address, in a new tab), in what autograde stores (the formgrader's view) and in the
feedback; what is removed is shown as text."""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser

import nbformat
import pytest
from nbconvert import HTMLExporter

from autograder.nbgrader.sanitize import LearnerHTML

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
BEACON = "beacon.invalid"
"""The outside host of the payloads (the browser test watches for any request to it)."""
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
REQUESTS = [
    "![x](/logout)",
    '<img src="/api/contents?x">',
    f"![b](http://{BEACON}/beacon.png)",
    f"![s](//{BEACON}/scheme-relative.png)",
    f"[s](//{BEACON}/scheme-relative-link)",
    "[a file](notes.md) and [out](/logout)",
    "[half](http:/logout) and [back](http:\\\\beacon.invalid/x)",
    f'<img src="data:image/png;base64,{PNG}" srcset="/logout 2x, http://{BEACON}/srcset.png 3x">',
    f'<div style="background: url(/logout)">css</div><span style="background-image:url(//{BEACON}/c.png)">s</span>',
    f"<style>@import url(http://{BEACON}/i.css); body {{ background: url(/logout) }}</style>",
    f'<picture><source srcset="/logout"><source srcset="http://{BEACON}/p.png"><img src="/api/contents?p"></picture>',
    f'<video poster="/logout" src="http://{BEACON}/v.mp4"></video><audio src="/logout"></audio>',
    f'<link rel="prefetch" href="/logout"><link rel="stylesheet" href="http://{BEACON}/l.css">',
    f'<object data="/logout"></object><embed src="http://{BEACON}/e.swf">',
    f'<svg><image href="/logout"/><image xlink:href="http://{BEACON}/svg.png"/></svg>',
    "![ref][r]\n\n[r]: /logout",
    f'<a href="https://example.org" ping="http://{BEACON}/ping">pinged</a>',
    f'<table background="/logout"><tr><td background="http://{BEACON}/td.png">t</td></tr></table>',
    f'<input type="image" src="/logout"><iframe src="/logout"></iframe><image src="/logout">',
    f'<a href="/logout"><img src="http://{BEACON}/in-link.png" alt="inner"></a>',
    '<img src="&#x2f;logout"><img src=" /logout"><img src="/lo\tgout">',
    "<textarea>\n\n![t](/logout)\n</textarea>",
    "<style>\n\n![s](/logout) http://beacon.invalid/style\n</style>",
    '<pre>a\n\n![p](/logout)</pre><p title="a\n\n![t](/logout)">t</p>',
]
"""What would make the reader's browser fetch something: the formgrader serves the autograded
notebook from the instructor's Jupyter server, so a path is a logged-in GET (`/logout` logs the
grader out) and an outside address tells that host when and from where it is read."""
CORPUS = PAYLOADS + REQUESTS
SAFE = ["Plain text with $a < b$ and $z > 0$.", "# A heading\n\nand text",
        f"![inline](data:image/png;base64,{PNG})",
        "**bold**, `code <T>`, and a list:\n\n* one\n* two"]
ACTIVE = re.compile(r"<script|\bon\w+\s*=|href\s*=\s*[\"']?\s*(javascript|vbscript|data)|"
                    r"src\s*=\s*[\"']?\s*(javascript|data:text)|<iframe|<svg|<math", re.I)


class _URLs(HTMLParser):
    """Every URL an element of a page carries, and the links with their target and rel."""

    def __init__(self):
        super().__init__()
        self.urls: list[tuple[str, str, str]] = []
        self.links: list[dict] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        for name, value in attrs:
            if name in ("src", "href", "srcset", "poster", "data", "action", "formaction",
                        "background", "xlink:href", "ping", "style") and value is not None:
                self.urls.append((tag, name, value))
        if tag == "a":
            self.links.append(dict(attrs))


def requests_in(html: str) -> list[tuple[str, str, str]]:
    """What in `html` would make a browser fetch: any URL attribute but an image from data and a
    link to a web or mail address (with no style at all, and no element that loads by itself)."""
    found = _URLs()
    found.feed(html)
    bad = [(t, n, v) for t, n, v in found.urls
           if not (n == "src" and t == "img" and re.match(r"data:image/(png|jpeg|gif|webp)[;,]", v))
           and not (n == "href" and t == "a" and re.match(r"(https?://[^/\\]|mailto:)", v))]
    bad += [(t, "", "") for t in found.tags if t in ("link", "object", "embed", "iframe", "video",
                                                     "audio", "source", "picture", "image", "input",
                                                     "style", "svg", "base", "meta")]
    return bad


def _main(html: str) -> str:
    """The notebook's part of nbconvert's page (the template's own head and scripts left out)."""
    return html.split("<main>", 1)[1].split("</main>")[0]


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


@pytest.mark.parametrize("payload", REQUESTS)
def test_no_payload_makes_a_request_from_the_stored_notebook_or_its_html(payload):
    """Sanitized markdown carries no URL a browser would fetch, and neither does nbconvert's page
    of it (the formgrader's and the feedback's renderer)."""
    nb = _clean([payload])
    (cell,) = nb.cells
    assert requests_in(cell.source) == [], cell.source
    html, _ = HTMLExporter().from_notebook_node(nb)
    assert requests_in(_main(html)) == [], payload


@pytest.mark.parametrize("payload, shown", [
    ("![x](/logout)", "x (image removed: /logout)"),
    ('<img src="/api/contents?x">', "(image removed: /api/contents?x)"),
    (f"![b](http://{BEACON}/beacon.png)", f"b (image removed: http://{BEACON}/beacon.png)"),
    (f"![s](//{BEACON}/s.png)", f"s (image removed: //{BEACON}/s.png)"),
    (f"[s](//{BEACON}/s)", f"s (link removed: //{BEACON}/s)"),
    ("[a file](notes.md)", "a file (link removed: notes.md)"),
    ("![ref][r]\n\n[r]: /logout", "ref (image removed: /logout)"),
    ("[click](javascript:alert(1))", "click (link removed: javascript:alert(1))"),
    ('<a href="javascript:alert(&quot;<b>x</b>&quot;)">raw</a>',
     'raw (link removed: javascript:alert("<b>x</b>"))'),
])
def test_a_removed_link_or_image_is_shown_as_text(payload, shown):
    """The grader sees why a link does nothing (review L-6): "(link removed: URL)" as escaped
    text, not a blue link; a removed image likewise, after its alternative text."""
    (cell,) = _clean([payload]).cells
    html, _ = HTMLExporter().from_notebook_node(_clean([payload]))
    found = _URLs()
    found.feed(cell.source)
    assert found.links == [] and "<b>" not in cell.source, cell.source
    assert _html_text(_main(html)).strip() == shown


def _html_text(html: str) -> str:
    import html as stdlib_html
    return stdlib_html.unescape(re.sub(r"<[^>]*>", "", html))


@pytest.mark.parametrize("source", ["[PyTorch](https://pytorch.org)", "<https://pytorch.org>",
                                    '<a href="https://pytorch.org" target="_self" rel="opener">x</a>',
                                    "[mail](mailto:someone@example.org)"])
def test_a_kept_link_opens_a_new_tab_with_no_referrer(source):
    (cell,) = _clean([source]).cells
    found = _URLs()
    found.feed(cell.source)
    assert len(found.links) == 1, cell.source
    link = found.links[0]
    assert link["target"] == "_blank" and link["rel"] == "noopener noreferrer", link
    assert re.match(r"(https://pytorch\.org|mailto:)", link["href"]), link


def test_an_attachment_image_stays_and_a_missing_or_svg_one_is_removed():
    """`![x](attachment:NAME)` of a PNG stays as written (nbconvert and JupyterLab show it from
    the notebook); a missing attachment (nbconvert raised InvalidNotebook, so autograde stopped)
    or an SVG one is removed as text; in HTML it becomes a data URL, which every reader shows."""
    cells = [nbformat.v4.new_markdown_cell(s) for s in
             ["![ok](attachment:a.png)", "![gone](attachment:missing.png)",
              "![vector](attachment:v.svg)", '<img src="attachment:a.png" onerror="x()">']]
    for cell in cells:
        cell.attachments = {"a.png": {"image/png": PNG}, "v.svg": {"image/svg+xml": "PHN2Zy8+"}}
    nb, _ = LearnerHTML().preprocess(nbformat.v4.new_notebook(cells=cells), {})
    assert nb.cells[0].source == "![ok](attachment:a.png)"
    assert "gone (image removed: attachment:missing.png)" in nb.cells[1].source
    assert "vector (image removed: attachment:v.svg)" in nb.cells[2].source
    assert f'src="data:image/png;base64,{PNG}"' in nb.cells[3].source
    html, _ = HTMLExporter().from_notebook_node(nb)
    assert requests_in(_main(html)) == []


def test_sanitizing_twice_changes_nothing_more():
    """autograde sanitizes what it stores, generate_feedback sanitizes that again."""
    once = _clean(CORPUS + SAFE)
    twice, _ = LearnerHTML().preprocess(nbformat.from_dict(once), {})
    assert [c.source for c in twice.cells] == [c.source for c in once.cells]


@pytest.mark.parametrize("payload", CORPUS)
def test_a_sanitized_cell_reads_as_html_not_as_markdown_again(payload):
    """The stored cell is rendered as markdown again by every reader: it must give exactly the
    sanitized HTML (no autolinked URL of a removed link, no image from text after a blank line)."""
    from autograder.nbgrader.sanitize import _render_markdown, _tokens
    (cell,) = _clean([payload]).cells
    if cell.source != payload:
        assert _tokens(_render_markdown(cell.source).strip()) == _tokens(cell.source.strip()), cell.source


def test_output_metadata_cannot_add_an_attribute_or_an_image_source():
    """nbconvert's templates write an image output's `width`/`height` metadata unquoted and its
    `filenames` as the image's src; a learner's code sets both (`display(..., metadata=...)`)."""
    cell = nbformat.v4.new_code_cell("display(...)")
    cell.outputs = [
        nbformat.v4.new_output("display_data", data={"image/png": "AAAA"}, metadata={
            "image/png": {"width": "1 onerror=alert(1)", "height": 40, "alt": 'a "b"'},
            "filenames": {"image/png": "/logout"}}),
        nbformat.v4.new_output("display_data", data={"image/jpeg": PNG}, metadata={
            "height": "2 onload=alert(2)", "filenames": {"image/jpeg": f"http://{BEACON}/f.jpg"}}),
        nbformat.v4.new_output("display_data", data={"text/html": "<b>iso</b>"},
                               metadata={"text/html": {"isolated": True}}),
    ]
    nb, _ = LearnerHTML().preprocess(nbformat.v4.new_notebook(cells=[cell]), {})
    for template in ("classic", "lab"):  # the formgrader's and feedback's, and nbconvert's default
        html, _ = HTMLExporter(template_name=template).from_notebook_node(nb)
        main = html.split("<body", 1)[1]
        assert "onerror" not in main and "onload" not in main, template
        assert requests_in(re.sub(r"<script.*?</script>", "", main, flags=re.S)) == [], template
        assert 'height="40"' in main and "<iframe" not in main, template


def test_a_grader_comment_quoting_a_learners_line_is_sanitized():
    """generate_feedback renders the grader's comment as markdown (nbgrader's feedback template);
    the autograder's review flag quotes a learner's line in backticks, which a backtick in the
    line closes."""
    cell = nbformat.v4.new_code_cell("x", metadata={"nbgrader": {
        "solution": True, "grade_id": "matmul",
        "comment": "cell matmul, line 2: `gc.collect()  # ` ![x](/logout) <img src=x onerror=alert(1)> ``: gc"}})
    nb, _ = LearnerHTML().preprocess(nbformat.v4.new_notebook(cells=[cell]), {})
    comment = nb.cells[0].metadata.nbgrader.comment
    assert requests_in(comment) == [] and "onerror" not in comment, comment
    assert "(image removed: /logout)" in comment


@pytest.mark.parametrize("payload", PAYLOADS)
def test_no_payload_survives_in_a_markdown_or_html_output(payload):
    """A cell's rich output (display(Markdown(...)), HTML) is judged as a markdown cell is: the
    Chromium test clicked five live links in markdown outputs before (issue 29)."""
    cell = nbformat.v4.new_code_cell("display(...)")
    cell.outputs = [nbformat.v4.new_output("display_data", data={"text/markdown": payload}),
                    nbformat.v4.new_output("display_data", data={"text/html": payload})]
    nb, _ = LearnerHTML().preprocess(nbformat.v4.new_notebook(cells=[cell]), {})
    html, _ = HTMLExporter().from_notebook_node(nb)
    main = _main(html)
    tags = " ".join(re.findall(r"<[^>]*>", main))  # escaped text (&lt;iframe ...&gt;) is inert
    assert not ACTIVE.search(tags), payload


@pytest.mark.parametrize("payload", REQUESTS)
def test_no_payload_makes_a_request_from_a_markdown_or_html_output(payload):
    cell = nbformat.v4.new_code_cell("display(...)")
    cell.outputs = [nbformat.v4.new_output("display_data", data={"text/markdown": payload}),
                    nbformat.v4.new_output("display_data", data={"text/html": payload})]
    nb, _ = LearnerHTML().preprocess(nbformat.v4.new_notebook(cells=[cell]), {})
    html, _ = HTMLExporter().from_notebook_node(nb)
    assert requests_in(_main(html)) == [], payload


TEX_REACH = [r"$\style{cursor:url(http://beacon.invalid/s),auto;font-size:500px}{X}$",
             r"$$\href{javascript:alert(1)}{x}$$", r"$\class{jp-Dialog}{x} + \cssId{main}{y}$",
             r"$\require{action}\toggle{a}{b}\endtoggle$", r"$\bbox[background:url(/logout)]{x}$",
             r"$\def\s{\st yle}\unicode[Evil]{x41}$",
             r"<div>$&#92;style{cursor:url(http://beacon.invalid/md)}{X} + &#x5C;class{a}{y}$</div>",
             r"<b>note</b> $&bsol;href{http://beacon.invalid/h}{x}$ and $&#0092style{color:red}{x}$"]
"""Math whose TeX asks the page's MathJax for a style (a URL fetched on hover, text laid over the
page), a class or an id of the page's own, a link, an extension or a font: what a learner's math
never needs."""
TEX_COMMAND = re.compile(r"(\\|&#0*92;?|&#x0*5c;?|&bsol;)(style|class|cssId|href|require|unicode|bbox)"
                         r"(?![A-Za-z])", re.I)


@pytest.mark.parametrize("math", TEX_REACH)
def test_a_learners_math_asks_mathjax_for_no_style_link_or_extension(math):
    """In a markdown cell and in a code cell's LaTeX, markdown and HTML outputs alike: the
    command loses its backslash's meaning (`\\ style`, a space then the letters), the rest of the
    math stays as written."""
    nb = _clean([math])
    code = nbformat.v4.new_code_cell("x", outputs=[nbformat.v4.new_output(
        "display_data", data={"text/latex": math, "text/markdown": math, "text/html": math})])
    nb.cells.append(code)
    nb, _ = LearnerHTML().preprocess(nb, {})
    data = nb.cells[1].outputs[0]["data"]
    for text in (nb.cells[0].source, *data.values()):
        assert not TEX_COMMAND.search(text), text
    for text in (nb.cells[0].source, *data.values()):  # as the browser decodes it
        assert not TEX_COMMAND.search(html.unescape(text)), text
    if "&" not in math:
        assert math in nb.cells[0].source.replace("\\ ", "\\")  # as written, or in sanitized HTML


def test_math_that_asks_for_nothing_stays_as_written():
    math = r"$\frac{\partial L}{\partial W} = \delta^\top x$, $\mathbf{h} = \operatorname{relu}(z)$"
    assert _clean([math]).cells[0].source == math

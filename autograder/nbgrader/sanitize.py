"""What a learner made, made safe to show: nothing in it makes the reader's browser run a script
or send a request.

`LearnerHTML` (in autograde, so the notebook the formgrader shows is clean, and again in
`generate_feedback`) judges learner markdown after rendering it, against an allowlist of tags,
attributes and URLs (`learner_html`: links to web or mail addresses in a new tab, images from data
in the notebook), keeps of each output only its type's fields and an image's size and text, and
takes from learner math the TeX commands that ask MathJax for a style, a link or an extension
(`tame_tex`). The class report's page follows the same rule (`web_link`, `embedded_image`).
"""

from __future__ import annotations

import html as _html
import math
import re
from pathlib import Path
from urllib.parse import unquote

import bleach
import nbformat
from bleach import html5lib_shim
from bleach.sanitizer import BleachSanitizerFilter
from nbconvert.preprocessors.sanitize import SanitizeHTML
from traitlets import Bool

from autograder.nbgrader.cells import nbgrader_metadata



SAFE_TAGS = sorted(set(bleach.ALLOWED_TAGS) | {
    "p", "br", "hr", "div", "span", "pre", "h1", "h2", "h3", "h4", "h5", "h6", "sub", "sup",
    "table", "thead", "tbody", "tr", "th", "td", "img", "details", "summary", "dl", "dt", "dd"})
SAFE_ATTRIBUTES = {**bleach.ALLOWED_ATTRIBUTES, "a": ["href", "title", "target", "rel"],
                   "img": ["src", "alt", "width", "height"],
                   "th": ["colspan", "rowspan", "align"], "td": ["colspan", "rowspan", "align"]}
LINK_SCHEMES = ("http", "https", "mailto")
"""What a learner's link may point to: a web address with its host, or a mail address; never a
path of the server that serves the page (relative, `/path`, `//host`), never a script."""
LINK_REL = "noopener noreferrer"
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
"""What a learner's image may be: data in the page (a `data:` URL or a notebook attachment) of one
of these types; an image from anywhere else is a request the reader's browser would send."""
_WEB_OR_MAIL = re.compile(r"(https?://[^/\\\s]|mailto:)", re.I)
_DATA_IMAGE = re.compile(r"data:image/(png|jpeg|gif|webp)[;,]", re.I)
_BASE64 = re.compile(r"[A-Za-z0-9+/=\s]+")
_SCRIPT_SCHEME = re.compile(r"(javascript|vbscript|livescript|data:text/html|data:image/svg)")
_NO_ALT = "an image from the notebook"
_SHOWN = 200
"""Characters of a removed URL shown in its place."""


def _url(value: str) -> str:
    """A URL attribute as the browser reads it: entities decoded, tabs and newlines removed,
    leading and trailing spaces and control characters stripped (WHATWG URL parsing)."""
    return re.sub(r"[\t\n\r]", "", _html.unescape(value)).strip("".join(map(chr, range(0x21))))


def web_link(href: str) -> str | None:
    """`href` as the browser will read it when it is a learner's link that may stay (http(s) with
    a host, or mailto), else None. Judged again after one more decoding of entities, as the
    serializer may leave an entity in it."""
    url = _url(href)
    return url if _WEB_OR_MAIL.match(url) and _WEB_OR_MAIL.match(_url(url)) else None


def embedded_image(src: str, attachments: dict | None, embed: bool = True) -> str | None:
    """The image source that may stay: a `data:image/(png|jpeg|gif|webp)` URL, or a notebook
    attachment of one of those types (as a data URL when `embed`, which nbconvert's pages need,
    else as written); None for anything else (which the browser would fetch)."""
    url = _url(src)
    if _DATA_IMAGE.match(url):
        return url
    if url.lower().startswith("attachment:"):
        name = url[len("attachment:"):]
        bundle = (attachments or {}).get(name) or (attachments or {}).get(unquote(name))
        for kind in IMAGE_TYPES:
            data = bundle.get(kind) if isinstance(bundle, dict) else None
            data = "".join(data) if isinstance(data, list) else data
            if isinstance(data, str) and _BASE64.fullmatch(data):
                data = re.sub(r"\s", "", data)
                return f"data:{kind};base64,{data}" if embed else url
    return None


def _shown(url: str) -> str:
    return url if len(url) <= _SHOWN else url[:_SHOWN] + "…"


class _LearnerURLs(html5lib_shim.Filter):
    """Before bleach's allowlist, on the parsed HTML: a link stays only to a web or mail address
    (a new tab, no referrer, no opener), else it becomes its text and "(link removed: URL)"; an
    image stays only from data in the page, else it becomes its alternative text and "(image
    removed: URL)"; every image gets alternative text."""

    def __init__(self, source, attachments: dict | None, embed: bool):
        super().__init__(source)
        self.attachments, self.embed = attachments, embed

    def __iter__(self):
        links: list[str | None] = []   # per open <a>: None (kept), or the text put at its end
        for token in super().__iter__():
            kind, name = token["type"], token.get("name")
            attrs = token.get("data") if kind in ("StartTag", "EmptyTag") else None
            if name == "img" and attrs is not None:
                src = attrs.get((None, "src"))
                kept = None if src is None else embedded_image(src, self.attachments, self.embed)
                if src is not None and kept is None:
                    alt = attrs.get((None, "alt"), "").strip()
                    yield {"type": "Characters",
                           "data": f"{alt} (image removed: {_shown(_url(src))})".lstrip()}
                    continue
                if kept is not None:
                    attrs[(None, "src")] = kept
                attrs.setdefault((None, "alt"), _NO_ALT)
                yield token
            elif name == "a" and kind == "StartTag":
                href = attrs.get((None, "href"))
                kept = None if href is None else web_link(href)
                if kept is None:  # no link: its text, then why (nothing for an <a> with no href)
                    links.append("" if href is None else f" (link removed: {_shown(_url(href))})")
                    continue
                attrs[(None, "href")] = kept
                attrs[(None, "target")] = "_blank"
                attrs[(None, "rel")] = LINK_REL
                links.append(None)
                yield token
            elif name == "a" and kind == "EndTag" and links:
                note = links.pop()
                if note is None:
                    yield token
                elif note:
                    yield {"type": "Characters", "data": note}
            else:
                yield token


def _attribute_allowed(allowed: dict):
    """bleach's attribute check, with the URL rules above applied once more to what is kept."""
    def check(tag: str, name: str, value: str) -> bool:
        if name not in allowed.get(tag, ()):
            return False
        if tag == "a" and name == "href":
            return web_link(value) is not None
        if tag == "a" and name in ("target", "rel"):
            return value == {"target": "_blank", "rel": LINK_REL}[name]
        if tag == "img" and name == "src":
            url = _url(value)
            return bool(_DATA_IMAGE.match(url)) or url.lower().startswith("attachment:")
        return True
    return check


def learner_html(text: str, strip: bool = True, attachments: dict | None = None, embed: bool = True,
                 tags=SAFE_TAGS, attributes: dict = SAFE_ATTRIBUTES) -> str:
    """A learner's HTML as a reader's browser may render it: bleach's allowlist of `tags` and
    `attributes` (others stripped, or escaped as text when not `strip`; comments dropped), links
    and images as `_LearnerURLs` says. One parse (bleach's html5lib), two filters."""
    if not text:
        return ""
    cleaner = bleach.Cleaner(tags=tags, attributes=_attribute_allowed(attributes),
                             protocols=[*LINK_SCHEMES, "data", "attachment"], strip=strip,
                             strip_comments=True)
    stream = _LearnerURLs(cleaner.walker(cleaner.parser.parseFragment(text)), attachments, embed)
    stream = BleachSanitizerFilter(source=stream, allowed_tags=cleaner.tags,
                                   attributes=cleaner.attributes,
                                   allowed_protocols=cleaner.protocols,
                                   strip_disallowed_tags=strip, strip_html_comments=True)
    return cleaner.serializer.render(stream)


def _tokens(text: str) -> list:
    """`text` as the parser reads it: tags with their attributes (in any order, entities decoded)
    and text, however it was spelled (`<img/>` or `<img>`, `&lt;` or `&#60;`): two texts that give
    the same tokens render the same."""
    parser = html5lib_shim.BleachHTMLParser(tags=None, strip=False, consume_entities=False,
                                            namespaceHTMLElements=False)
    out: list = []
    for token in bleach.Cleaner().walker(parser.parseFragment(text)):
        kind = token["type"]
        if kind in ("Characters", "SpaceCharacters"):
            if out and out[-1][0] == "text":
                out[-1] = ("text", out[-1][1] + token["data"])
            else:
                out.append(("text", token["data"]))
        else:
            attrs = sorted((str(k), _html.unescape(v)) for k, v in (token.get("data") or {}).items()) \
                if kind in ("StartTag", "EmptyTag") else token.get("data")
            out.append((kind, token.get("name"), attrs))
    return [("text", _html.unescape(t[1])) if t[0] == "text" else t for t in out]


def _render_markdown(source: str) -> str:
    """A markdown cell as nbconvert renders it, without heading anchors (the page's, not the
    learner's) and with `attachment:` images left as written (`learner_html` judges them)."""
    from nbconvert.filters.markdown_mistune import IPythonRenderer, MarkdownWithMath

    class Renderer(IPythonRenderer):
        def _embed_image_or_attachment(self, src: str) -> str:
            return src

    return MarkdownWithMath(renderer=Renderer(escape=False, exclude_anchor_links=True)).render(source)


def _html_block(html: str) -> str:
    """Sanitized HTML to store in a markdown cell: one HTML block (a `<div>`, no blank line, which
    would end it), so that no markdown renderer (nbconvert's mistune, JupyterLab's marked) reads
    markdown in it again: an `http://...` of the removed text autolinked, or a `![x](/logout)` that
    was text (in a stripped `<textarea>`) made an image after a blank line."""
    body = re.sub(r"\n(?=[ \t]*\n)", "&#10;", html.strip("\n"))
    whole = _tokens(body)
    if not (whole and whole[0][:2] == ("StartTag", "div") and whole[-1][:2] == ("EndTag", "div")
            and [t[:2] for t in whole].count(("EndTag", "div")) == 1):
        body = f"<div>\n{body}\n</div>"
    return body + "\n"


_OUTPUT_FIELDS = {"display_data": {"output_type", "data", "metadata"},
                  "execute_result": {"output_type", "data", "metadata", "execution_count"},
                  "stream": {"output_type", "name", "text"},
                  "error": {"output_type", "ename", "evalue", "traceback"}}


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


_IMAGE_METADATA = {"width": _number, "height": _number, "unconfined": lambda v: isinstance(v, bool),
                   "alt": lambda v: isinstance(v, str),
                   "needs_background": lambda v: v in ("light", "dark")}
"""The output metadata nbconvert's templates read, and what each may be: a learner's code sets it
(`display(..., metadata=...)`), and the templates write `width=` unquoted (`1 onerror=...` was an
attribute) and `filenames` as an image's `src` (a request)."""


def _output_metadata(metadata) -> dict:
    if not isinstance(metadata, dict):
        return {}
    kept = {k: v for k, v in metadata.items() if k in _IMAGE_METADATA and _IMAGE_METADATA[k](v)}
    for kind in ("image/png", "image/jpeg"):
        if isinstance(metadata.get(kind), dict):
            kept[kind] = {k: v for k, v in metadata[kind].items()
                          if k in _IMAGE_METADATA and _IMAGE_METADATA[k](v)}
    return kept


_TEX_REACH = re.compile(r"(?:\\|&#0*92;?|&#[xX]0*5[cC];?|&bsol;)"
                        r"(style|class|cssId|href|require|unicode|bbox)(?![A-Za-z])")
"""TeX commands with which math asks the page's MathJax for a CSS style (`cursor:url(...)` is a
request on hover; a large font or a margin lays the math over the page), a class or an id of the
page's own, a link, an extension or a font. MathJax typesets every `$...$` of the page's text
that is not code, sanitized HTML included, so the commands are found in the text itself, with
the backslash written as itself or as an HTML character reference (`&#92;`, `&bsol;`), which the
browser decodes before MathJax reads the text."""


def tame_tex(text: str) -> str:
    """`text` with each such command's backslash made a TeX space (`\\ style`: the letters, typeset
    as they are); the rest of the math as written."""
    return _TEX_REACH.sub(lambda m: "\\ " + m.group(1), text)


class LearnerHTML(SanitizeHTML):
    """nbconvert's `SanitizeHTML` over what the learner made, with `learner_html` as its sanitizer:
    every code cell's outputs (HTML and markdown cleaned, JavaScript, SVG and other active types
    dropped, output metadata reduced to an image's size and text), and the markdown or raw cells
    in which the sanitizer changes anything. Markdown it leaves unchanged (`a < b`, `$z > 0$`)
    and the source notebook's own cells (a code span `<Name>Backward`) stay exactly as written,
    since escaping them would change how they render. Runs in `autograde` (so the notebook stored
    in autograded/, which the formgrader shows, is clean) and again in `generate_feedback`, where
    it also cleans the grader's comment (it may quote a learner's line)."""

    enabled = Bool(True).tag(config=True)  # nbconvert's preprocessors are off unless enabled

    def __init__(self, **kw):
        kw.setdefault("tags", SAFE_TAGS)
        kw.setdefault("attributes", SAFE_ATTRIBUTES)
        super().__init__(**kw)

    def sanitize_html_tags(self, html_str, attachments: dict | None = None, strip: bool | None = None):
        return learner_html(html_str, strip=self.strip if strip is None else strip,
                            attachments=attachments, tags=self.tags, attributes=self.attributes)

    def _has_markup(self, text: str) -> bool:
        return _html.unescape(self.sanitize_html_tags(text, strip=True)) != text

    def _course_text(self, resources) -> set[str]:
        """The markdown and raw cells of the assignment's source notebook: the course's own."""
        parent, info = self.parent, resources.get("nbgrader", {})
        while parent is not None and getattr(parent, "coursedir", None) is None:
            parent = getattr(parent, "parent", None)
        if parent is None or not info.get("assignment") or not info.get("notebook"):
            return set()
        path = Path(parent.coursedir.format_path(parent.coursedir.source_directory, ".",
                                                 info["assignment"])) / f"{info['notebook']}.ipynb"
        try:
            nb = nbformat.read(path, as_version=4)
        except (OSError, ValueError):
            return set()
        return {c.source for c in nb.cells if c.cell_type in ("markdown", "raw")}

    def preprocess(self, nb, resources):
        self._trusted = self._course_text(resources)
        return super().preprocess(nb, resources)

    def sanitize_code_outputs(self, outputs):
        """nbconvert's, after each markdown output is judged as a markdown cell is (rendered
        first: nbconvert's own bleach pass sees `[x](javascript:...)` as plain text): one that
        renders unclean is replaced by its sanitized HTML. Each output keeps only the fields of
        its type and the metadata `_output_metadata` allows."""
        for output in outputs:
            if not isinstance(output, dict):
                continue
            fields = _OUTPUT_FIELDS.get(output.get("output_type"))
            for key in [k for k in output if fields is not None and k not in fields]:
                del output[key]
            if "metadata" in output:
                output["metadata"] = nbformat.from_dict(_output_metadata(output["metadata"]))
            data = output.get("data")
            if isinstance(data, dict) and isinstance(data.get("text/markdown"), (str, list)):
                text = data["text/markdown"]
                safe = self.safe_markdown("".join(text) if isinstance(text, list) else text)
                if safe is not None:
                    del data["text/markdown"]
                    data["text/html"] = safe
            if isinstance(data, dict) and isinstance(data.get("text/html"), list):
                data["text/html"] = "".join(data["text/html"])
            for kind in ("text/latex", "text/markdown", "text/html"):
                if isinstance(data, dict) and isinstance(data.get(kind), (str, list)):
                    text = data[kind]
                    data[kind] = tame_tex("".join(text) if isinstance(text, list) else text)
        return super().sanitize_code_outputs(outputs)

    def preprocess_cell(self, cell, resources, cell_index):
        if cell.cell_type == "code":
            cell.outputs = self.sanitize_code_outputs(cell.get("outputs", []))
        elif cell.cell_type in ("markdown", "raw") and cell.source not in getattr(self, "_trusted", ()):
            cell.source = tame_tex(cell.source)
            if cell.cell_type == "markdown":
                safe = self.safe_markdown(cell.source, cell.get("attachments"))
                if safe is not None:
                    cell.source = safe
            elif self._has_markup(cell.source):
                cell.source = self.sanitize_html_tags(cell.source)
        comment = nbgrader_metadata(cell).get("comment")
        if isinstance(comment, str) and comment:   # generate_feedback: GetGrades put it there
            comment = cell.metadata.nbgrader["comment"] = tame_tex(comment)
            safe = self.safe_markdown(comment)
            if safe is not None:
                cell.metadata.nbgrader["comment"] = safe
        return cell, resources

    def safe_markdown(self, source: str, attachments: dict | None = None) -> str | None:
        """A learner's markdown as sanitized HTML when rendering it gives anything the sanitizer
        changes (a link to anything but a web or mail address, or one not yet opening in a new
        tab; an image not from data in the notebook; an event handler, a script, SVG or MathML,
        raw HTML outside the allowlist); None when it renders clean, so that it stays exactly as
        written (math included). Links and images are judged after markdown is rendered (inline,
        reference and autolinks, entities decoded), and a script scheme anywhere in the text,
        however spelled, sends the cell to the sanitizer."""
        rendered = _render_markdown(source)
        judged = learner_html(rendered, attachments=attachments, embed=False, tags=self.tags,
                              attributes=self.attributes)
        squeezed = re.sub(r"[\s\x00-\x1f]+", "", _html.unescape(source)).lower()
        if _tokens(judged) != _tokens(rendered) or _SCRIPT_SCHEME.search(squeezed):
            return _html_block(learner_html(rendered, attachments=attachments, tags=self.tags,
                                            attributes=self.attributes))
        return None

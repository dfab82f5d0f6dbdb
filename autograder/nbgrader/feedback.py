"""What an instructor or a learner opens: learner output sanitized, no grader-only text.

`LearnerHTML` (in autograde, so the notebook the formgrader shows is clean, and again in
`generate_feedback`) judges learner markdown after rendering it, against an allowlist of tags,
attributes and URL schemes; `FeedbackClearHiddenTests` and `FeedbackClearMarkScheme` keep the
grader's scaffolding and the rubric out of the feedback; `MarkSchemeForGraders` hides the rubric's
markers in the formgrader; `FigureAltText`, `WrapLongLines`: a feedback page that reads well.
`feedback_preprocessors` is the list nbgrader_config.py installs.
"""

from __future__ import annotations

import html as _html
import re
from pathlib import Path

import bleach
import nbformat
from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor
from nbconvert.preprocessors.sanitize import SanitizeHTML
from nbgrader.preprocessors import ClearHiddenTests, ClearMarkScheme, GetGrades, NbGraderPreprocessor
from traitlets import Bool, List

from autograder.nbgrader.repair import _nbgrader


SAFE_TAGS = sorted(set(bleach.ALLOWED_TAGS) | {
    "p", "br", "hr", "div", "span", "pre", "h1", "h2", "h3", "h4", "h5", "h6", "sub", "sup",
    "table", "thead", "tbody", "tr", "th", "td", "img", "details", "summary", "dl", "dt", "dd"})
SAFE_PROTOCOLS = ["http", "https", "mailto"]
"""URL schemes a learner's link or image may use (relative links need none)."""
_SCRIPT_SCHEME = re.compile(r"(javascript|vbscript|livescript|data:text/html|data:image/svg)")
SAFE_ATTRIBUTES = {**bleach.ALLOWED_ATTRIBUTES, "img": ["src", "alt", "width", "height"],
                   "th": ["colspan", "rowspan", "align"], "td": ["colspan", "rowspan", "align"]}


def _described_images(html: str) -> str:
    """Sanitized learner HTML with alternative text on every image that has none."""
    return re.sub(r"<img(?![^>]*\balt=)", '<img alt="an image from the notebook"', html)


class LearnerHTML(SanitizeHTML):
    """nbconvert's `SanitizeHTML` (bleach) over what the learner made: every code cell's outputs
    (HTML and markdown cleaned, JavaScript, SVG and other active types dropped), and the markdown
    or raw cells in which bleach finds markup it would remove. Markdown without such markup
    (`a < b`, `$z > 0$`) and the source notebook's own cells (a code span `<Name>Backward`) are
    left exactly as written, since escaping them would change how they render. Runs in `autograde` (so the notebook stored in autograded/,
    which the formgrader shows, is clean) and again in `generate_feedback`."""

    enabled = Bool(True).tag(config=True)  # nbconvert's preprocessors are off unless enabled

    def __init__(self, **kw):
        kw.setdefault("tags", SAFE_TAGS)
        kw.setdefault("attributes", SAFE_ATTRIBUTES)
        super().__init__(**kw)

    def _has_markup(self, text: str) -> bool:
        stripped = bleach.clean(text, tags=self.tags, attributes=self.attributes, strip=True,
                                strip_comments=True)
        return _html.unescape(stripped) != text

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
        renders unclean is replaced by its sanitized HTML."""
        for output in outputs:
            data = output.get("data") if isinstance(output, dict) else None
            if isinstance(data, dict) and isinstance(data.get("text/markdown"), (str, list)):
                text = data["text/markdown"]
                safe = self.safe_markdown("".join(text) if isinstance(text, list) else text)
                if safe is not None:
                    del data["text/markdown"]
                    data["text/html"] = safe
        outputs = super().sanitize_code_outputs(outputs)
        for output in outputs:
            data = output.get("data") if isinstance(output, dict) else None
            if isinstance(data, dict) and isinstance(data.get("text/html"), str):
                data["text/html"] = _described_images(data["text/html"])
        return outputs

    def preprocess_cell(self, cell, resources, cell_index):
        if cell.cell_type == "code":
            cell.outputs = self.sanitize_code_outputs(cell.get("outputs", []))
        elif cell.cell_type in ("markdown", "raw") and cell.source not in getattr(self, "_trusted", ()):
            if cell.cell_type == "markdown":
                safe = self.safe_markdown(cell.source)
                if safe is not None:
                    cell.source = safe
            elif self._has_markup(cell.source):
                cell.source = self.sanitize_html_tags(cell.source)
        return cell, resources

    def safe_markdown(self, source: str) -> str | None:
        """A learner's markdown as sanitized HTML when rendering it gives anything an allowlist
        removes (a link or image to a scheme other than http, https, mailto or a relative path,
        an event handler, a script, SVG or MathML, raw HTML outside the allowlist); None when it
        renders clean, so that it stays exactly as written (math included). Links are judged
        after markdown is rendered (inline, reference and autolinks, entities decoded), and a
        script scheme anywhere in the text, however spelled, sends the cell to the sanitizer."""
        from nbconvert.filters.markdown import markdown2html
        rendered = markdown2html(source)
        safe = bleach.clean(rendered, tags=self.tags, attributes=self.attributes,
                            protocols=SAFE_PROTOCOLS, strip=True, strip_comments=True)
        squeezed = re.sub(r"[\s\x00-\x1f]+", "", _html.unescape(source)).lower()
        if safe != rendered or _SCRIPT_SCHEME.search(squeezed):
            return _described_images(safe)
        return None


class _Lenient:
    """nbgrader's clearing step, not insisting that only grade/task cells carry the markers (a
    learner may type them in an answer) and leaving a learner's cell with an unmatched marker as
    it is; the course's own cells always pair them (`nbgrader generate_assignment` checks)."""

    def preprocess_cell(self, cell, resources, cell_index):
        kept = cell.source
        try:
            return super().preprocess_cell(cell, resources, cell_index)
        except RuntimeError:
            cell.source = kept
            return cell, resources


DISPLAY_PRIORITY = List(NbGraderPreprocessor.display_data_priority.default_value).tag(config=True)
"""nbconvert's HTML exporter configures every preprocessor's display_data_priority; nbgrader's
own steps accept it (GetGrades), and ours do too, instead of warning on every feedback run."""


class FeedbackClearHiddenTests(_Lenient, ClearHiddenTests):
    """No `### BEGIN HIDDEN TESTS` block (the grader's scaffolding) in the learner's feedback, and
    no bare score under the test results (the `Out[n]: 0` nbgrader reads partial credit from: the
    feedback states the score at the cell already)."""

    enforce_metadata = Bool(False).tag(config=True)
    display_data_priority = DISPLAY_PRIORITY

    def preprocess_cell(self, cell, resources, cell_index):
        cell, resources = super().preprocess_cell(cell, resources, cell_index)
        meta = _nbgrader(cell)
        if cell.cell_type == "code" and meta.get("grade") and not meta.get("solution"):
            cell.outputs = [o for o in cell.get("outputs", []) if o.get("output_type") != "execute_result"]
        return cell, resources


class FeedbackClearMarkScheme(_Lenient, ClearMarkScheme):
    """No mark scheme (the written answer's rubric) in the learner's feedback."""

    enforce_metadata = Bool(False).tag(config=True)
    display_data_priority = DISPLAY_PRIORITY


MARK_SCHEME_LINE = "<!-- {} MARK SCHEME: shown to graders only, removed from the feedback -->"


class MarkSchemeForGraders(NbGraderPreprocessor):
    """In the notebook the formgrader shows, the mark scheme's `### BEGIN/END MARK SCHEME` lines
    become HTML comments (not rendered), which `generate_feedback` still finds and removes with
    the text between them (nbgrader's ClearMarkScheme matches the words, not the `###`)."""

    def preprocess_cell(self, cell, resources, cell_index):
        if cell.cell_type == "markdown" and _nbgrader(cell).get("task"):
            lines = cell.source.split("\n")
            for i, line in enumerate(lines):
                for word in ("BEGIN", "END"):
                    if line.strip() == f"### {word} MARK SCHEME":
                        lines[i] = MARK_SCHEME_LINE.format(word)
            cell.source = "\n".join(lines)
        return cell, resources


WRAP_CSS = "div.output_area pre, div.input_area pre { white-space: pre-wrap; overflow-wrap: anywhere; }"


class WrapLongLines(NbGraderPreprocessor):
    """Long lines in the feedback's code and output boxes wrap instead of running off the box."""

    display_data_priority = DISPLAY_PRIORITY

    def preprocess(self, nb, resources):
        resources.setdefault("inlining", {}).setdefault("css", []).append(WRAP_CSS)
        return nb, resources


class FigureAltText(NbGraderPreprocessor):
    """Every figure in the feedback gets alternative text (for a screen reader, and instead of
    nbconvert's warning per notebook): a PNG or JPEG output becomes the same image as HTML with
    `alt` from the output's own text ("<Figure size 640x480 with 1 Axes>") and its cell."""

    display_data_priority = DISPLAY_PRIORITY
    BASE64 = re.compile(r"[A-Za-z0-9+/=\s]+")

    def preprocess_cell(self, cell, resources, cell_index):
        if cell.cell_type != "code":
            return cell, resources
        for output in cell.get("outputs", []):
            data = output.get("data") or {}
            kind = next((k for k in ("image/png", "image/jpeg") if k in data), None)
            if kind is None or "text/html" in data or not isinstance(data[kind], str) \
                    or not self.BASE64.fullmatch(data[kind]):
                continue
            plain = data.get("text/plain", "")
            plain = "".join(plain) if isinstance(plain, list) else str(plain)
            alt = _html.escape(f"{plain.strip() or 'A figure'}, drawn by code cell {cell_index + 1}",
                               quote=True)
            data["text/html"] = f'<img alt="{alt}" src="data:{kind};base64,{data[kind].strip()}">'
            del data[kind]
        return cell, resources


def feedback_preprocessors() -> list:
    """`GenerateFeedback.preprocessors`: nbgrader's (GetGrades, CSSHTMLHeaderPreprocessor) with
    the hidden tests and the mark scheme cleared, learner output sanitized, long lines wrapped."""
    from nbgrader.converters import GenerateFeedback
    default = list(GenerateFeedback.preprocessors.default())
    if default != [GetGrades, CSSHTMLHeaderPreprocessor]:
        raise RuntimeError(f"nbgrader's feedback steps changed: {default}")
    return [GetGrades, FeedbackClearHiddenTests, FeedbackClearMarkScheme, LearnerHTML,
            FigureAltText, CSSHTMLHeaderPreprocessor, WrapLongLines]

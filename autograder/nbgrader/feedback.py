"""What an instructor or a learner opens: no grader-only text, learner output sanitized.

`FeedbackClearHiddenTests` and `FeedbackClearMarkScheme` keep the grader's scaffolding and the
rubric out of the feedback; `MarkSchemeForGraders` hides the rubric's markers in the formgrader;
`FigureAltText`, `WrapLongLines`: a feedback page that reads well; `LearnerHTML`
(autograder/nbgrader/sanitize.py) sanitizes what the learner made. `feedback_preprocessors` is the
list nbgrader_config.py installs.
"""

from __future__ import annotations

import html as _html
import re

from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor
from nbgrader.preprocessors import ClearHiddenTests, ClearMarkScheme, GetGrades, NbGraderPreprocessor
from traitlets import Bool, List

from autograder.nbgrader.cells import nbgrader_metadata
from autograder.nbgrader.sanitize import LearnerHTML


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
        meta = nbgrader_metadata(cell)
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
        if cell.cell_type == "markdown" and nbgrader_metadata(cell).get("task"):
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

"""Markdown to reStructuredText: mistune's `RSTRenderer`, with Jupyter's math and pipe tables.

The notebooks' Markdown is parsed as Jupyter's nbconvert parses it (`MathBlockParser` and
`MathInlineParser`: `$...$` and `$$...$$`, also across line breaks) with mistune's `table` plugin,
and written by mistune's `RSTRenderer`. What this module adds to the renderer:

* math: `$...$` is ``:math:`...```, `$$...$$` (on its own or inside a paragraph) a ``.. math::``
  block; pipe tables are ``.. list-table::``;
* docutils' inline markup rules: inline markup does not nest, so a bold or italic span that holds
  code, math or a link is split around it; a span must start after whitespace or punctuation and
  end before it, so an escaped space (``\\ ``, which shows as nothing) goes between a span and a
  letter or another span; and ``\\ * ` _ |`` are escaped in plain text;
* a nested list is set off by blank lines, as docutils requires; a soft line break stays a line
  break, so the text keeps the notebook's line lengths.

`rewrite` (applied to plain text, never to code or math) and `level` (a heading's Markdown level to
its reStructuredText level) let the caller renumber and relevel what it converts.
"""

from __future__ import annotations

import re
import textwrap
import unicodedata

import mistune
from mistune.renderers.rst import RSTRenderer
from nbconvert.filters.markdown_mistune import MathBlockParser, MathInlineParser

def _may_precede(char: str) -> bool:
    """docutils: an inline markup start-string follows whitespace, the start of the text, or this."""
    return char.isspace() or char in "-:/'\"<([{" or unicodedata.category(char) in ("Pd", "Po", "Ps", "Pi", "Pf")


def _may_follow(char: str) -> bool:
    """docutils: an inline markup end-string is followed by whitespace, the end of the text, or this."""
    return char.isspace() or char in "-.,:;!?\\/'\")]}>" or unicodedata.category(char) in ("Pd", "Po", "Pe", "Pi", "Pf")


def escape(text: str) -> str:
    """Plain text, with the characters that are markup in reStructuredText escaped."""
    return re.sub(r"([\\*`_|])", r"\\\1", text)


class Renderer(RSTRenderer):
    def __init__(self, rewrite=None, level=None) -> None:
        super().__init__()
        self.rewrite = rewrite or (lambda text: text)
        self.level = level or (lambda level: level)

    # -- inline: a list of pieces, ("text", rst) or ("span", rst), joined by docutils' rules ----------

    def _pieces(self, tokens: list[dict]) -> list[tuple[str, str]]:
        pieces: list[tuple[str, str]] = []
        for token in _merge_text(tokens):
            kind = token["type"]
            if kind == "text":
                pieces.append(("text", escape(self.rewrite(token["raw"]))))
            elif kind == "codespan":
                code = token["raw"].strip()
                pieces.append(("text", escape(code)) if "``" in code or not code else ("span", f"``{code}``"))
            elif kind == "inline_math":
                pieces.append(("span", f":math:`{token['raw'].strip()}`"))
            elif kind == "link":
                label = escape(_plain(token["children"])).replace("<", "\\<")   # no markup inside a link
                pieces.append(("span", f"`{label} <{token['attrs']['url']}>`__"))
            elif kind in ("strong", "emphasis"):
                pieces.extend(self._styled(token, "**" if kind == "strong" else "*"))
            else:
                pieces.append(("text", self.render_token(token, self._state)))
        return pieces

    def _styled(self, token: dict, marker: str) -> list[tuple[str, str]]:
        """A bold or italic span; code, math and links inside it are set apart (no nesting in rST)."""
        pieces = []
        for kind, text in self._pieces(token["children"]):
            body = text.strip()
            if kind == "span" or not body:
                pieces.append((kind, text))
                continue
            lead, trail = text[:len(text) - len(text.lstrip())], text[len(text.rstrip()):]
            pieces += [("text", lead), ("span", f"{marker}{body}{marker}"), ("text", trail)]
        return [p for p in pieces if p[1]]

    def _inline(self, tokens: list[dict]) -> str:
        out, previous = [], None          # previous: the kind of the last piece
        for kind, text in filter(lambda piece: piece[1], self._pieces(tokens)):
            if out and ((kind == "span" and (previous == "span" or not _may_precede(out[-1][-1])))
                        or (kind == "text" and previous == "span" and not _may_follow(text[0]))):
                out.append("\\ ")
            out.append(text)
            previous = kind
        return "".join(out)

    # -- blocks -------------------------------------------------------------------------------------

    def __call__(self, tokens, state) -> str:
        self._state = state
        return super().__call__(tokens, state)

    def paragraph(self, token: dict, state) -> str:
        """A paragraph, and the display math (`$$...$$`) inside it as math blocks of its own."""
        blocks, run = [], []
        for child in token["children"] + [{"type": "block_math", "raw": None}]:
            if child["type"] != "block_math":
                run.append(child)
                continue
            text = self._inline(run).strip()
            if text:
                blocks.append(text)
            run = []
            if child["raw"] is not None:
                tex = textwrap.dedent("\n".join(line.rstrip() for line in child["raw"].splitlines() if line.strip()))
                blocks.append(".. math::\n\n" + textwrap.indent(tex.strip("\n"), "   "))
        return "\n\n".join(blocks) + "\n\n"

    def block_text(self, token: dict, state) -> str:
        return self.paragraph(token, state).rstrip("\n") + "\n"

    def heading(self, token: dict, state) -> str:
        text = self._inline(token["children"]).strip()
        marker = self.HEADING_MARKERS[self.level(token["attrs"]["level"])]
        return f"{text}\n{marker * max(len(text), 4)}\n\n"

    def list(self, token: dict, state) -> str:
        """A list inside a list item is set off by a blank line before and after it."""
        text = super().list(token, state)
        return f"\n{text}\n" if token.get("parent") else text

    def table(self, token: dict, state) -> str:
        head, body = token["children"]
        rows = [head["children"]] + [row["children"] for row in body["children"]]
        lines = [".. list-table::", "   :header-rows: 1", ""]
        for row in rows:
            for k, cell in enumerate(row):
                for span in cell["children"]:      # GFM: a pipe in a cell is written \|, in code and math too
                    if span["type"] in ("codespan", "inline_math"):
                        span["raw"] = span["raw"].replace("\\|", "|")
                text = self._inline(cell["children"]).strip()
                lines.append(("   * -" if k == 0 else "     -") + (" " + text if text else ""))
        return "\n".join(lines) + "\n\n"


def _merge_text(tokens: list[dict]) -> list[dict]:
    """Adjacent text tokens and line breaks as one text (mistune splits a run of text at characters
    that might be markup), so that `rewrite` sees whole phrases and a bold phrase stays one span."""
    merged: list[dict] = []
    for token in tokens:
        if token["type"] in ("softbreak", "linebreak"):
            token = {"type": "text", "raw": "\n"}
        if token["type"] == "text" and merged and merged[-1]["type"] == "text":
            merged[-1] = {"type": "text", "raw": merged[-1]["raw"] + token["raw"]}
        else:
            merged.append(token)
    return merged


def _plain(tokens: list[dict]) -> str:
    return "".join(t.get("raw", " ") if "children" not in t else _plain(t["children"]) for t in tokens)


def markdown_to_rst(markdown: str, rewrite=None, level=None) -> str:
    """The Markdown of one notebook cell as reStructuredText."""
    parser = mistune.Markdown(Renderer(rewrite, level), block=MathBlockParser(),
                              inline=MathInlineParser(hard_wrap=False), plugins=[mistune.import_plugin("table")])
    rst = parser(markdown.replace("\t", "    "))
    return rst.strip("\n") + "\n" if rst.strip() else ""


def inline(markdown: str) -> str:
    """One line of Markdown (a title) as reStructuredText."""
    return markdown_to_rst("# " + markdown).splitlines()[0]

"""Markdown to reStructuredText, for the subset of Markdown the course's notebooks are written in.

The notebooks' markdown cells use: ATX headings (`#`), paragraphs, `**strong**` and `*emphasis*`,
inline code (backticks), inline math `$...$` and display math `$$ ... $$` (LaTeX), bullet and
numbered lists (one level of nesting), pipe tables, fenced code blocks and `[text](url)` links.
Anything else is kept as text, escaped so that reStructuredText shows it as written.

reStructuredText differs from Markdown in three ways that matter here, and each is handled:

* inline markup does not nest (`**a `b` c**` is not bold code): a strong or emphasised span that
  holds code or math is split into pieces around it;
* inline markup must start after whitespace or punctuation and end before it (docutils' "inline
  markup recognition rules"): where a span touches a letter, an escaped space (`\\ `, which shows
  as nothing) is put between them;
* `*`, `_`, `|` and the backtick mean something in plain text: they are escaped there.
"""

from __future__ import annotations

import re
import textwrap
import unicodedata
from dataclasses import dataclass, field

# ------------------------------------------------------------------------------------------------
# Inline markup

_INLINE = re.compile(
    r"(?P<code>(?P<ticks>`+)(?P<code_text>.+?)(?P=ticks))"
    r"|(?P<math>(?<![\\$])\$(?!\$)(?P<math_text>(?:\\.|[^$\\])+?)\$)"
    r"|(?P<link>\[(?P<link_text>[^\]]+)\]\((?P<link_url>[^)\s]+)\))"
    r"|(?P<strong>\*\*(?=\S)(?P<strong_text>.+?)(?<=\S)\*\*)"
    r"|(?P<emph>(?<![\w*])\*(?=[^\s*])(?P<emph_text>.+?)(?<=[^\s*])\*(?![\w*]))"
    r"|(?P<uemph>(?<![\w_])_(?=\S)(?P<uemph_text>[^_]+?)(?<=\S)_(?![\w_]))"
    r"|(?P<escape>\\(?P<escaped>[\\`*_{}\[\]()#+\-.!|$<>]))",
    re.S)

_START_BEFORE = set(" \t\n-:/'\"<([{")
_END_AFTER = set(" \t\n-.,:;!?\\/'\")]}>")


def _may_precede(char: str) -> bool:
    """docutils: an inline markup start-string follows whitespace, the start of the text, or this."""
    return char in _START_BEFORE or unicodedata.category(char) in ("Pd", "Po", "Ps", "Pi", "Pf")


def _may_follow(char: str) -> bool:
    """docutils: an inline markup end-string is followed by whitespace, the end, or this."""
    return char in _END_AFTER or unicodedata.category(char) in ("Pd", "Po", "Pe", "Pi", "Pf")


def _escape_text(text: str) -> str:
    """Plain text, with the characters that are markup in reStructuredText escaped."""
    return re.sub(r"([\\*`_|])", r"\\\1", text)


class _Inline:
    """Builds one line of reStructuredText from pieces: plain text and markup spans."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.open_span = False          # the last piece was a markup span

    def _last(self) -> str:
        return self.parts[-1][-1] if self.parts and self.parts[-1] else ""

    def text(self, text: str) -> None:
        if not text:
            return
        escaped = _escape_text(text)
        if self.open_span and not _may_follow(escaped[0]):
            self.parts.append("\\ ")
        self.parts.append(escaped)
        self.open_span = False

    def span(self, markup: str) -> None:
        last = self._last()
        if self.open_span or (last and not _may_precede(last)):
            self.parts.append("\\ ")       # two spans side by side, or a span after a letter
        self.parts.append(markup)
        self.open_span = True

    def result(self) -> str:
        return "".join(self.parts)


def _math(tex: str) -> str:
    return f":math:`{tex.strip()}`"


def _literal(code: str) -> str:
    code = code.strip()
    if "``" in code:   # cannot be written as a literal: keep it as escaped text
        return _escape_text(code)
    return f"``{code}``"


def _styled(line: _Inline, text: str, marker: str, rewrite) -> None:
    """`text` in bold (marker `**`) or italics (`*`); code and math inside are set apart, since
    reStructuredText cannot nest them in a styled span."""
    pos = 0
    pieces: list[tuple[str, str]] = []      # ("plain", text) or ("span", markup)
    for m in _INLINE.finditer(text):
        if m.group("code") or m.group("math") or m.group("link"):
            pieces.append(("plain", text[pos:m.start()]))
            pieces.append(("span", _span(m)))
            pos = m.end()
    pieces.append(("plain", text[pos:]))
    for kind, piece in pieces:
        if kind == "span":
            line.span(piece)
            continue
        stripped = piece.strip()
        if not stripped:
            line.text(piece)
            continue
        lead, trail = piece[:len(piece) - len(piece.lstrip())], piece[len(piece.rstrip()):]
        line.text(lead)
        line.span(f"{marker}{_escape_text(rewrite(stripped))}{marker}")
        line.text(trail)


def _span(m: re.Match) -> str:
    if m.group("code"):
        return _literal(m.group("code_text"))
    if m.group("math"):
        return _math(m.group("math_text"))
    return f"`{_escape_text(m.group('link_text'))} <{m.group('link_url')}>`__"


def inline(text: str, rewrite=lambda s: s) -> str:
    """One paragraph's (or heading's, or table cell's) Markdown inline markup as reStructuredText.
    `rewrite` is applied to the plain text only (never to code or math)."""
    line = _Inline()
    pos = 0
    for m in _INLINE.finditer(text):
        line.text(rewrite(text[pos:m.start()]))
        pos = m.end()
        if m.group("escape"):
            line.text(m.group("escaped"))
        elif m.group("strong"):
            _styled(line, m.group("strong_text"), "**", rewrite)
        elif m.group("emph") or m.group("uemph"):
            _styled(line, m.group("emph_text") or m.group("uemph_text"), "*", rewrite)
        else:
            line.span(_span(m))
    line.text(rewrite(text[pos:]))
    return line.result()


# ------------------------------------------------------------------------------------------------
# Blocks

HEADING_CHARS = "=-~^\"'"
"""Underline characters by depth: `#` is '=', `##` is '-', and so on (heading_offset shifts it)."""

_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_ITEM = re.compile(r"^(?P<indent> *)(?P<marker>[*+-]|\d+[.)])\s+(?P<text>.*)$")
_TABLE_RULE = re.compile(r"^\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")


@dataclass
class Options:
    heading_offset: int = 0
    """Added to the depth of every heading (1: `#` becomes a second-level heading)."""
    heading: object = None
    """A function of the heading's Markdown text, returning the text to use (or None: drop it)."""
    depth: object = None
    """A function of a heading's depth (after heading_offset), returning the depth to use."""
    rewrite: object = None
    """A function applied to plain text (not code, not math)."""
    drop_paragraph: object = None
    """A function of a paragraph's Markdown text: True drops the paragraph."""


def _split_row(line: str) -> list[str]:
    """The cells of a pipe-table row; a `|` inside code or math does not split."""
    body = line.strip()
    if body.startswith("|"):
        body = body[1:]
    if body.endswith("|") and not body.endswith("\\|"):
        body = body[:-1]
    cells, current, pos = [], [], 0
    while pos < len(body):
        m = _INLINE.match(body, pos)
        if m and (m.group("code") or m.group("math")):
            current.append(m.group(0))
            pos = m.end()
            continue
        char = body[pos]
        if char == "\\" and pos + 1 < len(body):
            current.append(body[pos:pos + 2])
            pos += 2
            continue
        if char == "|":
            cells.append("".join(current).strip())
            current = []
        else:
            current.append(char)
        pos += 1
    cells.append("".join(current).strip())
    return cells


@dataclass
class _Item:
    marker: str
    lines: list[str] = field(default_factory=list)
    children: list["_Item"] = field(default_factory=list)
    child_indent: int | None = None


def markdown_to_rst(markdown: str, options: Options | None = None) -> str:
    """The Markdown of one notebook cell as reStructuredText."""
    options = options or Options()
    rewrite = options.rewrite or (lambda s: s)
    lines = markdown.replace("\t", "    ").splitlines()
    out: list[str] = []
    i = 0

    def emit(block: list[str]) -> None:
        if out and out[-1] != "":
            out.append("")
        out.extend(block)
        out.append("")

    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if not stripped:
            i += 1
            continue
        if stripped.startswith("$$"):                       # display math
            tex, rest = [], stripped[2:]
            while True:
                if rest.rstrip().endswith("$$"):
                    tex.append(rest.rstrip()[:-2])
                    break
                tex.append(rest)
                i += 1
                if i == len(lines):
                    raise ValueError(f"display math opened with $$ is not closed: {markdown[:80]!r}")
                rest = lines[i]
            i += 1
            body = textwrap.dedent("\n".join(t.rstrip() for t in tex if t.strip())).splitlines()
            emit([".. math::", ""] + ["   " + t for t in body])
            continue
        if stripped.startswith("```"):                      # fenced code
            language = stripped[3:].strip() or "text"
            i += 1
            code = []
            while i < len(lines) and not lines[i].strip().startswith("```"):
                code.append(lines[i])
                i += 1
            i += 1
            emit([f".. code:: {language}", ""] + [("   " + c).rstrip() for c in code])
            continue
        heading = _HEADING.match(line)
        if heading:
            depth = len(heading.group(1)) + options.heading_offset
            if options.depth:
                depth = options.depth(depth)
            text = heading.group(2)
            if options.heading:
                text = options.heading(text)
            i += 1
            if text is None:
                continue
            title = inline(text, rewrite)
            emit([title, HEADING_CHARS[depth - 1] * max(len(title), 4)])
            continue
        if stripped.startswith("|") and i + 1 < len(lines) and _TABLE_RULE.match(lines[i + 1].strip()):
            header = _split_row(line)
            rows = []
            i += 2
            while i < len(lines) and lines[i].strip().startswith("|"):
                rows.append(_split_row(lines[i]))
                i += 1
            block = [".. list-table::", "   :header-rows: 1", ""]
            for row in [header] + rows:
                row = (row + [""] * len(header))[:len(header)]
                for k, cell in enumerate(row):
                    text = inline(cell, rewrite) if cell else ""
                    block.append(("   * - " if k == 0 else "     - ") + text if text else
                                 ("   * -" if k == 0 else "     -"))
            emit(block)
            continue
        if _ITEM.match(line):                               # a list (one level of nesting)
            items: list[_Item] = []
            base = len(_ITEM.match(line).group("indent"))
            while i < len(lines):
                current = lines[i]
                if not current.strip():
                    # a blank line ends the list unless the next line continues it
                    nxt = lines[i + 1] if i + 1 < len(lines) else ""
                    if nxt.strip() and (_ITEM.match(nxt) and len(_ITEM.match(nxt).group("indent")) >= base
                                        or nxt.startswith(" " * (base + 2))):
                        i += 1
                        continue
                    break
                m = _ITEM.match(current)
                if m and len(m.group("indent")) <= base + 1:
                    items.append(_Item(m.group("marker"), [m.group("text")]))
                elif m and items:
                    items[-1].children.append(_Item(m.group("marker"), [m.group("text")]))
                elif items and (current.startswith(" ") or not _starts_block(current)):
                    target = items[-1].children[-1] if items[-1].children else items[-1]
                    target.lines.append(current.strip())
                else:
                    break
                i += 1
            emit(_list_block(items, rewrite, 0))
            continue
        paragraph = []                                      # a paragraph
        while i < len(lines) and lines[i].strip() and not (paragraph and _starts_block(lines[i])):
            paragraph.append(lines[i].strip())
            i += 1
        text = "\n".join(paragraph)
        if options.drop_paragraph and options.drop_paragraph(text):
            continue
        emit([inline(p, rewrite) for p in _join_spans(paragraph)])
    while out and out[-1] == "":
        out.pop()
    return "\n".join(out) + "\n" if out else ""


def _starts_block(line: str) -> bool:
    s = line.strip()
    return bool(_HEADING.match(line) or s.startswith(("$$", "```")) or _ITEM.match(line)
                or (s.startswith("|") and s.endswith("|")))


def _join_spans(lines: list[str]) -> list[str]:
    """The paragraph's lines, with a line whose code or math span is still open joined to the next
    (a Markdown span may cross a line break; converting line by line would cut it)."""
    joined: list[str] = []
    for line in lines:
        if joined and _open_span(joined[-1]):
            joined[-1] += " " + line
        else:
            joined.append(line)
    return joined


def _open_span(text: str) -> bool:
    rest = _INLINE.sub("", text)
    rest = re.sub(r"\\.", "", rest)
    return rest.count("`") % 2 == 1 or rest.count("$") % 2 == 1 or rest.count("**") % 2 == 1


def _list_block(items: list[_Item], rewrite, indent: int) -> list[str]:
    block: list[str] = []
    for n, item in enumerate(items, 1):
        marker = "*" if item.marker in "*+-" else f"{n}."
        pad = " " * indent
        body = [inline(p, rewrite) for p in _join_spans(item.lines)]
        block.append(f"{pad}{marker} {body[0]}")
        block.extend(f"{pad}{' ' * (len(marker) + 1)}{line}" for line in body[1:])
        if item.children:
            block.append("")
            block.extend(_list_block(item.children, rewrite, indent + len(marker) + 1))
            block.append("")
    while block and block[-1] == "":
        block.pop()
    return block

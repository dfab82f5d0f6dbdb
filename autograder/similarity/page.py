"""The similarity page (OUT/index.html) and its CSV (OUT/pairs.csv).

One self-contained HTML file: no script, no style sheet or image from elsewhere (its
Content-Security-Policy forbids every request), so it works offline and can be mailed. Every
text a learner chose (code, written answers, folder names, a notebook's error) is escaped; the
shared regions are <mark>ed by character ranges of the escaped-before-marking text.
"""

from __future__ import annotations

import csv
import html
import io
from pathlib import Path

from autograder.grade.results import spreadsheet_cell, write_atomic
from autograder.similarity.answers import MIN_TOKENS, MIN_WORDS
from autograder.similarity.compare import Group, Pair, normal_text

SHOWN_PAIRS = 60
"""Pairs shown side by side per exercise."""
LISTED_PAIRS = 300
"""Pairs listed in the table per exercise (all are in pairs.csv)."""

CSP = "default-src 'none'; style-src 'unsafe-inline'"

CSS = """
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1f2328;
  max-width:1200px;margin:2em auto;padding:0 1.2em}
h1{font-size:1.6em;margin-bottom:.1em} h2{margin-top:1.8em;border-bottom:1px solid #d0d7de;
  padding-bottom:.2em} h3{margin:1.2em 0 .3em} .sub{color:#59636e;margin-top:0}
table{border-collapse:collapse;margin:.6em 0;width:100%;font-size:.92em}
th,td{border-bottom:1px solid #e3e6ea;padding:.3em .55em;text-align:left;vertical-align:top}
th{background:#f6f8fa} td.n,th.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.key{background:#fff8e6;border-left:4px solid #e08a2e;padding:.6em .9em;margin:1em 0}
.who{color:#59636e;font-size:.88em}
.cards{display:flex;gap:.8em;flex-wrap:wrap;margin:1em 0}
.card{background:#f6f8fa;border-radius:6px;padding:.5em .9em} .card b{display:block;font-size:1.4em}
.side{display:grid;grid-template-columns:1fr 1fr;gap:.6em;margin:.4em 0 1em}
pre{background:#f6f8fa;border:1px solid #e3e6ea;border-radius:4px;padding:.5em .7em;margin:0;
  overflow:auto;font-size:12.5px;line-height:1.4;white-space:pre-wrap;word-break:break-word}
mark{background:#ffd7a8;color:inherit} summary{cursor:pointer}
details{margin:.2em 0} .bar{display:inline-block;height:.7em;background:#c0504d;vertical-align:middle}
"""


def _e(text) -> str:
    """Escaped for HTML (everything a learner chose is untrusted)."""
    return html.escape(str(text).encode("utf-8", "surrogateescape").decode("utf-8", "replace"))


def marked(text: str, ranges: list[tuple[int, int]]) -> str:
    """`text` escaped, with the character ranges (start, end) in <mark>."""
    out, at = [], 0
    for start, end in sorted(_merge(ranges, len(text))):
        if start < at:
            start = at
        if end <= start:
            continue
        out += [_e(text[at:start]), "<mark>", _e(text[start:end]), "</mark>"]
        at = end
    out.append(_e(text[at:]))
    return "".join(out)


def _merge(ranges, size: int) -> list[tuple[int, int]]:
    merged: list[list[int]] = []
    for start, end in sorted((max(0, s), min(size, e)) for s, e in ranges):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        elif end > start:
            merged.append([start, end])
    return [(s, e) for s, e in merged]


def _title(group: Group) -> str:
    what = f"<code>{_e(group.item)}</code>" if group.kind == "code" else \
        f"written answer <code>{_e(group.item)}</code>"
    return f"{what} <span class='who'>({_e(group.assignment)})</span>"


def _pair_row(p: Pair) -> str:
    return (f"<tr><td>{_e(p.a.student)}</td><td>{_e(p.b.student)}</td>"
            f"<td class='n'>{p.similarity:.0%} <span class='bar' style='width:"
            f"{round(60 * p.similarity)}px'></span></td><td class='n'>{p.weight:.2f}</td>"
            f"<td class='n'>{p.expected:.0%}</td><td>{_outcome(p)}</td></tr>")


def _outcome(p: Pair) -> str:
    known = {p.a.right, p.b.right}
    if None in known:
        return ""
    return "both passed" if known == {True} else "both failed" if known == {False} else "one passed"


def _side_by_side(p: Pair) -> str:
    def shown(a):  # a written answer as compared (the marked ranges are of that text)
        return a.text if a.kind == "code" else normal_text(a.text)
    return (f"<details><summary>{_e(p.a.student)} and {_e(p.b.student)}: {p.similarity:.0%}"
            f"</summary><div class='side'><div><b>{_e(p.a.student)}</b>"
            f"<pre>{marked(shown(p.a), p.slices_a)}</pre></div><div><b>{_e(p.b.student)}</b>"
            f"<pre>{marked(shown(p.b), p.slices_b)}</pre></div></div></details>")


def render(groups: list[Group], problems, source: str, threshold: float,
           students: list[str], seconds: float = 0.0) -> str:
    pairs = sum(len(g.pairs) for g in groups)
    short = sum(len(g.short) for g in groups)
    clusters = sum(len(g.clusters) for g in groups)
    unread = [p for p in problems if not p.item and p.student]
    parts = [f"<!doctype html><html lang='en'><head><meta charset='utf-8'>"
             f"<meta http-equiv='Content-Security-Policy' content=\"{CSP}\">"
             f"<meta name='viewport' content='width=device-width,initial-scale=1'>"
             f"<title>Similar answers</title><style>{CSS}</style></head><body>",
             "<h1>Similar answers</h1>",
             f"<p class='sub'>From <code>{_e(source)}</code>: {len(students)} learners, "
             f"{len(groups)} exercises compared in {seconds:.1f} s.</p>",
             "<div class='cards'>"
             f"<div class='card'><b>{pairs}</b>pairs at or above {threshold:.0%}</div>"
             f"<div class='card'><b>{clusters}</b>clusters of more than two</div>"
             f"<div class='card'><b>{short}</b>answers too short to tell apart</div>"
             f"<div class='card'><b>{len(unread)}</b>notebooks not read</div></div>",
             "<div class='key'><b>Similarity is evidence to look at, not proof.</b> Two answers "
             "are compared as copydetect (MOSS's winnowing) compares code: the tokens, every name "
             "the learner chose counting as the same name, comments and layout left out. The "
             "release notebook's code (signature, docstring, stub) never counts as shared, nor "
             "does code most of the class's answers hold. <i>Similarity</i> is the share of each "
             "answer's code that the other also holds (the mean of the two); <i>weight</i> orders the pairs: code the "
             "worked solution also holds, and code other learners also hold, counts less, so the "
             "same unusual code (a shared mistake) ranks above the same expected code. Independent "
             "answers to a short exercise converge: read the code side by side and decide. Answers "
             f"under {MIN_TOKENS} tokens (written answers under {MIN_WORDS} words) are listed as "
             "too short, never compared.</div>"]
    if not groups:
        parts.append("<p>No answer was found to compare.</p>")
    reported = [g for g in groups if g.pairs]
    if reported:
        parts.append("<h2>Pairs above the threshold</h2>")
    for g in reported:
        parts.append(f"<h3>{_title(g)}</h3><p class='sub'>{len(g.answers)} answers compared"
                     f"{f', {len(g.short)} too short' if g.short else ''}"
                     f"{f'; {g.common} fingerprints most answers hold left out' if g.common else ''}"
                     ".</p>")
        for cluster in g.clusters:
            parts.append(f"<p><b>Cluster of {len(cluster)}</b>: "
                         f"{', '.join(_e(s) for s in cluster)}</p>")
        parts.append("<table><tr><th>learner</th><th>learner</th><th class='n'>similarity</th>"
                     "<th class='n'>weight</th><th class='n'>shared code the solution holds</th>"
                     "<th>hidden tests</th></tr>")
        parts += [_pair_row(p) for p in g.pairs[:LISTED_PAIRS]]
        parts.append("</table>")
        if len(g.pairs) > LISTED_PAIRS:
            parts.append(f"<p class='sub'>and {len(g.pairs) - LISTED_PAIRS} more pairs, each of "
                         "lower weight: all are in pairs.csv.</p>")
        parts += [_side_by_side(p) for p in g.pairs[:SHOWN_PAIRS]]
        if len(g.pairs) > SHOWN_PAIRS:
            parts.append(f"<p class='sub'>The first {SHOWN_PAIRS} pairs are shown side by side.</p>")
    quiet = [g for g in groups if not g.pairs]
    if quiet:
        parts.append("<h2>Exercises with no pair above the threshold</h2><ul>")
        parts += [f"<li>{_title(g)}: {len(g.answers)} answers compared"
                  f"{f', {len(g.short)} too short' if g.short else ''}"
                  f"{f'; {g.common} fingerprints most answers hold left out' if g.common else ''}"
                  "</li>" for g in quiet]
        parts.append("</ul>")
    if short:
        parts.append("<h2>Answers too short to tell apart</h2><p class='sub'>Never compared: "
                     "so short an answer is the same in many independent notebooks "
                     "(<code>return z.clamp(min=0)</code>). Listed, never evidence.</p>"
                     "<table><tr><th>exercise</th><th class='n'>answers</th><th>learners</th></tr>")
        for g in groups:
            if g.short:
                names = sorted(a.student for a in g.short)
                parts.append(f"<tr><td>{_title(g)}</td><td class='n'>{len(names)}</td><td>"
                             f"<span class='who'>{', '.join(_e(n) for n in names)}</span></td>"
                             f"</tr>")
        parts.append("</table>")
    unanswered: dict[tuple[str, str], list[str]] = {}
    for p in problems:
        if p.item and p.reason == "not answered":
            unanswered.setdefault((p.assignment, p.item), []).append(p.student)
    others = [p for p in problems if not (p.item and p.reason == "not answered")]
    if others:
        parts.append("<h2>Not read</h2><table><tr><th>learner</th><th>assignment</th>"
                     "<th>answer</th><th>why</th></tr>")
        for p in sorted(others, key=lambda p: (p.item != "", p.student, p.assignment, p.item)):
            parts.append(f"<tr><td>{_e(p.student)}</td><td>{_e(p.assignment)}</td><td>"
                         f"{_e(p.item) or 'the notebook'}</td><td>{_e(p.reason)}</td></tr>")
        parts.append("</table>")
    if unanswered:
        parts.append("<h2>Not answered</h2><p class='sub'>The answer cell as the release "
                     "notebook has it.</p><table><tr><th>assignment</th><th>answer</th>"
                     "<th class='n'>learners</th><th>who</th></tr>")
        for (assignment, item), names in sorted(unanswered.items()):
            parts.append(f"<tr><td>{_e(assignment)}</td><td><code>{_e(item)}</code></td>"
                         f"<td class='n'>{len(names)}</td><td><span class='who'>"
                         f"{', '.join(_e(n) for n in sorted(names))}</span></td></tr>")
        parts.append("</table>")
    parts.append("</body></html>\n")
    return "\n".join(parts)


def csv_text(groups: list[Group]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["learner_a", "learner_b", "assignment", "function", "similarity", "weight"])
    for g in groups:
        for p in g.pairs:
            writer.writerow([spreadsheet_cell(v) for v in
                             (p.a.student, p.b.student, g.assignment, g.item,
                              round(p.similarity, 3), round(p.weight, 3))])
    return buffer.getvalue()


def write(out: Path, groups: list[Group], problems, source: str, threshold: float,
          students: list[str], seconds: float = 0.0) -> None:
    out = Path(out)
    write_atomic(out / "index.html",
                 render(groups, problems, source, threshold, students, seconds).encode("utf-8"))
    write_atomic(out / "pairs.csv", csv_text(groups).encode("utf-8"))

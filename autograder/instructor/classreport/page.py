"""The class report's page and its command: `python -m autograder report DIR --out REPORT_DIR`.

Writes one self-contained `REPORT_DIR/index.html` (figures are PNGs embedded as data URIs: it works
offline, and can be mailed as one file) from the numbers of tally.py and the figures of figures.py;
every name and message a learner chose is escaped.
"""

from __future__ import annotations

import html
import statistics
import sys
from collections import defaultdict
from pathlib import Path

from autograder.instructor.classreport.figures import figure_functions, figure_mistakes, \
    figure_scores, figure_slowest
from autograder.instructor.classreport.tally import Result, assignment_order, function_table, \
    load, mistakes, needs_review

CSS = """
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1f2328;
  max-width:1000px;margin:2em auto;padding:0 1.2em}
h1{font-size:1.6em;margin-bottom:.1em} h2{margin-top:1.8em;border-bottom:1px solid #d0d7de;
  padding-bottom:.2em} .sub{color:#59636e;margin-top:0}
table{border-collapse:collapse;margin:.6em 0;width:100%;font-size:.92em}
th,td{border-bottom:1px solid #e3e6ea;padding:.3em .55em;text-align:left;vertical-align:top}
th{background:#f6f8fa} th.n{text-align:right} td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
img{max-width:100%;height:auto;display:block;margin:.6em 0}
.key{background:#fff8e6;border-left:4px solid #e08a2e;padding:.6em .9em;margin:1em 0}
.who{color:#59636e;font-size:.88em} code{font-size:.92em}
.cards{display:flex;gap:.8em;flex-wrap:wrap;margin:1em 0}
.card{background:#f6f8fa;border-radius:6px;padding:.5em .9em}
.card b{display:block;font-size:1.4em}
"""


CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"
"""The page's own rule, as the feedback's sanitizer's (autograder/nbgrader/sanitize.py): learner
text is escaped, and even so nothing in the page may make the browser send a request (images
only from data in the page, no script, no style sheet from elsewhere)."""


def _e(text) -> str:
    """Escaped for HTML (learner-chosen names and messages are untrusted)."""
    return html.escape(str(text).encode("utf-8", "surrogateescape").decode("utf-8", "replace"))


def _who(students: list[str], limit: int = 8) -> str:
    shown = ", ".join(_e(s) for s in students[:limit])
    return shown + (f" and {len(students) - limit} more" if len(students) > limit else "")


def render(results: list[Result], source: str) -> str:
    by = defaultdict(list)
    for r in results:
        by[r.assignment].append(r)
    names = assignment_order(by)
    students = sorted({r.student for r in results})
    rows = function_table(results)
    found = mistakes(results)
    ungraded = [r for r in results if not r.graded]
    review = needs_review(results)
    timed = sorted((r for r in results if r.seconds is not None), key=lambda r: -r.seconds)
    parts = [f"<!doctype html><html lang='en'><head><meta charset='utf-8'>"
             f"<meta http-equiv='Content-Security-Policy' content=\"{CSP}\">"
             f"<meta name='viewport' content='width=device-width,initial-scale=1'>"
             f"<title>Class report</title><style>{CSS}</style></head><body>",
             "<h1>Class report</h1>",
             f"<p class='sub'>From <code>{_e(source)}</code>: {len(results)} graded notebooks of "
             f"{len(students)} students, {len(names)} assignments.</p>"]
    if not results:
        parts.append("<p>No result files (<code>&lt;student&gt;/&lt;assignment&gt;.json</code>) "
                     "were found.</p></body></html>")
        return "".join(parts)
    full = sum(r.max_score > 0 and r.score == r.max_score for r in results)
    parts.append("<div class='cards'>"
                 f"<div class='card'><b>{len(students)}</b>students</div>"
                 f"<div class='card'><b>{len(results)}</b>notebooks</div>"
                 f"<div class='card'><b>{full}</b>full marks</div>"
                 f"<div class='card'><b>{len(found)}</b>distinct named mistakes</div>"
                 f"<div class='card'><b>{len(ungraded)}</b>not gradable</div>"
                 f"<div class='card'><b>{len({(s, a) for s, a, _, _ in review})}</b>needs review"
                 f"</div></div>")
    if found:
        m = found[0]
        parts.append(f"<div class='key'><b>Most frequent mistake</b> ({len(m.students)} "
                     f"notebook{'s' if len(m.students) != 1 else ''}, {_e(m.assignment)}, "
                     f"<code>{_e(m.function)}</code>): {_e(m.hint)}</div>")
    weakest = sorted((r for r in rows if r[2] + r[3] + r[4]),
                     key=lambda r: r[2] / (r[2] + r[3] + r[4]))[:1]
    if weakest:
        a, f, p, fl, ms = weakest[0]
        parts.append(f"<div class='key'><b>Lowest pass rate</b>: <code>{_e(f)}</code> "
                     f"({_e(a)}), passed by {p} of {p + fl + ms} notebooks"
                     f"{f'; {ms} did not write it' if ms else ''}.</div>")

    parts.append("<h2>Scores per assignment</h2>")
    parts.append(f"<img alt='Histogram of scores, one panel per assignment' "
                 f"src='{figure_scores(results)}'>")
    parts.append("<table><tr><th>assignment</th><th class='n'>notebooks</th><th class='n'>mean"
                 "</th><th class='n'>median</th><th class='n'>full marks</th><th class='n'>"
                 "0 points</th></tr>")
    for a in names:
        rs = by[a]
        top = max(r.max_score for r in rs)
        scores = [r.score for r in rs]
        parts.append(f"<tr><td>{_e(a)}</td><td class='n'>{len(rs)}</td><td class='n'>"
                     f"{statistics.mean(scores):.1f} / {top:g}</td><td class='n'>"
                     f"{statistics.median(scores):g}</td><td class='n'>"
                     f"{sum(r.max_score > 0 and r.score == r.max_score for r in rs)}</td>"
                     f"<td class='n'>{sum(r.score == 0 for r in rs)}</td></tr>")
    parts.append("</table>")

    parts.append("<h2>Pass rate per graded function</h2>")
    if rows:
        parts.append("<p class='sub'>A function passes in a notebook when all its hidden tests "
                     "pass; “not written” means it still raised NotImplementedError or was "
                     "missing.</p>")
        parts.append(f"<img alt='Pass rate of every graded function' "
                     f"src='{figure_functions(rows)}'>")
        parts.append("<table><tr><th>assignment</th><th>function</th><th class='n'>passed</th>"
                     "<th class='n'>failed</th><th class='n'>not written</th></tr>")
        for a, f, p, fl, ms in rows:
            parts.append(f"<tr><td>{_e(a)}</td><td><code>{_e(f)}</code></td><td class='n'>{p}"
                         f"</td><td class='n'>{fl}</td><td class='n'>{ms}</td></tr>")
        parts.append("</table>")
    else:
        parts.append("<p>No hidden test ran in these results.</p>")

    parts.append("<h2>Most frequent named mistakes</h2>")
    if found:
        top = found[:15]
        parts.append("<p class='sub'>The hints learners received, each counted once per "
                     "notebook: what to re-teach first.</p>")
        parts.append(f"<img alt='The most frequent named mistakes' "
                     f"src='{figure_mistakes(top)}'>")
        parts.append("<table><tr><th class='n'>#</th><th class='n'>notebooks</th><th>function"
                     "</th><th>hint the learners received</th></tr>")
        for i, m in enumerate(found[:40], 1):
            parts.append(f"<tr><td class='n'>{i}</td><td class='n'>{len(m.students)}</td><td>"
                         f"<code>{_e(m.function)}</code><br><span class='who'>{_e(m.assignment)}"
                         f"</span></td><td>{_e(m.hint)}<br><span class='who'>"
                         f"{_who(m.students)}</span></td></tr>")
        parts.append("</table>")
        if len(found) > 40:
            parts.append(f"<p class='sub'>and {len(found) - 40} more, each less frequent.</p>")
    else:
        parts.append("<p>No failed test carried a named mistake.</p>")

    if ungraded:
        parts.append("<h2>Notebooks that could not be graded</h2><table><tr><th>student</th>"
                     "<th>assignment</th><th>why (as the learner was told)</th></tr>")
        for r in ungraded:
            retry = " <span class='who'>(the grader's fault: retried next run)</span>" \
                if r.retry else ""
            parts.append(f"<tr><td>{_e(r.student)}</td><td>{_e(r.assignment)}</td><td>"
                         f"{_e(r.output)}{retry}</td></tr>")
        parts.append("</table>")

    if review:
        parts.append("<h2>Needs review</h2><p class='sub'>Code that used what no exercise needs "
                     "and what could reach into the grader's side of the learner's process "
                     "(frames, gc, sys.modules, the grader's modules, torch's mode stack, ...). "
                     "Flagged from the notebook's text by the grader, outside the learner's "
                     "process; the score is unchanged: read the lines and decide.</p>"
                     "<table><tr><th>student</th><th>assignment</th><th>cell</th>"
                     "<th>flagged lines</th></tr>")
        for student, assignment, cell, lines in review:
            quoted = "<br>".join(_e(line) for line in lines[:20])
            parts.append(f"<tr><td>{_e(student)}</td><td>{_e(assignment)}</td><td><code>"
                         f"{_e(cell)}</code></td><td>{quoted}</td></tr>")
        parts.append("</table>")

    parts.append("<h2>Slowest notebooks</h2>")
    if timed:
        slow = timed[:10]
        parts.append(f"<p class='sub'>Seconds their hidden tests ran (sandbox included); median "
                     f"{statistics.median(r.seconds for r in timed):.2f} s over {len(timed)} "
                     f"notebooks.</p>")
        parts.append(f"<img alt='The slowest notebooks' src='{figure_slowest(slow)}'>")
        parts.append("<table><tr><th>student</th><th>assignment</th><th class='n'>seconds</th>"
                     "<th class='n'>score</th></tr>")
        for r in slow:
            parts.append(f"<tr><td>{_e(r.student)}</td><td>{_e(r.assignment)}</td><td class='n'>"
                         f"{r.seconds:.2f}</td><td class='n'>{r.score:g} / {r.max_score:g}</td>"
                         f"</tr>")
        parts.append("</table>")
    else:
        parts.append("<p>These results carry no timing (graded before the grader recorded "
                     "<code>extra_data.seconds</code>): regrade with <code>--force</code> to "
                     "see it.</p>")
    parts.append("</body></html>\n")
    return "\n".join(parts)


def write_report(folder: Path, out: Path | None = None) -> int:
    """The `report` command: DIR -> REPORT_DIR/index.html (default REPORT_DIR: DIR/report)."""
    from autograder.grade.results import write_atomic
    folder = Path(folder)
    if not folder.is_dir():
        print(f"error: {folder}: no such folder (a batch's --out DIR)", file=sys.stderr)
        return 2
    results = load(folder)
    if not results:
        print(f"error: {folder}: no <student>/<assignment>.json result files", file=sys.stderr)
        return 2
    out = Path(out) if out is not None else folder / "report"
    page = out / "index.html"
    body, end, rest = render(results, str(folder)).rpartition("</body></html>")
    write_atomic(page, (body + similarity_section(out) + end + rest).encode("utf-8"))
    print(f"report: {page}")
    return 0


def similarity_section(out: Path) -> str:
    """The "Similar answers" section: a link to the similarity page (`python -m autograder
    similarity`, autograder/similarity/) when it is in REPORT_DIR/similarity/ or beside
    REPORT_DIR, else the command that writes it there."""
    for link, where in (("similarity/index.html", out / "similarity"),
                        ("../similarity/index.html", out.parent / "similarity")):
        if (where / "index.html").is_file():
            return ("<h2>Similar answers</h2><p>Which learners handed in alike answers, per "
                    f"graded function: <a href='{link}'>the similarity page</a> "
                    f"(<code>{_e(link)}</code>). Similarity is evidence to look at, not proof.</p>\n")
    return ("<h2>Similar answers</h2><p>Not computed for this report: <code>python -m autograder "
            "similarity submitted/ --out " + _e(out / "similarity") + "</code> writes the page "
            "of learners whose answers are alike, linked here on the next <code>report</code>.</p>\n")

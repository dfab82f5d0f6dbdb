"""Results as Gradescope's results.json and as a grades.csv for the whole batch."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import re
import os
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from autograder.grade.plugin import TestResult


def results_json(results: list[TestResult], *, error: str | None = None,
                 note: str | None = None) -> dict:
    """Gradescope results.json for one submission.

    Written answers graded by hand come with max_score 0 (see `grading.written_results`), so the
    top-level score and max_score count autograded points only and they never show as failed."""
    tests = [{
        "name": r.name,
        "score": r.score,
        "max_score": r.max_score,
        "status": "passed" if r.passed else "failed",
        "output": r.output,
        "visibility": "hidden" if r.review else "visible" if r.visible else "after_published",
    } for r in results]
    out = {"score": sum(r.score for r in results), "max_score": sum(r.max_score for r in results),
           "tests": tests}
    if error or note:
        out["output"] = "\n".join(m for m in (error, note) if m)
    return bounded(out)


MAX_RESULTS_BYTES = 1 << 20
"""results.json of one notebook stays under this, whatever its learner code made the messages."""
MAX_OUTPUT = 20_000
"""Characters of one test's output kept in results.json (a message quotes learner text)."""


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... (cut: {len(text) - limit} characters)"


def bounded(data: dict) -> dict:
    """`data` (a results.json) with every output cut so that the file stays under
    MAX_RESULTS_BYTES: first to MAX_OUTPUT characters each, then to an equal share each."""
    tests = data.get("tests", [])
    texts = [t for t in tests if isinstance(t.get("output"), str)]
    for t in texts:
        t["output"] = _cut(t["output"], MAX_OUTPUT)
    if isinstance(data.get("output"), str):
        data["output"] = _cut(data["output"], MAX_OUTPUT)
    # UTF-8 and JSON escapes take up to 6 bytes a character (\uXXXX): measure, then share.
    if len(_dumps(data)) > MAX_RESULTS_BYTES * 0.9 and texts:
        share = max(200, int(MAX_RESULTS_BYTES * 0.8) // 6 // (len(texts) + 1))
        for t in texts:
            t["output"] = _cut(t["output"], share)
        if isinstance(data.get("output"), str):
            data["output"] = _cut(data["output"], share)
    return data


TEMP_SUFFIX = ".tmp"
_UMASK = os.umask(0o022)
os.umask(_UMASK)


def write_atomic(path: Path, data: bytes) -> None:
    """Write `path` so that it is never seen half-written: a temporary file in the same folder,
    flushed to disk, then renamed over `path` (os.replace is atomic)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=TEMP_SUFFIX)
    try:
        os.fchmod(fd, 0o666 & ~_UMASK)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def remove_stale_temporaries(folder: Path) -> None:
    """Remove what a killed writer left in `folder` (only call it where no other run writes)."""
    if folder.is_dir():
        for tmp in folder.glob("*" + TEMP_SUFFIX):
            with contextlib.suppress(OSError):
                tmp.unlink()


def _dumps(data: dict) -> bytes:
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate from learner output: escape everything
        return (json.dumps(data, indent=2) + "\n").encode("ascii")


def write_json(data: dict, path: Path) -> None:
    write_atomic(Path(path), _dumps(data))


def read_extra(path: Path) -> dict:
    """The `extra_data` of a batch result file ({} when there is none or it is unreadable)."""
    try:
        data = json.loads(Path(path).read_bytes())
    except (OSError, ValueError):
        return {}
    extra = data.get("extra_data") if isinstance(data, dict) else None
    return extra if isinstance(extra, dict) else {}


_SPACE = r"[\s\u180e\u200b-\u200d\u2060\ufeff]"
"""A character a spreadsheet may skip before a formula: every Unicode space (Python's `\\s`: ASCII
whitespace, NEL, no-break, Ogham, the U+2000 spaces, line and paragraph separators, ideographic)
and the zero-width ones (ZWSP, ZWNJ, ZWJ, word joiner, BOM, Mongolian vowel separator)."""
_FORMULA = re.compile(r"(?:^|(?<=[;,|\t]))(?=[\t\r]|" + _SPACE + r"*[=+\-@\uff1d\uff0b\uff0d\uff20])")
"""Where a spreadsheet cell could begin with a formula: the start of the text, and after each
field separator a spreadsheet may split on instead of the comma (`;` in many locales, tab, `|`),
when what follows is = + - @ or their fullwidth forms ＝ ＋ － ＠ after any run of whitespace, or
a tab or a carriage return."""


def spreadsheet_safe(value):
    """A CSV cell a spreadsheet shows as the text it is: text beginning with = + - @ (or ＝ ＋ －
    ＠), also after leading whitespace of any kind (` =HYPERLINK(...)`), or with a tab or a
    carriage return (OWASP's CSV injection rule) gets a leading single quote, in front of the
    whitespace, and so does every such part after a `;`, `,`, `|` or tab (`x; =1+2` ->
    `x;' =1+2`, inert where `;` separates fields); numbers stay numbers. Quoting of commas,
    quotes and newlines is left to the csv module."""
    if isinstance(value, str):
        return _FORMULA.sub("'", value)
    return value


def spreadsheet_cell(value):
    """One cell of a CSV the pack writes (every writer goes through this: grades.csv of the batch
    grader, `nbgrader export`): None as an empty cell, a number as it is, anything else as its
    text, with characters that cannot be written as UTF-8 (a folder name's undecodable bytes)
    replaced, then `spreadsheet_safe`."""
    if value is None:
        return ""
    if isinstance(value, (int, float)):
        return value
    text = value if isinstance(value, str) else str(value)
    return spreadsheet_safe(text.encode("utf-8", "surrogateescape").decode("utf-8", "replace"))


def write_grades_csv(rows: list[tuple[str, str, float, float]], path: Path) -> None:
    buffer = io.StringIO()
    writer = csv.writer(buffer)  # \r\n: a field holding a lone \r or \n is quoted
    writer.writerow(["student", "assignment", "score", "max_score"])
    for student, assignment, score, max_score in rows:
        writer.writerow([spreadsheet_cell(student), spreadsheet_cell(assignment), f"{score:g}",
                         f"{max_score:g}"])
    write_atomic(Path(path), buffer.getvalue().encode("utf-8"))


def result_rows(out: Path) -> list[tuple[str, str, float, float]]:
    """(student, assignment, score, max_score) of every DIR/<student>/<assignment>.json."""
    rows = []
    for path in sorted(Path(out).glob("*/*.json")):
        try:
            data = json.loads(path.read_bytes())
            rows.append((path.parent.name, path.stem, float(data["score"]),
                         float(data["max_score"])))
        except (OSError, ValueError, KeyError, TypeError):
            print(f"warning: {path}: not a readable result file; left out of grades.csv",
                  file=sys.stderr)
    return rows


def rebuild_grades_csv(out: Path) -> int:
    """Write DIR/grades.csv from the result files in DIR; returns its number of rows.

    Runs that share DIR (shards of one batch) take turns through a lock file, and each reads the
    result files after taking it, so the last run to finish leaves a grades.csv listing all."""
    import fcntl
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / ".grades.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for tmp in out.glob("grades.csv.*" + TEMP_SUFFIX):
            with contextlib.suppress(OSError):
                tmp.unlink()
        rows = result_rows(out)
        write_grades_csv(rows, out / "grades.csv")
    return len(rows)


def summary_lines(results: list[TestResult]) -> list[str]:
    """Plain-text lines for a terminal or a notebook cell."""
    lines = []
    for r in results:
        mark = "ok  " if r.passed else "FAIL"
        lines.append(f"{mark} {r.score:g}/{r.max_score:g}  {r.name}")
        if r.output:
            lines.extend("       " + line for line in r.output.splitlines())
    return lines

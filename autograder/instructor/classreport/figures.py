"""The class report's figures, each a PNG as a data URI (`data:image/png;base64,...`) for the page
to embed: scores per assignment, pass rate per graded function, the most frequent mistakes and the
slowest notebooks. matplotlib is imported when a figure is drawn (Agg: no display needed).
"""

from __future__ import annotations

import base64
import io
import statistics
import textwrap
from collections import defaultdict

from autograder.instructor.classreport.tally import Mistake, Result, assignment_order

PASSED, FAILED, MISSING = "#3a8f5c", "#e08a2e", "#b9bec5"


def _png(fig) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    import matplotlib.pyplot as plt
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    plt.rcParams.update({"font.size": 10, "axes.spines.top": False, "axes.spines.right": False,
                         "axes.titlesize": 11})
    return plt


def figure_scores(results: list[Result]) -> str:
    plt = _plt()
    by = defaultdict(list)
    for r in results:
        by[r.assignment].append(r)
    names = assignment_order(by)
    cols = min(4, len(names))
    rows = -(-len(names) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(2.8 * cols + 0.6, 2.4 * rows + 0.3),
                             squeeze=False, constrained_layout=True)
    for ax in axes.flat[len(names):]:
        ax.axis("off")
    for ax, a in zip(axes.flat, names):
        top = max((r.max_score for r in by[a]), default=0) or 1
        scores = [r.score for r in by[a]]
        edges = [x - 0.5 for x in range(int(top) + 2)] if top <= 30 else 15
        ax.hist(scores, bins=edges, color="#4a78b5", edgecolor="white")
        ax.set_xlim(-0.7, top + 0.7)
        ax.set_title(f"{a}\n{len(scores)} notebooks, mean {statistics.mean(scores):.1f} / {top:g}",
                     fontsize=9)
        ax.set_xlabel("score")
        ax.yaxis.get_major_locator().set_params(integer=True)
        ax.xaxis.get_major_locator().set_params(integer=True)
    axes[0][0].set_ylabel("notebooks")
    return _png(fig)


def figure_functions(rows) -> str:
    plt = _plt()
    labels = [f"{f}  ({a[:2]})" for a, f, *_ in rows]
    totals = [max(1, p + f + m) for _, _, p, f, m in rows]
    passed = [p / t for (_, _, p, _, _), t in zip(rows, totals)]
    failed = [f / t for (_, _, _, f, _), t in zip(rows, totals)]
    missing = [m / t for (_, _, _, _, m), t in zip(rows, totals)]
    fig, ax = plt.subplots(figsize=(9, 0.32 * len(rows) + 1.2), constrained_layout=True)
    y = list(range(len(rows)))
    ax.barh(y, passed, color=PASSED, label="passed")
    ax.barh(y, failed, left=passed, color=FAILED, label="failed")
    ax.barh(y, missing, left=[p + f for p, f in zip(passed, failed)], color=MISSING,
            label="not written")
    for i, p in enumerate(passed):
        ax.text(0.01, i, f"{p:.0%}", va="center", ha="left", color="white", fontsize=8,
                fontweight="bold")
    ax.set_yticks(y, labels)
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.xaxis.set_major_formatter(plt.matplotlib.ticker.PercentFormatter(1.0))
    ax.set_xlabel("share of graded notebooks")
    ax.legend(loc="lower right", bbox_to_anchor=(1, 1), ncol=3, frameon=False)
    return _png(fig)


def figure_mistakes(top: list[Mistake]) -> str:
    plt = _plt()
    labels = [f"{i}. {m.function}: {textwrap.shorten(m.hint, 58, placeholder='…')}"
              for i, m in enumerate(top, 1)]
    fig, ax = plt.subplots(figsize=(9, 0.34 * len(top) + 1.0), constrained_layout=True)
    counts = [len(m.students) for m in top]
    ax.barh(range(len(top)), counts, color="#c0504d")
    ax.set_yticks(range(len(top)), labels, fontsize=8.5)
    ax.invert_yaxis()
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_xlabel("notebooks that received the hint")
    return _png(fig)


def figure_slowest(slow: list[Result]) -> str:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(9, 0.32 * len(slow) + 1.0), constrained_layout=True)
    ax.barh(range(len(slow)), [r.seconds for r in slow], color="#7a6bb0")
    ax.set_yticks(range(len(slow)), [f"{r.student} / {r.assignment}" for r in slow], fontsize=8.5)
    ax.invert_yaxis()
    ax.set_xlabel("seconds of hidden tests")
    return _png(fig)

"""Each sample submission gets exactly the per-function scores and messages its scenario states."""

from __future__ import annotations

from collections import defaultdict

import pytest

from conftest import SCENARIOS


def by_function(results):
    scores, maxima, messages = defaultdict(float), defaultdict(float), defaultdict(list)
    for r in results:
        if r.manual:
            continue
        scores[r.function] += r.score
        maxima[r.function] += r.max_score
        if r.output:
            messages[r.function].append(r.output)
    return scores, maxima, messages


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: f"{s.assignment}/{s.student}")
def test_scenario(scenario, graded):
    g = graded[(scenario.student, scenario.assignment)]
    assert g.error is None, g.error
    assert not [r.internal_error for r in g.results if r.internal_error], "a hidden test broke"
    scores, maxima, messages = by_function(g.results)
    # Functions a scenario does not mention must keep full marks.
    expected = {f: scenario.expect.get(f, maxima[f]) for f in maxima}
    assert dict(scores) == expected, "\n".join(
        f"{r.name}: {r.score}/{r.max_score} {r.output}" for r in g.results if not r.passed)
    for function, phrases in scenario.messages.items():
        text = "\n".join(messages[function])
        for phrase in phrases:
            assert phrase in text, f"{function}: no message mentions {phrase!r}:\n{text}"


def test_every_assignment_has_solution_and_unanswered_samples():
    built = {s.assignment for s in SCENARIOS}
    for assignment in built:
        names = {s.student for s in SCENARIOS if s.assignment == assignment}
        assert {"solution", "unanswered"} <= names, assignment


def test_solution_full_marks_and_unanswered_zero(graded):
    for (student, assignment), g in graded.items():
        score = sum(r.score for r in g.autograded)
        max_score = sum(r.max_score for r in g.autograded)
        if student == "solution":
            assert score == max_score > 0, assignment
        if student == "unanswered":
            assert g.score == 0 and max_score > 0, assignment

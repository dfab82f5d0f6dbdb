"""pytest plugin: parametrise hidden tests over submissions and collect scored results."""

from __future__ import annotations

import functools
import gc
import importlib
import importlib.metadata
import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from autograder.grade.submission import Submission
from autograder.jail.sandbox import JailBroken, Sandbox
from autograder.grade.student import Student

TESTS = Path(__file__).resolve().parent.parent / "tests"


class AuthoringError(Exception):
    """A hidden test is broken (not the learner's fault); the message names it."""


@dataclass
class TestResult:
    """One hidden test's outcome for one submission."""

    function: str
    """The graded function (or written-answer cell id) the test checks."""
    name: str
    """"function: what is checked", as shown to the learner."""
    max_score: float
    score: float
    output: str
    """The learner-facing message ("" when passed)."""
    visible: bool
    """True when the test mirrors a check the learner can see in the notebook."""
    manual: bool = False
    """A written answer: 0 here, graded by hand in nbgrader's formgrader."""
    internal_error: str = ""
    """For the operator: the test itself broke (not the learner's fault); scored 0."""
    review: bool = False
    """A flag for the instructor (autograder/rules/review.py): 0 points, never shown to the learner."""

    @property
    def passed(self) -> bool:
        return self.score == self.max_score and not self.review


def _marker(item) -> tuple[str, float, bool]:
    mark = item.get_closest_marker("graded")
    if mark is None or not mark.args:
        raise AuthoringError(f"{item.nodeid}: hidden test without @pytest.mark.graded(function, points=...)")
    return mark.args[0], float(mark.kwargs.get("points", 1)), bool(mark.kwargs.get("visible", False))


class GraderPlugin:
    def __init__(self, submissions: list[Submission], only: set[str] | None = None):
        self.submissions = submissions
        self.only = only
        self.results: dict[str, list[TestResult]] = {s.key: [] for s in submissions}
        self.broken: JailBroken | None = None
        """Set when the jail failed: run_tests raises it rather than score anything."""
        self.seconds: dict[str, float] = {s.key: 0.0 for s in submissions}
        """Seconds each submission took: its tests' setup, call and teardown (its sandbox too)."""

    def pytest_configure(self, config):
        config.addinivalue_line("markers", "graded(function, points=1, visible=False): a scored hidden test")

    def pytest_generate_tests(self, metafunc):
        if "student" in metafunc.fixturenames:
            assignment = getattr(metafunc.module, "ASSIGNMENT", None)
            subs = [s for s in self.submissions if s.assignment.id == assignment]
            metafunc.parametrize("student", subs, ids=[s.key for s in subs], indirect=True,
                                 scope="module")

    def pytest_collection_modifyitems(self, config, items):
        keep = []
        for item in items:
            function = _marker(item)[0]
            if self.only is None or function in self.only:
                keep.append(item)
            # What failed is said by our own message (_record); pytest's report of it would
            # parse the test module's source for every failed test (about 1 ms each).
            item.repr_failure = _exception_only
        items[:] = keep

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item):
        """A by-hand function written outside its subset of Python fails its tests unrun."""
        submission = getattr(item, "callspec", None) and item.callspec.params.get("student")
        refused = dict(getattr(submission, "refused", ()))
        function = _marker(item)[0]
        if function in refused:
            pytest.fail(refusal_message(submission, function, refused[function]), pytrace=False)

    @pytest.fixture(scope="module")
    def student(self, request):
        submission = request.param
        with Sandbox(list(submission.cells), warm=submission.assignment.warm,
                     cutoffs=dict(submission.cutoffs),
                     programs=dict(submission.programs)) as sandbox:
            yield Student(request.param, sandbox, getattr(request.module, "REFERENCES", None))

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        report = outcome.get_result()
        key = getattr(item, "callspec", None) and getattr(item.callspec.params.get("student"), "key", None)
        if key in self.seconds:
            self.seconds[key] += report.duration
        if call.when == "call" or (call.when == "setup" and report.outcome != "passed"):
            self._record(item, call, report)

    def _record(self, item, call, report):
        function, points, visible = _marker(item)
        submission = item.callspec.params["student"]
        doc = (item.function.__doc__ or item.name).strip().splitlines()[0]
        message, internal = "", ""
        if report.outcome != "passed":
            error = call.excinfo.value if call.excinfo else None
            if isinstance(error, JailBroken):
                self.broken = error
            if isinstance(error, (AssertionError, pytest.fail.Exception)):
                message = str(getattr(error, "msg", None) or error)
            else:
                message = ("The grader could not check this (internal error); your instructor "
                           "has been told.")
                internal = f"{item.nodeid}: {call.excinfo.exconly() if call.excinfo else report.outcome}"
        self.results[submission.key].append(TestResult(
            function, f"{function}: {doc}", points, points if report.outcome == "passed" else 0.0,
            message, visible, internal_error=internal))


def refusal_message(submission: Submission, function: str, refusals) -> str:
    """What the learner reads when their by-hand function uses what its exercise does not allow."""
    from autograder.course import subset_rules
    from autograder.rules.subset import refusal_message as message
    return message(function, list(refusals), subset_rules(submission.assignment, function).instead)


def _exception_only(excinfo, style=None) -> str:
    return excinfo.exconly()


@functools.lru_cache(maxsize=1)
def _unused_plugins() -> tuple[str, ...]:
    """`-p no:NAME` for pytest's plugins the hidden tests do not use, and for every installed
    third-party plugin (anyio, hypothesis's, ...): each hook call visits every plugin, and a
    batch makes tens of thousands (the logging plugin alone added and removed a log handler 4,000
    times per notebook)."""
    off = ["cacheprovider", "terminal", "unraisableexception", "threadexception", "logging",
           "junitxml", "doctest", "pastebin", "stepwise", "faulthandler", "setuponly",
           "setupplan", "unittest", "legacypath", "tmpdir", "monkeypatch", "recwarn"]
    off += [ep.name for ep in importlib.metadata.entry_points(group="pytest11")]
    return tuple(arg for name in off for arg in ("-p", f"no:{name}"))


_settled = False


def settle() -> None:
    """Once per process, when torch and the grader are imported: move what is alive into the
    collector's permanent generation. Those objects live as long as the process; without this,
    every full collection while grading walks torch's whole heap again (about 0.4 s of a cold
    grade of 3 s). Later calls leave the collector alone: what grading leaves behind is freed."""
    global _settled
    if not _settled:
        gc.freeze()
        _settled = True


def run_tests(submissions: list[Submission], only: set[str] | None = None) -> GraderPlugin:
    """Run the hidden tests of each submission's assignment; results are in `.results`."""
    if not submissions:
        return GraderPlugin([])
    plugin = GraderPlugin(submissions, only)
    # What grading these assignments imports lazily (course.py `warm`: torch._dynamo for
    # torch.optim, sympy's symbolic shapes for autograd with a given gradient), imported here
    # and now: a single grade does it while the jailed server starts up (which imports them too)
    # instead of halfway through its tests.
    for module in sorted({m for s in submissions for m in s.assignment.warm}):
        importlib.import_module(module)
    settle()
    modules = sorted({str(TESTS / f"test_{s.assignment.id}.py") for s in submissions})
    # Start-up cost, paid by every single-notebook grade: --assert=plain, as the hidden tests fail
    # through expect_*/fail with their own messages, never a bare assert, so rewriting (about
    # 1.7 s, hypothesis's modules included) buys nothing; no unraisableexception plugin, whose
    # forced garbage collections cost about 0.3 s (warnings are ignored anyway).
    args = [*_unused_plugins(), "--assert=plain", "-c", os.devnull,
            "--rootdir", str(TESTS), "-W", "ignore", *modules]
    code = pytest.main(args, plugins=[plugin])
    if plugin.broken is not None:
        raise plugin.broken
    if code not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
        raise AuthoringError(f"hidden tests in {', '.join(modules)} did not run "
                             f"(pytest exit code {int(code)}); run pytest on them to see why")
    return plugin

"""Command line: `python -m autograder grade ...` (see README)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m autograder", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    grade = commands.add_parser("grade", help="grade a notebook, or a submitted/ folder")
    grade.add_argument("path", type=Path, help="a notebook, or submitted/<student>/<assignment>/")
    grade.add_argument("--json", type=Path, help="(notebook) write Gradescope results.json here")
    grade.add_argument("--out", type=Path, help="(folder) write <student>/<assignment>.json and grades.csv here")
    grade.add_argument("--jobs", type=int, help="(folder) worker processes (default: usable cores)")
    grade.add_argument("--shard", metavar="K/N",
                       help="(folder) grade only the K-th of N shares of the students (see docs/batch.md)")
    grade.add_argument("--force", action="store_true",
                       help="(folder) grade again even the notebooks whose result in --out is current")
    grade.add_argument("--only", action="append", metavar="FUNCTION",
                       help="grade only the tests of this function (repeatable)")
    grade.add_argument("--quiet", action="store_true", help="print only the total")
    grade.add_argument("--no-jail", action="store_true",
                       help="run learner code without the jail (only code you trust: it gets "
                            "your rights, files and network)")
    build = commands.add_parser("build", help="(instructor) regenerate release/ and solutions/")
    build.add_argument("assignments", nargs="*", help="assignment ids (default: all with a source notebook)")
    demo = commands.add_parser("demo", help="(instructor) the nbgrader pipeline on the sample submissions")
    demo.add_argument("assignments", nargs="*", help="assignment ids (default: all with a source notebook)")
    demo.add_argument("--jobs", type=int, help="worker processes for the grader")
    demo.add_argument("--all", action="store_true", dest="every",
                      help="every sample submission (default: a share covering every function)")
    gradescope = commands.add_parser("gradescope", help="(instructor) write a Gradescope autograder zip")
    gradescope.add_argument("assignment", help="assignment id, e.g. 01_linear_algebra")
    gradescope.add_argument("--out", type=Path, default=Path("autograder.zip"),
                            help="the zip to write (default: autograder.zip)")
    gradescope.add_argument("--torch-index-url", default="", metavar="URL",
                            help="the package index setup.sh installs torch from (PyTorch's "
                                 "CPU-only wheel index for the small CPU build)")
    gradescope.add_argument("--no-jail", action="store_true",
                            help="grade without the jail on Gradescope (only if its container "
                                 "cannot build one: learner code then gets the grader's rights)")
    learner = commands.add_parser(
        "learner-config", help="(instructor) the nbgrader_config.py learners need for the exchange")
    learner.add_argument("--exchange", required=True, metavar="PATH",
                         help="the exchange folder as the learners' JupyterLab sees it, e.g. "
                              "/srv/nbgrader/exchange")
    learner.add_argument("--course-id", metavar="ID",
                         help="default: the course id of this course's nbgrader_config.py")
    learner.add_argument("--out", type=Path, required=True, metavar="DIR",
                         help="write DIR/nbgrader_config.py")
    learner.add_argument("--force", action="store_true", help="replace DIR/nbgrader_config.py")
    report = commands.add_parser("report", help="(instructor) an HTML class report of a batch")
    report.add_argument("dir", type=Path, help="a batch's --out DIR (<student>/<assignment>.json)")
    report.add_argument("--out", type=Path, help="write REPORT_DIR/index.html (default: DIR/report)")
    similarity = commands.add_parser(
        "similarity", help="(instructor) which learners handed in alike answers (an HTML page)")
    similarity.add_argument("dir", type=Path, help="nbgrader's submitted/ or autograded/ folder")
    similarity.add_argument("--out", type=Path, required=True, metavar="OUT",
                            help="write OUT/index.html and OUT/pairs.csv")
    similarity.add_argument("--threshold", type=float, metavar="SHARE",
                            help="similarity from which a pair is reported (default 0.45)")
    similarity.add_argument("--results", type=Path, metavar="RESULTS",
                            help="a batch's --out folder: pairs of answers that both passed "
                                 "their hidden tests rank below the same mistake")
    tutorial = commands.add_parser(
        "tutorial", help="(instructor) the course as one PyTorch tutorial (a sphinx-gallery script, see "
                         "docs/tutorial.md)")
    tutorial.add_argument("--out", type=Path, metavar="DIR",
                          help="write DIR/training_loop_math_tutorial.py")
    tutorial.add_argument("--html", action="store_true",
                          help="also build it as pytorch.org does (Sphinx, sphinx-gallery) into DIR/site/_build/html")
    tutorial.add_argument("--pr", type=Path, metavar="DIR",
                          help="write the files of a pull request to pytorch/tutorials under DIR: "
                               "beginner_source/, the thumbnail, the index.rst entries")
    return parser


def _error(message: str, code: int = 2) -> int:
    print(f"error: {message}", file=sys.stderr)
    return code


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "build":
        from autograder.instructor.build import build
        return build(args.assignments)
    if args.command == "demo":
        from autograder.instructor.demo import demo
        return demo(args.assignments, args.jobs, args.every)
    if args.command == "gradescope":
        from autograder.instructor.gradescope import build as gradescope
        return gradescope(args.assignment, args.out, args.torch_index_url, not args.no_jail)
    if args.command == "learner-config":
        from autograder.instructor.learner_config import main as learner_config
        return learner_config(args.exchange, args.out, args.course_id, args.force)
    if args.command == "report":
        from autograder.instructor.classreport.page import write_report
        return write_report(args.dir, args.out)
    if args.command == "similarity":
        from autograder.similarity.run import main as similarity
        return similarity(args.dir, args.out, args.threshold, args.results)
    if args.command == "tutorial":
        from autograder.tutorial.make import TutorialError
        from autograder.tutorial.publish import main as tutorial
        if not (args.out or args.pr) or (args.html and not args.out):
            return _error("tutorial: give --out DIR (with --html to build the page) or --pr DIR, or both")
        try:
            return tutorial(args.out, args.html, args.pr)
        except TutorialError as error:
            return _error(str(error))
    try:
        args.shard = _shard(args.shard)
    except ValueError as error:
        return _error(str(error))
    if (args.shard or args.force) and not args.path.is_dir():
        return _error("--shard and --force apply to grading a folder (with --out DIR)")
    from autograder.jail import jailer
    jailer.configure(jailed=not args.no_jail)
    if args.no_jail:
        print("warning: --no-jail: learner code runs with your rights, files and network",
              file=sys.stderr)
    else:
        try:
            jailer.check()
        except jailer.JailUnavailable as error:
            return _error(str(error))
    from autograder.jail.jailer import warm_up
    if not args.path.is_dir():  # a batch's workers start their own (jailer.check() ran above)
        warm_up(_warm(args.path))
    if args.path.is_dir():  # the batch's main process does not import torch: its workers do
        return _grade_folder(args)
    from autograder.grade.submission import NotGradable
    from autograder.grade.plugin import AuthoringError
    from autograder.jail.sandbox import JailBroken
    try:
        return _grade_one(args)
    except NotGradable as error:
        return _error(str(error))
    except (AuthoringError, JailBroken) as error:
        return _error(f"the grader itself is broken: {error}", 3)


def _warm(path: Path) -> tuple[str, ...]:
    """What the jailed server should import at start for this notebook's assignment."""
    from autograder.grade.submission import NotGradable, read_cells, recognise
    try:
        assignment = recognise(read_cells(path))
    except NotGradable:
        return ()  # said when the notebook is graded
    return assignment.warm if assignment else ()


def _warn_internal(graded, seen: set | None = None) -> None:
    seen = set() if seen is None else seen
    errors = sorted({r.internal_error for g in graded for r in g.results if r.internal_error})
    for error in errors:
        if error not in seen:
            seen.add(error)
            print(f"warning: a hidden test broke (scored 0; not the learner's fault): {error}",
                  file=sys.stderr)


def _shard(text: str | None) -> tuple[int, int] | None:
    """`K/N` with 1 <= K <= N, or ValueError with the reason."""
    if text is None:
        return None
    k, sep, n = text.partition("/")
    if not (sep and k.strip().isdigit() and n.strip().isdigit()):
        raise ValueError(f"--shard {text!r}: expected K/N, e.g. --shard 2/8")
    k, n = int(k), int(n)
    if not 1 <= k <= n:
        raise ValueError(f"--shard {text}: K must be between 1 and N (1 <= K <= {n})")
    return k, n


def _grade_one(args) -> int:
    from autograder.grade import results as report
    from autograder.grade.batch import grade_notebook
    graded = grade_notebook(args.path, set(args.only) if args.only else None)
    _warn_internal([graded])
    if args.json:
        report.write_json(report.results_json(graded.results), args.json)
    if not args.quiet:
        _print(f"{args.path}  ({graded.assignment})")
        for line in report.summary_lines(graded.results):
            _print(line)
    print(f"score: {graded.score:g} / {graded.max_score:g}")
    return 0


def _print(line: str) -> None:
    """One line on stdout, whatever the learner put in a message (a lone surrogate...)."""
    sys.stdout.write(line.encode("utf-8", "backslashreplace").decode("utf-8") + "\n")
    sys.stdout.flush()


def _grade_folder(args) -> int:
    """Grade a submitted/ folder into --out, resuming from the current results there."""
    from tqdm import tqdm

    from autograder.grade.batch import grade_batch
    from autograder.grade.submission import find_submissions
    if args.out is None:
        return _error("grading a folder needs --out DIR")
    shard = args.shard
    if not find_submissions(args.path):
        return _error(f"{args.path}: no <student>/<assignment>/*.ipynb submissions found")
    bar, seen, broke = None, set(), []

    def start(count: int) -> None:
        nonlocal bar
        bar = tqdm(total=count, unit="notebook", file=sys.stderr, disable=count == 0)

    def done(task, g) -> None:
        _warn_internal([g], seen)
        if g.operator:
            broke.append(task)
            tqdm.write(f"warning: {task.path} broke the grader (scored 0, graded again next "
                       f"run): {g.operator}", file=sys.stderr)
        if not args.quiet:
            note = f"  ({g.error})" if g.error else ""
            tqdm.write(f"graded {task.student:24} {task.assignment:26} {g.score:6g} / "
                       f"{g.max_score:g}{note}".encode("utf-8", "backslashreplace").decode(),
                       file=sys.stdout)
        bar.update(1)

    batch = grade_batch(args.path, args.out, jobs=args.jobs, shard=shard, force=args.force,
                        only=set(args.only) if args.only else None, on_result=done, on_start=start)
    bar.close()
    share = f" (share {shard[0]}/{shard[1]}: {len(batch.tasks)} notebooks)" if shard else ""
    _print(f"graded {len(batch.graded)} notebooks, {batch.current} already current{share}"
           + (f", {len(broke)} broke the grader" if broke else "")
           + f"; grades in {args.out / 'grades.csv'}")
    return 0

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
    grade.add_argument("--only", action="append", metavar="FUNCTION",
                       help="grade only the tests of this function (repeatable)")
    grade.add_argument("--quiet", action="store_true", help="print only the total")
    build = commands.add_parser("build", help="(instructor) regenerate release/ and solutions/")
    build.add_argument("assignments", nargs="*", help="assignment ids (default: all with a source notebook)")
    demo = commands.add_parser("demo", help="(instructor) the nbgrader pipeline on the sample submissions")
    demo.add_argument("assignments", nargs="*", help="assignment ids (default: all with a source notebook)")
    demo.add_argument("--jobs", type=int, help="worker processes for the grader")
    demo.add_argument("--all", action="store_true", dest="every",
                      help="every sample submission (default: a share covering every function)")
    return parser


def _error(message: str, code: int = 2) -> int:
    print(f"error: {message}", file=sys.stderr)
    return code


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "build":
        from autograder.build import build
        return build(args.assignments)
    if args.command == "demo":
        from autograder.demo import demo
        return demo(args.assignments, args.jobs, args.every)
    from autograder.server import warm_up
    warm_up()
    from autograder.notebook import NotGradable
    from autograder.plugin import AuthoringError
    try:
        if args.path.is_dir():
            return _grade_folder(args)
        return _grade_one(args)
    except NotGradable as error:
        return _error(str(error))
    except AuthoringError as error:
        return _error(f"the grader itself is broken: {error}", 3)


def _warn_internal(graded) -> None:
    errors = sorted({r.internal_error for g in graded for r in g.results if r.internal_error})
    for error in errors:
        print(f"warning: a hidden test broke (scored 0; not the learner's fault): {error}",
              file=sys.stderr)


def _grade_one(args) -> int:
    from autograder import report
    from autograder.grading import grade_notebook
    graded = grade_notebook(args.path, set(args.only) if args.only else None)
    _warn_internal([graded])
    if args.json:
        report.write_json(report.results_json(graded.results), args.json)
    if not args.quiet:
        print(f"{args.path}  ({graded.assignment})")
        print("\n".join(report.summary_lines(graded.results)))
    print(f"score: {graded.score:g} / {graded.max_score:g}")
    return 0


def _grade_folder(args) -> int:
    from autograder import report
    from tqdm import tqdm

    from autograder.grading import grade_folder
    from autograder.notebook import find_submissions
    if args.out is None:
        return _error("grading a folder needs --out DIR")
    total = len(find_submissions(args.path))
    if total == 0:
        return _error(f"{args.path}: no <student>/<assignment>/*.ipynb submissions found")
    with tqdm(total=total, unit="notebook", file=sys.stderr) as bar:
        graded = grade_folder(args.path, args.jobs, progress=bar.update)
    _warn_internal(graded)
    rows = []
    for g in graded:
        report.write_json(report.results_json(g.results, error=g.error),
                          args.out / g.student / f"{g.assignment}.json")
        rows.append((g.student, g.assignment, g.score, g.max_score))
        if not args.quiet:
            note = f"  ({g.error})" if g.error else ""
            print(f"{g.student:24} {g.assignment:26} {g.score:6g} / {g.max_score:g}{note}")
    report.write_grades_csv(rows, args.out / "grades.csv")
    print(f"graded {len(graded)} notebooks; grades in {args.out / 'grades.csv'}")
    return 0

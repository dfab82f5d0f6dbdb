"""Print where grading time goes; every figure is measured in this one run.

    python bench/speed.py [--n 12] [--repeat 3] [--class-size 200] [--nbgrader 01_linear_algebra ...]
    python bench/speed.py --nbgrader-only [--n 12] [--nbgrader 01_linear_algebra ...]

* `import torch`: `python -c "import torch"`, the least any grader that runs torch pays.
* cold start: `python -m autograder grade NOTEBOOK --json`, one process for one notebook
  (what Gradescope and the hidden-test path pay); for an assignment whose children import
  more on top of torch (course.py `warm`, e.g. torch._dynamo for torch.optim), also its ratio
  to `python -c "import torch, MODULE"`.
* floor, per assignment: what grading one notebook cannot avoid, without the jail or any
  process boundary: a fork of a warm process that runs the answer cells, plus the hidden
  tests' own computation run in-process (cells run once per graded function, as the grader
  does, and the same pytest tests): the seconds pytest reports for each notebook's tests
  (setup, call, teardown) over 2N notebooks in one warm process, the median of --repeat runs.
* isolated: the floor plus a bare fork (fork, exit, reap) of the same warm process for each
  graded function beyond the first: the least the grader's process model costs, a process per
  graded function, since one that crashes or poisons its process may cost only its own points.
* marginal, per assignment: `grade DIR --out OUT --jobs 1` over 2N notebooks, one core's cost
  of one more notebook, start-up excluded: the time from the first chunk's results to the last
  result, per notebook graded in between (result files' times); the median of --repeat runs.
* batch: a class of --class-size notebooks (all assignments) on every core, start-up included.
* nbgrader: `nbgrader autograde` on the N notebooks of the assignments given by --nbgrader, per
  notebook (start-up included): nbgrader alone (stock: no pack preprocessors, an unjailed
  kernel), this course's config one notebook at a time with a fresh jailed kernel each (fresh
  serial: the course's autograde before it forked workers and kernels), one at a time with
  kernels forked warm, as it is (parallel), and with `execute=False`; ratios to fresh serial
  and stock, and to the marginal cost.
  `--nbgrader-only` prints only these.

Sample submissions (samples/*.toml) are cycled, leaving out the hostile ones (the in-process
floor would run them with this script's rights). One run on a loaded machine moves every
figure; compare figures within one run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _env() -> dict:
    return {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
            "PYTHONPATH": str(ROOT)}


def _timed(command: list[str], cwd: Path = ROOT, env: dict[str, str] | None = None) -> float:
    started = time.monotonic()
    subprocess.run(command, cwd=cwd, env={**_env(), **(env or {})}, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.monotonic() - started


def _median(command: list[str], runs: int = 3) -> float:
    return statistics.median(_timed(command) for _ in range(runs))


def _write_class(folder: Path, assignment: str, count: int, offset: int = 0) -> list[Path]:
    """`count` submissions of `assignment` under folder/<student>/<assignment>/."""
    import nbformat
    from autograder.course import ASSIGNMENTS
    from autograder.instructor.samples import load_scenarios, submission_notebook
    scenarios = [s for s in load_scenarios(assignment)
                 if not s.about.startswith("hostile") and s.nbgrader]
    paths = []
    for i in range(offset, offset + count):
        s = scenarios[i % len(scenarios)]
        path = folder / f"{i:04}_{s.student}" / assignment / ASSIGNMENTS[assignment].notebook
        path.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(submission_notebook(s), path)
        paths.append(path)
    return paths


# -- the floor, in a worker process of its own -------------------------------------------------

class InProcess:
    """Stands in for autograder.jail.sandbox.Sandbox: the learner's cells run here, no jail, no pipe."""

    def __init__(self, cells, cutoffs=None, **_):
        from autograder.jail.inside import child
        self.child = child
        self.answer = child._caller()   # what answers a call request in the jailed child
        self.cells = list(cells)
        self.cutoffs = cutoffs or {}
        self.spaces: dict[str, dict] = {}
        self.load_report = None

    def load(self):
        from autograder.jail.sandbox import LoadReport
        if self.load_report is None:
            namespace, errors = self.child.run_cells(self.cells)
            self.load_report = LoadReport(sorted(k for k, v in namespace.items()
                                                 if not k.startswith("__") and callable(v)), errors)
        return self.load_report

    def call(self, name, args=(), kwargs=None, references=None, driver=None):
        from autograder.jail.sandbox import _reply_from, call_request
        if name not in self.spaces:  # a fresh namespace per graded function, as the grader does
            self.spaces[name] = self.child.run_cells(self.cells[:self.cutoffs.get(name)])[0]
        request = call_request(name, args, kwargs, references, driver)
        return _reply_from(self.answer(self.spaces[name], request), args)

    def close(self):
        self.spaces.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def floor_worker(paths: list[Path], n: int, repeat: int) -> dict:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot  # noqa: F401 - as the jailed server does: setup cells import it
    import torch
    torch.set_num_threads(1)
    from autograder.grade import plugin
    from autograder.jail.inside import child
    from autograder.grade.submission import load_submission
    child.warm_up()
    plugin.Sandbox = InProcess
    subs = [load_submission(p, p.parent.parent.name) for p in paths]
    started = time.perf_counter()
    for s in subs[:n]:
        pid = os.fork()
        if pid == 0:
            child.run_cells(list(s.cells))
            os._exit(0)
        os.waitpid(pid, 0)
    fork = (time.perf_counter() - started) / n
    started = time.perf_counter()
    for _ in range(n):  # the process alone: fork, exit, reap
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
    bare = (time.perf_counter() - started) / n
    each = fork + bare * (len(subs[0].assignment.functions) - 1)
    plugin.run_tests(subs[:2 * n])  # warm up: pytest, the test module, lazy imports any sample triggers
    one, figures = None, []
    for _ in range(repeat):
        one = plugin.run_tests(subs[:2 * n])
        figures.append(sum(one.seconds.values()) / (2 * n))
    scores = {s.key.split("/")[0]: sum(r.score for r in one.results[s.key]) for s in subs[:n]}
    return {"fork": fork, "each": each, "tests": statistics.median(figures), "scores": scores}


def floor(paths: list[Path], n: int, repeat: int) -> dict:
    from autograder.jail.jailer import MALLOC  # forks as cheap as the jailed server's
    done = subprocess.run([sys.executable, __file__, "--floor-worker", str(n), str(repeat),
                           *map(str, paths)],
                          env={**_env(), **MALLOC, "MPLBACKEND": "Agg"}, capture_output=True, text=True,
                          check=True)
    return json.loads(done.stdout.splitlines()[-1])


# -- the real paths ----------------------------------------------------------------------------

def marginal(folder: Path, work: Path, repeat: int) -> tuple[float, dict]:
    """One core's cost of one more notebook: `grade DIR --jobs 1` over the 2N notebooks, timed by
    when each result file was written. The worker hands its results back a chunk at a time
    (grading.py), so the first chunk's results land together: from then to the last result,
    divided by the notebooks graded in between, excludes start-up without subtracting two runs."""
    out = work / "out"
    figures = []
    for _ in range(repeat):  # --force: the results of the earlier repeat are current
        _timed([sys.executable, "-m", "autograder", "grade", str(folder), "--out", str(out),
                "--jobs", "1", "--quiet", "--force"])
        written = sorted(p.stat().st_mtime for p in out.glob("*/*.json"))
        first = max(t for t in written if t - written[0] < 0.05)  # the first chunk's results
        later = [t for t in written if t > first]
        figures.append((written[-1] - first) / len(later))
    scores = {p.parent.name: json.loads(p.read_text())["score"] for p in out.glob("*/*.json")}
    return statistics.median(figures), scores


NBGRADER_MODES = {
    "stock": ("nbgrader alone (its own preprocessors, an unjailed kernel), one notebook at a time",
              {}),
    "fresh serial": ("this course's config, one notebook at a time, a fresh jailed kernel each",
                     {"AUTOGRADER_NBGRADER_JOBS": "1", "AUTOGRADER_WARM_KERNEL": "0"}),
    "warm serial": ("this course's config, one notebook at a time, kernels forked warm",
                    {"AUTOGRADER_NBGRADER_JOBS": "1"}),
    "parallel": ("this course's config as it is: on every core, kernels forked warm", {}),
    "execute=False": ("this course's config with execute=False (on every core)", {}),
}
"""mode -> (what it is, environment). "fresh serial" is this course's autograde before it
forked workers and warm kernels."""


def nbgrader(assignment: str, submitted: Path, work: Path, mode: str) -> float:
    """Seconds of one `nbgrader autograde` of the notebooks in `submitted`, in a fresh course."""
    course = work / f"course-{assignment}-{mode}"
    shutil.copytree(ROOT / "source" / assignment, course / "source" / assignment)
    config = (ROOT / "nbgrader_config.py").read_text()
    if mode == "stock":
        config = "c = get_config()  # noqa: F821\nc.CourseDirectory.course_id = 'bench'\n"
    if mode == "execute=False":
        config = config.replace("autograde_preprocessors(execute=True)",
                                "autograde_preprocessors(execute=False)")
        assert "execute=False" in config, "nbgrader_config.py no longer says execute=True"
    (course / "nbgrader_config.py").write_text(config)
    shutil.copytree(submitted, course / "submitted")
    _timed(["nbgrader", "generate_assignment", assignment, "--force", "--log-level=ERROR"], course)
    return _timed(["nbgrader", "autograde", assignment, "--log-level=ERROR"], course,
                  NBGRADER_MODES[mode][1])


def nbgrader_figures(assignment: str, submitted: Path, work: Path, n: int,
                     marginal_s: float | None = None) -> None:
    """Print every NBGRADER_MODES figure for the n notebooks in `submitted`."""
    seconds = {mode: nbgrader(assignment, submitted, work, mode) / n for mode in NBGRADER_MODES}
    for mode, (what, _) in NBGRADER_MODES.items():
        s = seconds[mode]
        versus = "" if mode in ("stock", "fresh serial") else (
            f", {seconds['fresh serial'] / s:.1f}x faster than fresh serial, "
            f"{seconds['stock'] / s:.1f}x than stock")
        against = f", {s / marginal_s:.0f}x the marginal cost" if marginal_s else ""
        print(f"  nbgrader autograde, {mode:13} {s:6.2f} s per notebook{versus}{against}  ({what})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=12, help="N, notebooks per assignment (default 12)")
    parser.add_argument("--class-size", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3,
                        help="pairs of T(N), T(2N) per floor and marginal figure (median)")
    parser.add_argument("--assignments", nargs="*", help="default: all")
    parser.add_argument("--nbgrader", nargs="*", default=["01_linear_algebra", "06_putting_it_together"],
                        help="assignments to run nbgrader autograde on (none: skip)")
    parser.add_argument("--nbgrader-only", action="store_true",
                        help="only the nbgrader figures, on N notebooks of each --nbgrader assignment")
    args = parser.parse_args()
    if args.nbgrader_only:
        with tempfile.TemporaryDirectory() as tmp:
            print(f"{len(os.sched_getaffinity(0))} cores, load average {os.getloadavg()[0]:.1f}; "
                  f"N = {args.n}")
            for a in args.nbgrader or []:
                print(a)
                _write_class(Path(tmp) / a / "n", a, args.n)
                nbgrader_figures(a, Path(tmp) / a / "n", Path(tmp) / a, args.n)
        return
    from autograder.course import ASSIGNMENTS
    assignments = args.assignments or [a for a in ASSIGNMENTS if ASSIGNMENTS[a].source.is_file()]
    n = args.n
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; N = {n}, "
          f"median of {args.repeat}")
    torch_s = _median([sys.executable, "-c", "import torch"])
    print(f"import torch                          {torch_s:6.2f} s")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        print(f"{'assignment':26} {'cold start':>10} {'ratio':>5} {'fork+cells':>10} {'tests':>7}"
              f" {'floor':>7} {'marginal':>9} {'ratio':>6} {'isolated':>9} {'ratio':>6}")
        for a in assignments:
            both = work / a / "2n"
            paths = _write_class(both, a, 2 * n)
            first = work / a / "n"
            for p in paths[:n]:
                shutil.copytree(p.parent.parent, first / p.parent.parent.name)
            solution = _write_class(work / a / "solution", a, 1)[0]
            cold = _median([sys.executable, "-m", "autograder", "grade", str(solution), "--json",
                            str(work / "r.json"), "--quiet"])
            f = floor(paths, n, args.repeat)
            m, scores = marginal(both, work / a, args.repeat)
            scores = {k: v for k, v in scores.items() if k in f["scores"]}
            assert scores == f["scores"], f"{a}: the in-process floor scored differently: {scores} vs {f['scores']}"
            total, isolated = f["fork"] + f["tests"], f["each"] + f["tests"]
            print(f"{a:26} {cold:8.2f} s {cold / torch_s:5.2f} {f['fork']:8.3f} s {f['tests']:5.3f} s"
                  f" {total:5.3f} s {m:7.3f} s {m / total:6.2f} {isolated:7.3f} s {m / isolated:6.2f}")
            warm = ASSIGNMENTS[a].warm
            if warm:  # what its children import on top of torch (course.py `warm`)
                least = _median([sys.executable, "-c", f"import torch, {', '.join(warm)}"])
                print(f"  its children need {', '.join(warm)} too: `import torch, "
                      f"{', '.join(warm)}` {least:.2f} s, cold start {cold / least:.2f}x that")
            if a in (args.nbgrader or []):
                nbgrader_figures(a, first, work, n, m)
        klass = work / "class"
        per = -(-args.class_size // len(assignments))
        count = 0
        for i, a in enumerate(assignments):
            count += len(_write_class(klass, a, min(per, args.class_size - count), offset=i * per))
        jobs = len(os.sched_getaffinity(0))
        seconds = _timed([sys.executable, "-m", "autograder", "grade", str(klass), "--out",
                          str(work / "out-class"), "--quiet"])
        print(f"a class of {count} notebooks ({len(assignments)} assignments) on {jobs} cores: "
              f"{seconds:.1f} s, {seconds / count:.3f} s per notebook")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--floor-worker"]:
        out = os.dup(1)
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # the learners' prints
        result = floor_worker([Path(p) for p in sys.argv[4:]], int(sys.argv[2]), int(sys.argv[3]))
        os.write(out, (json.dumps(result) + "\n").encode())
    else:
        main()

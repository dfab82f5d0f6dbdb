"""Batches (CONTRACT.md, "Batches, resumption and scale"): resume after kill -9, shards,
--force, a notebook in another assignment's folder, a submission that breaks the grader,
and written answers that never count as failed tests."""

from __future__ import annotations

import csv
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autograder.instructor.build import tool_env
from autograder.course import ASSIGNMENTS
from autograder.grade.plan import in_shard
from autograder.instructor.samples import write_submitted

A1, A2, A6 = "01_linear_algebra", "02_activation_functions", "06_putting_it_together"
ONLY = ["--only", "matmul", "--only", "relu"]
"""The kill test grades one cheap function per notebook: what it checks is the batch, not the tests."""

FAULTS = '''
import os
try:
    import autograder.grade.plugin as plugin
except Exception:  # noqa: BLE001 - e.g. inside the jail
    plugin = None
if plugin is not None:
    _run_tests = plugin.run_tests

    def run_tests(submissions, only=None):
        paths = " ".join(str(s.path) for s in submissions)
        if "kills_worker" in paths:
            os._exit(70)
        if "breaks_grader" in paths:
            raise RuntimeError("injected fault: this notebook breaks the grader")
        return _run_tests(submissions, only)

    plugin.run_tests = run_tests
'''
"""sitecustomize for the grader's processes: two submissions that break the grader itself, one
with an exception, one by killing its worker process."""


def env(**extra) -> dict[str, str]:
    # Other engineers edit the package while tests run: pin the grader version so that results
    # stay current between the runs of one test.
    return {**tool_env(), "AUTOGRADER_GRADER_VERSION": "test-batch", **extra}


def grade(*args, cwd: Path, **extra) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "autograder", "grade", *map(str, args)],
                          cwd=cwd, env=env(**extra), capture_output=True, text=True)


def summary(stdout: str) -> tuple[int, int]:
    """(graded, already current) from the batch's last line."""
    match = re.search(r"^graded (\d+) notebooks, (\d+) already current", stdout, re.M)
    assert match, stdout
    return int(match[1]), int(match[2])


def graded_lines(stdout: str) -> list[tuple[str, str]]:
    return [tuple(line.split()[1:3]) for line in stdout.splitlines()
            if line.startswith("graded ") and "notebooks," not in line]


def results(out: Path) -> dict[tuple[str, str], dict]:
    return {(p.parent.name, p.stem): json.loads(p.read_text()) for p in out.glob("*/*.json")}


def assert_grades_csv_matches(out: Path) -> list[dict]:
    with open(out / "grades.csv") as f:
        rows = list(csv.DictReader(f))
    files = results(out)
    assert {(r["student"], r["assignment"]) for r in rows} == set(files)
    assert len(rows) == len(files)
    for r in rows:
        data = files[(r["student"], r["assignment"])]
        assert (float(r["score"]), float(r["max_score"])) == (data["score"], data["max_score"])
    return rows


@pytest.fixture(scope="module")
def samples(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("batch_samples")
    write_submitted(root, [A1, A2, A6])
    return root


def notebook(samples: Path, student: str, assignment: str) -> Path:
    return samples / student / assignment / ASSIGNMENTS[assignment].notebook


def put(samples: Path, dest: Path, student: str, folder: str, sample: str, assignment: str,
        name: str | None = None) -> None:
    target = dest / student / folder / (name or ASSIGNMENTS[folder].notebook
                                        if folder in ASSIGNMENTS else name or "x.ipynb")
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(notebook(samples, sample, assignment), target)


# --- kill -9 and resume ---------------------------------------------------------------------

CLASS = 20
"""Students in the kill test, each with a 01 and a 02 notebook: 40 notebooks."""


@pytest.fixture(scope="module")
def resumed(samples, tmp_path_factory):
    """A batch killed with kill -9 at a (seeded) random moment once results appeared, then run
    again with the same arguments."""
    root = tmp_path_factory.mktemp("resume")
    sub, out = root / "submitted", root / "out"
    for i in range(CLASS):
        put(samples, sub, f"s{i:02d}", A1, ("solution", "unanswered", "bias_column")[i % 3], A1)
        put(samples, sub, f"s{i:02d}", A2, ("solution", "unanswered")[i % 2], A2)
    args = [sys.executable, "-m", "autograder", "grade", str(sub), "--out", str(out),
            "--jobs", "1", *ONLY]
    rng = random.Random(20261202)
    wait_for, extra = rng.randint(2, 10), rng.uniform(0.0, 2.0)
    with open(root / "run1.out", "w") as stdout, open(root / "run1.err", "w") as stderr:
        first = subprocess.Popen(args, cwd=root, env=env(), stdout=stdout, stderr=stderr,
                                 start_new_session=True)
        deadline = time.monotonic() + 240
        while len(list(out.glob("*/*.json"))) < wait_for and first.poll() is None:
            assert time.monotonic() < deadline, "no results appeared"
            time.sleep(0.05)
        time.sleep(extra)
        os.killpg(first.pid, signal.SIGKILL)  # the whole batch: main process and workers
        first.wait()
    killed = {p: p.read_bytes() for p in out.glob("*/*.json")}
    temporaries = list(out.rglob("*.tmp"))
    second = subprocess.run(args, cwd=root, env=env(), capture_output=True, text=True)
    return {"sub": sub, "out": out, "first": first, "killed": killed, "second": second,
            "temporaries": temporaries, "total": 2 * CLASS}


def test_killed_batch_resumes_grading_each_notebook_once(resumed):
    out, second, killed = resumed["out"], resumed["second"], resumed["killed"]
    assert resumed["first"].returncode == -signal.SIGKILL, "the batch finished before the kill"
    assert 0 < len(killed) < resumed["total"]
    for path, data in killed.items():  # never half-written
        json.loads(data)
    assert second.returncode == 0, second.stderr
    graded, current = summary(second.stdout)
    assert current == len(killed) and graded == resumed["total"] - len(killed)
    again = graded_lines(second.stdout)
    assert len(again) == len(set(again)) == graded
    before = {(p.parent.name, p.stem) for p in killed}
    assert not before & set(again), "a finished result was graded again"
    assert before | set(again) == set(results(out))
    assert len(results(out)) == resumed["total"]
    for path, data in killed.items():
        assert path.read_bytes() == data, f"{path} was rewritten"
    runs = {r["extra_data"]["run"] for r in results(out).values()}
    assert len(runs) == 2


def test_resumed_batch_leaves_no_temporary_and_a_matching_grades_csv(resumed):
    out = resumed["out"]
    assert not list(out.rglob("*.tmp"))
    rows = assert_grades_csv_matches(out)
    assert len(rows) == resumed["total"]
    for r in rows:
        if r["student"] in ("s00", "s06") and r["assignment"] == A1:  # the solution
            assert float(r["score"]) == float(r["max_score"]) > 0


# --- shards ---------------------------------------------------------------------------------

def test_shards_are_disjoint_cover_the_class_and_stay_put_when_students_join():
    students = [f"student{i}" for i in range(300)] + ["Zoë", "a b", "x" * 200]
    joined = students + [f"late{i}" for i in range(100)]
    for n in (1, 2, 3, 7):
        shares = [{s for s in students if in_shard(s, (k, n))} for k in range(1, n + 1)]
        assert sum(map(len, shares)) == len(students) and set().union(*shares) == set(students)
        if n > 1:
            assert all(len(share) > len(students) / n / 2 for share in shares)
        later = [{s for s in joined if in_shard(s, (k, n))} for k in range(1, n + 1)]
        for before, after in zip(shares, later):
            assert before == after & set(students)


def test_shard_argument_is_checked(tmp_path):
    (tmp_path / "submitted").mkdir()
    for bad in ("0/3", "4/3", "junk", "1/0", "2", "-1/3"):
        done = grade(tmp_path / "submitted", "--out", tmp_path / "out", f"--shard={bad}",
                     cwd=tmp_path)
        assert done.returncode != 0 and "--shard" in done.stderr, bad
        assert done.stderr.strip().count("\n") == 0, done.stderr
    assert not (tmp_path / "out").exists()


def test_shard_selects_its_share_and_shard_dirs_merge_by_copying(resumed, tmp_path):
    sub, complete = resumed["sub"], resumed["out"]
    students = {p.name for p in sub.iterdir()}
    merged = tmp_path / "merged"
    for k in (1, 2, 3):
        # What share k's own DIR holds after its run: its students' folders (and its grades.csv).
        share = tmp_path / f"share{k}"
        for student in students:
            if in_shard(student, (k, 3)):
                shutil.copytree(complete / student, share / student)
        shutil.copytree(share, merged, dirs_exist_ok=True)
    done = grade(sub, "--out", merged, "--shard", "2/3", *ONLY, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    mine = sum(2 for s in students if in_shard(s, (2, 3)))
    assert summary(done.stdout) == (0, mine) and f"share 2/3: {mine} notebooks" in done.stdout
    done = grade(sub, "--out", merged, *ONLY, cwd=tmp_path)  # the merge step: grades nothing
    assert done.returncode == 0, done.stderr
    assert summary(done.stdout) == (0, resumed["total"])
    assert len(assert_grades_csv_matches(merged)) == resumed["total"]


# --- wrong folder, broken submissions, written answers, --force -------------------------------

@pytest.fixture(scope="module")
def mixed(samples, tmp_path_factory):
    """One batch with the special cases, graded once (two of them break the grader)."""
    root = tmp_path_factory.mktemp("mixed")
    sub, out = root / "submitted", root / "out"
    put(samples, sub, "perfect", A6, "solution", A6)
    put(samples, sub, "perfect", A1, "solution", A1)
    put(samples, sub, "moved", A1, "solution", A2, "activation_functions.ipynb")  # a 02 in 01/
    put(samples, sub, "twice", A1, "unanswered", A2, "activation_functions.ipynb")
    put(samples, sub, "twice", A2, "solution", A2)  # ... and the real 02
    put(samples, sub, "breaks_grader", A1, "solution", A1)
    put(samples, sub, "zz_kills_worker", A1, "solution", A1)  # last: one worker restart fewer
    (root / "faults").mkdir()
    (root / "faults" / "sitecustomize.py").write_text(FAULTS)
    done = grade(sub, "--out", out, "--jobs", "1", cwd=root, PYTHONPATH=str(root / "faults"))
    return {"root": root, "sub": sub, "out": out, "done": done}


def test_a_broken_submission_costs_only_itself(mixed):
    done, out = mixed["done"], mixed["out"]
    assert done.returncode == 0, done.stderr
    assert summary(done.stdout) == (7, 0)
    files = results(out)
    assert len(files) == 7
    for student, why in (("breaks_grader", "injected fault"), ("zz_kills_worker", "died")):
        data = files[(student, A1)]
        assert data["score"] == 0 and "internal error" in data["output"]
        assert why in data["extra_data"]["operator"] and data["extra_data"]["retry"] is True
        assert f"{student}" in done.stderr and "broke the grader" in done.stderr
    assert files[("perfect", A1)]["score"] == files[("perfect", A1)]["max_score"] == 11
    assert_grades_csv_matches(out)


def test_a_notebook_in_another_assignments_folder(mixed):
    files = results(mixed["out"])
    moved = files[("moved", A2)]
    assert moved["score"] == moved["max_score"] > 0 and "graded as 02" in moved["output"]
    assert ("moved", A1) not in files
    assert files[("twice", A2)]["score"] == files[("twice", A2)]["max_score"] > 0
    wrong = files[("twice", A1)]
    assert wrong["score"] == 0 and "is a notebook of 02_activation_functions" in wrong["output"]
    assert wrong["extra_data"]["notebook"] == f"twice/{A1}/activation_functions.ipynb"


def test_perfect_notebook_with_a_written_answer_shows_no_failed_test(mixed):
    data = results(mixed["out"])[("perfect", A6)]
    assert [t["name"] for t in data["tests"] if t["status"] != "passed"] == []
    written = [t for t in data["tests"] if t["name"].endswith("graded by hand")]
    assert written and all(t["max_score"] == 0 == t["score"] for t in written)
    assert all("graded by hand" in t["output"] for t in written)
    assert data["score"] == data["max_score"] == sum(t["max_score"] for t in data["tests"]) == 10
    rows = {(r["student"], r["assignment"]): r for r in assert_grades_csv_matches(mixed["out"])}
    assert float(rows[("perfect", A6)]["max_score"]) == 10


def test_force_grades_current_results_again(mixed, tmp_path):
    sub, out = tmp_path / "submitted", tmp_path / "out"
    for student in ("moved", "twice"):
        shutil.copytree(mixed["sub"] / student, sub / student)
        shutil.copytree(mixed["out"] / student, out / student)
    before = results(out)
    done = grade(sub, "--out", out, "--force", "--jobs", "1", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert summary(done.stdout) == (3, 0)
    after = results(out)
    assert set(after) == set(before)
    for key, data in after.items():
        assert data["extra_data"]["run"] != before[key]["extra_data"]["run"]
        assert data["score"] == before[key]["score"]
    assert_grades_csv_matches(out)
    done = grade(sub, "--out", out, "--jobs", "1", cwd=tmp_path)
    assert summary(done.stdout) == (0, 3)


# --- folders that are not plain hand-ins ----------------------------------------------------

def test_links_and_reserved_names_are_not_graded_as_hand_ins(samples, tmp_path):
    """A notebook or student folder that is a symbolic link (another student's file, a folder
    outside submitted/) scores 0 with a message; a student folder named like the batch's own
    grades.csv is left out with a warning instead of breaking grades.csv for everyone; hidden
    folders (.ipynb_checkpoints) are no students."""
    sub, out, elsewhere = tmp_path / "submitted", tmp_path / "out", tmp_path / "elsewhere"
    put(samples, sub, "alice", A1, "solution", A1)
    put(samples, sub, "grades.csv", A1, "solution", A1)
    put(samples, sub, ".ipynb_checkpoints", A1, "solution", A1)
    put(samples, elsewhere, "eve", A1, "solution", A1)
    (sub / "eve").symlink_to(elsewhere / "eve")
    (sub / "mallory" / A1).mkdir(parents=True)
    (sub / "mallory" / A1 / ASSIGNMENTS[A1].notebook).symlink_to(notebook(sub, "alice", A1))
    done = grade(sub, "--out", out, "--jobs", "1", "--only", "matmul", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "grades.csv" in done.stderr and "rename" in done.stderr
    found = results(out)
    assert set(found) == {("alice", A1), ("eve", A1), ("mallory", A1)}
    assert found[("alice", A1)]["score"] == found[("alice", A1)]["max_score"] > 0
    for student in ("eve", "mallory"):
        assert found[(student, A1)]["score"] == 0
        assert "symbolic link" in json.dumps(found[(student, A1)]), student
    assert_grades_csv_matches(out)

"""`python -m autograder similarity`: which learners handed in alike answers (issue 42).

Each test writes a small class of notebooks (the release notebook with answer cells filled, as
the samples are written) into nbgrader's submitted/<student>/<assignment>/ layout and reads what
the command reports: the groups it computes and the page and CSV it writes.
"""

from __future__ import annotations

import csv
import importlib.util
import json
from pathlib import Path

import nbformat
import pytest

from autograder.cli import main as cli
from autograder.course import ASSIGNMENTS, ROOT
from autograder.instructor.samples import Scenario, load_scenarios, submission_notebook, \
    write_submitted
from autograder.similarity.answers import collect, release
from autograder.similarity.compare import THRESHOLD, bound_names
from autograder.similarity.run import groups_of

A = "01_linear_algebra"


def _variants(function: str) -> list[str]:
    """Correct answers written independently (bench/variants/correct.py)."""
    path = ROOT / "bench" / "variants" / "correct.py"
    spec = importlib.util.spec_from_file_location("correct_variants", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return [v["code"] for v in module.VARIANTS
            if v["function"] == function and not v["added"]]


LOOPS = '''def matmul(A, B):
    """Return the (n, m) matrix product of A (n, k) and B (k, m): C[i, j] = sum_t A[i, t] * B[t, j].

    Raise ValueError if A or B is not 2-D or if A.shape[1] != B.shape[0].
    """
    if A.dim() != 2 or B.dim() != 2:
        raise ValueError(f"matmul needs two 2-D tensors, got {A.dim()}-D and {B.dim()}-D")
    n, k = A.shape
    k2, m = B.shape
    if k != k2:
        raise ValueError(f"inner sizes differ: A is {n}x{k} but B is {k2}x{m}")
    C = torch.zeros(n, m, dtype=A.dtype, device=A.device)
    for i in range(n):
        for j in range(m):
            total = torch.zeros((), dtype=A.dtype, device=A.device)
            for t in range(k):
                total = total + A[i, t] * B[t, j]
            C[i, j] = total
    return C
'''

LOOPS_DISGUISED = '''def matmul(A, B):
    """Return the (n, m) matrix product of A (n, k) and B (k, m): C[i, j] = sum_t A[i, t] * B[t, j].

    Raise ValueError if A or B is not 2-D or if A.shape[1] != B.shape[0].
    """
    # my own checks
    if A.dim() != 2 or B.dim() != 2:
        raise ValueError(f'both must be 2-D: {A.dim()} and {B.dim()}')

    rows_b, cols = B.shape
    rows, inner = A.shape
    if inner != rows_b:
        raise ValueError(f'sizes {rows}x{inner} and {rows_b}x{cols} do not fit')

    out = torch.zeros(rows, cols, dtype=A.dtype, device=A.device)
    for r in range(rows):
        for c in range(cols):
            # accumulate one entry
            acc = torch.zeros((), dtype=A.dtype, device=A.device)

            for s in range(inner):
                acc = acc + A[r, s] * B[s, c]
            out[r, c] = acc
    return out
'''

WRONG = '''def matmul(A, B):
    if A.dim() != 2 or B.dim() != 2 or A.shape[1] != B.shape[0]:
        raise ValueError("bad shapes")
    n, k = A.shape
    m = B.shape[1]
    C = torch.zeros(n, m, dtype=A.dtype)
    for i in range(n):
        for j in range(m):
            for t in range(k):
                C[i, j] += A[t, i] * B[j, t]
    return C
'''


def _write(root: Path, student: str, code: dict[str, str], assignment: str = A,
           added: dict[str, str] | None = None) -> Path:
    scenario = Scenario(student, assignment, "", code, answers="release", added=added or {})
    path = root / student / assignment / ASSIGNMENTS[assignment].notebook
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(submission_notebook(scenario), path)
    return path


def _group(folder: Path, item: str, results=None):
    answers, problems = collect(folder)
    return next(g for g in groups_of(answers, problems) if g.item == item)


def _pairs(group) -> dict[frozenset, object]:
    return {frozenset((p.a.student, p.b.student)): p for p in group.pairs}


@pytest.fixture
def independent(tmp_path) -> Path:
    """A class of independent correct matmul answers (and the unanswered linear_forward)."""
    root = tmp_path / "submitted"
    for i, code in enumerate(_variants("matmul")[:6]):
        _write(root, f"learner{i}", {"matmul": code})
    return root


def test_a_disguised_copy_is_reported_and_independent_answers_are_not(independent):
    _write(independent, "copier", {"matmul": LOOPS_DISGUISED})
    _write(independent, "original", {"matmul": LOOPS})
    group = _group(independent, "matmul")
    pairs = _pairs(group)
    copy = pairs[frozenset(("copier", "original"))]
    assert copy.similarity >= THRESHOLD
    assert copy.slices_a and copy.slices_b  # the shared regions are marked
    # independent answers (bench/variants/correct.py, one author per style) stay below
    others = [p for key, p in pairs.items() if key & {"copier", "original"} == set()]
    assert others == []
    assert len(group.answers) >= 6


def test_a_too_short_answer_is_listed_as_such_never_as_evidence(tmp_path):
    root = tmp_path / "submitted"
    for student in ("ana", "ben"):  # the same one-line answer twice
        _write(root, student, {"relu": "def relu(z):\n    return z.clamp(min=0)\n"},
               "02_activation_functions")
    out = tmp_path / "out"
    assert cli(["similarity", str(root), "--out", str(out)]) == 0
    group = _group(root, "relu")
    assert sorted(a.student for a in group.short) == ["ana", "ben"]
    assert group.pairs == [] and group.answers == []
    page = (out / "index.html").read_text()
    assert "Answers too short to tell apart" in page
    assert list(csv.reader(open(out / "pairs.csv")))[1:] == []


def test_an_identical_wrong_answer_ranks_above_an_identical_right_one(independent):
    solution = release(A).solution["matmul"]
    for student in ("right1", "right2"):  # both hand in the worked solution
        _write(independent, student, {"matmul": solution})
    for student in ("wrong1", "wrong2"):  # the same unusual mistake: A and B read transposed
        _write(independent, student, {"matmul": WRONG})
    group = _group(independent, "matmul")
    order = [frozenset((p.a.student, p.b.student)) for p in group.pairs]
    wrong, right = frozenset(("wrong1", "wrong2")), frozenset(("right1", "right2"))
    assert wrong in order and right in order
    assert order.index(wrong) < order.index(right)
    assert _pairs(group)[wrong].similarity == _pairs(group)[right].similarity == 1.0


def test_with_the_graders_results_the_same_mistake_ranks_above_the_same_right_answer(
        independent, tmp_path):
    right = _variants("matmul")[0]  # a right answer that is not the worked solution
    for student in ("right1", "right2"):
        _write(independent, student, {"matmul": right})
    for student in ("wrong1", "wrong2"):
        _write(independent, student, {"matmul": WRONG})
    results = tmp_path / "results"
    for student, passed in [("right1", True), ("right2", True), ("wrong1", False),
                            ("wrong2", False)]:
        (results / student).mkdir(parents=True)
        tests = [{"name": "matmul: a test", "status": "passed" if passed else "failed",
                  "max_score": 1, "score": int(passed)}]
        (results / student / f"{A}.json").write_text(json.dumps({"tests": tests}))
    out = tmp_path / "out"
    assert cli(["similarity", str(independent), "--out", str(out), "--results",
                str(results)]) == 0
    rows = [r for r in csv.DictReader(open(out / "pairs.csv")) if r["function"] == "matmul"]
    order = [frozenset((r["learner_a"], r["learner_b"])) for r in rows]
    assert order.index(frozenset(("wrong1", "wrong2"))) < \
        order.index(frozenset(("right1", "right2")))
    assert "both passed" in (out / "index.html").read_text()


def test_learner_text_is_escaped_on_the_page_and_inert_in_the_csv(tmp_path):
    root = tmp_path / "submitted"
    hostile = LOOPS.replace("    return C\n", "    # </pre><script>alert('x')</script>\n"
                            "    print('<img src=x onerror=alert(1)>')\n    return C\n")
    for student in ("<b onclick=x>eve", "=HYPERLINK(1)"):
        _write(root, student, {"matmul": hostile})
    out = tmp_path / "out"
    assert cli(["similarity", str(root), "--out", str(out)]) == 0
    page = (out / "index.html").read_text()
    assert "<script" not in page and "<img" not in page and "<b onclick" not in page
    assert "&lt;script&gt;alert(" in page and "&lt;b onclick=x&gt;eve" in page
    assert "Content-Security-Policy" in page and "default-src 'none'" in page
    rows = list(csv.reader(open(out / "pairs.csv")))
    assert {"'=HYPERLINK(1)", "<b onclick=x>eve"} <= set(rows[1][:2])


def test_an_unreadable_notebook_is_listed_with_its_reason(independent, tmp_path):
    broken = independent / "mallory" / A / ASSIGNMENTS[A].notebook
    broken.parent.mkdir(parents=True)
    broken.write_text("{ not json")
    empty = independent / "nobody" / A
    empty.mkdir(parents=True)
    other = independent / "trudy" / A / "notes.ipynb"
    other.parent.mkdir(parents=True)
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")]), other)
    out = tmp_path / "out"
    assert cli(["similarity", str(independent), "--out", str(out)]) == 0
    page = (out / "index.html").read_text()
    assert "not a readable notebook (invalid JSON)" in page
    assert "no notebook (.ipynb) in the folder" in page
    assert "not a notebook of this course" in page
    for student in ("mallory", "nobody", "trudy"):
        assert f"<td>{student}</td>" in page


def test_a_folder_with_one_learner_works(tmp_path, capsys):
    root = tmp_path / "submitted"
    _write(root, "solo", {"matmul": LOOPS})
    out = tmp_path / "out"
    assert cli(["similarity", str(root), "--out", str(out)]) == 0
    page = (out / "index.html").read_text()
    assert "1 learner in" in page and "nothing to compare" in page
    assert "0 pairs" in capsys.readouterr().out


def test_an_answer_with_a_helper_in_an_added_cell_carries_the_helper(tmp_path):
    """A copy that inlines the original's helper is compared with the helper, not without it."""
    root = tmp_path / "submitted"
    helper = ("def row_times(A, B, i):\n    out = torch.zeros(B.shape[1], dtype=A.dtype)\n"
              "    for t in range(A.shape[1]):\n        out = out + A[i, t] * B[t]\n"
              "    return out\n")
    code = ("def matmul(A, B):\n    if A.dim() != 2 or B.dim() != 2 or A.shape[1] != B.shape[0]:"
            "\n        raise ValueError('shapes')\n"
            "    return torch.stack([row_times(A, B, i) for i in range(A.shape[0])])\n")
    _write(root, "helper", {"matmul": code}, added={"matmul": helper})
    answers, _ = collect(root)
    (matmul,) = [a for a in answers if a.item == "matmul"]
    assert "def row_times" in matmul.text and not matmul.too_short


def test_a_missing_folder_is_an_error(tmp_path, capsys):
    assert cli(["similarity", str(tmp_path / "nowhere"), "--out", str(tmp_path / "o")]) == 2
    assert "no such folder" in capsys.readouterr().err


def test_the_class_report_links_the_similarity_page_beside_it(tmp_path):
    root = tmp_path / "submitted"
    for student in ("ana", "ben"):
        _write(root, student, {"matmul": LOOPS})
    results = tmp_path / "results"
    (results / "ana").mkdir(parents=True)
    (results / "ana" / f"{A}.json").write_text(json.dumps(
        {"score": 1, "max_score": 1, "tests": [{"name": "matmul: t", "status": "passed",
                                                 "max_score": 1, "score": 1}]}))
    report = tmp_path / "report"
    assert cli(["report", str(results), "--out", str(report)]) == 0
    page = (report / "index.html").read_text()
    assert "<h2>Similar answers</h2>" in page and "Not computed" in page
    assert cli(["similarity", str(root), "--out", str(report / "similarity")]) == 0
    assert cli(["report", str(results), "--out", str(report)]) == 0
    page = (report / "index.html").read_text()
    assert "<a href='similarity/index.html'>" in page and page.rstrip().endswith("</html>")
    assert "ana" in (report / "similarity" / "pairs.csv").read_text()


def test_a_shared_written_answer_is_reported_and_marked(tmp_path):
    root = tmp_path / "submitted"
    assignment = "06_putting_it_together"
    text = ("The step subtracts the learning rate times the gradient from every weight, so the "
            "loss goes down along the steepest direction; with a rate too large the update "
            "overshoots the minimum and the loss grows from one step to the next instead.")
    own = ("I think gradient descent works because each parameter moves a little against its "
           "own partial derivative; momentum would help here but we did not use it at all.")
    for student, answer in [("ana", text), ("ben", text.replace("The step", "the  step")),
                            ("cy", own)]:
        path = _write(root, student, {}, assignment)
        notebook = nbformat.read(path, as_version=4)
        for cell in notebook.cells:
            if cell.metadata.get("nbgrader", {}).get("grade_id") == "explain_step":
                cell.source = answer
        nbformat.write(notebook, path)
    out = tmp_path / "out"
    assert cli(["similarity", str(root), "--out", str(out)]) == 0
    group = _group(root, "explain_step")
    assert group.kind == "text"
    assert [frozenset((p.a.student, p.b.student)) for p in group.pairs] == \
        [frozenset(("ana", "ben"))]
    page = (out / "index.html").read_text()
    assert "written answer <code>explain_step</code>" in page and "<mark>" in page


def test_the_demo_class_holds_disguised_copies_and_the_report_ranks_each_first(tmp_path):
    """`make demo`'s class (the representative share of the samples) holds the samples that are
    disguised copies of another sample (`copy_of`) and their originals: each copy renames what
    the original binds and changes its layout, and the report pairs the two above every other
    pair of that exercise."""
    every = [s for a in ASSIGNMENTS for s in load_scenarios(a)]
    copies = [s for s in every if s.copy_of]
    assert 2 <= len(copies) <= 4
    root = tmp_path / "submitted"
    written = {(s.assignment, s.student): s for s in write_submitted(root, share=True)}
    answers, problems = collect(root)
    groups = {(g.assignment, g.item): g for g in groups_of(answers, problems)}
    for copy in copies:
        original = written[(copy.assignment, copy.copy_of)]
        assert (copy.assignment, copy.student) in written
        assert copy.code and set(copy.code) <= set(original.code)
        assert copy.expect == original.expect and copy.messages == original.messages
        for item, code in copy.code.items():
            assert code.strip() != original.code[item].strip()
            assert bound_names(code) != bound_names(original.code[item])
            group = groups[(copy.assignment, item)]
            top = group.pairs[0]
            assert {top.a.student, top.b.student} == {copy.student, copy.copy_of}, \
                [(p.a.student, p.b.student, round(p.weight, 2)) for p in group.pairs[:3]]
            assert top.similarity >= THRESHOLD


def test_the_dolos_bench_says_it_is_skipped_without_node(tmp_path):
    """bench/similarity_dolos.py measures Dolos, a Node package the pack does not need: without
    node and npm it says so and stops, successfully."""
    import subprocess
    import sys
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(sys.executable)
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "similarity_dolos.py")],
                          env={"PATH": str(bin_dir), "HOME": str(tmp_path)}, cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("skipped: node and npm not found")
    assert not (tmp_path / ".cache" / "autograder-dolos").exists()  # nothing installed

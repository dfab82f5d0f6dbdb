"""Hostile and clumsy submissions cannot change what `nbgrader autograde` records, stop it for
other learners, or escape the limits of the learner's kernel.

One autograde run of section 1 over a few notebooks (about 10 s each), in a course copy of its
own; the rest are unit tests of the plugin's steps, with no kernel and no jail.
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_output
from nbgrader.api import Gradebook

from autograder.nbgrader import grades, kernels
from autograder.course import ASSIGNMENTS, ROOT
from autograder.grade.batch import grade_folder
from autograder.instructor.samples import Scenario, submission_notebook
from conftest import tool_env

A = ASSIGNMENTS["01_linear_algebra"]
NOTEBOOK = A.notebook.removesuffix(".ipynb")

PROBE = r'''
import json, mmap, os, resource, sys, time
probe = {}
connection = sys.argv[sys.argv.index("-f") + 1]
folder = os.path.dirname(connection)
for what, act in [("write", lambda: open(os.path.join(folder, "fill.bin"), "wb").write(b"y" * 1024)),
                  ("connection", lambda: open(connection, "a").write(" ")),
                  ("chmod", lambda: os.chmod(folder, 0o777))]:
    try:
        act()
        probe[what] = "done"
    except OSError as error:
        probe[what] = type(error).__name__
try:
    mmap.mmap(-1, 3 << 30).close()
    probe["alloc"] = "done"
except (OSError, MemoryError) as error:
    probe["alloc"] = type(error).__name__
pids = []
try:
    for _ in range(100):
        pid = os.fork()
        if pid == 0:
            time.sleep(30)
            os._exit(0)
        pids.append(pid)
except OSError as error:
    probe["fork"] = type(error).__name__
probe["forked"] = len(pids)
for pid in pids:
    os.kill(pid, 9)
    os.waitpid(pid, 0)
probe["limits"] = {n: resource.getrlimit(getattr(resource, n))[0]
                   for n in ("RLIMIT_AS", "RLIMIT_CPU", "RLIMIT_FSIZE", "RLIMIT_CORE", "RLIMIT_NPROC")}
probe["vm"] = next(int(x.split()[1]) << 10 for x in open("/proc/self/status") if x.startswith("VmSize"))
print("PROBE " + json.dumps(probe))
'''


def _index(nb, grade_id):
    return next(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def _solution():
    return submission_notebook(Scenario("x", A.id, "", {}))


def _copied_answer():
    """Jupyter's copy/paste of a (correct) answer cell keeps its nbgrader metadata."""
    nb = _solution()
    i = _index(nb, "matmul")
    copied = copy.deepcopy(nb.cells[i])
    copied.id = "copied-cell"
    nb.cells.insert(i + 1, copied)
    return nb


def _copied_with_helper():
    """The first copy defines what the second needs; an empty and a too-new nbgrader dict besides."""
    nb = _solution()
    i = _index(nb, "matmul")
    nb.cells[i].source = ("_impl = lambda A, B: (A[:, :, None] * B[None, :, :]).sum(dim=1)\n"
                          "def matmul(A, B):\n    raise NotImplementedError()")
    copied = copy.deepcopy(nb.cells[i])
    copied.id = "copied-cell"
    copied.source = ("def matmul(A, B):\n"
                     "    if A.dim() != 2 or B.dim() != 2 or A.shape[1] != B.shape[0]:\n"
                     "        raise ValueError('shapes')\n"
                     "    return _impl(A, B)")
    nb.cells.insert(i + 1, copied)
    empty = new_code_cell("x = 1")
    empty.metadata["nbgrader"] = {}
    newer = new_code_cell("y = 2")
    newer.metadata["nbgrader"] = {"grade": False, "solution": False, "locked": False,
                                  "grade_id": "mine", "schema_version": 99}
    nb.cells += [empty, newer]
    return nb


def _kernel_probe():
    nb = _solution()
    nb.cells.insert(_index(nb, "matmul") + 1, new_code_cell(PROBE))
    return nb


def _deleted_test():
    nb = _solution()
    del nb.cells[_index(nb, "tests_linear_forward")]
    return nb


def _answer_markdown():
    """The matmul answer cell turned into markdown: the notebook never runs it, and neither may
    grading (nbgrader's OverwriteCells would turn it back into code)."""
    nb = _solution()
    cell = nb.cells[_index(nb, "matmul")]
    cell.cell_type = "markdown"
    del cell["outputs"], cell["execution_count"]
    return nb


def _metadata_stripped():
    """A copy of the worked solution (solutions/ has no nbgrader metadata, the course's cell ids):
    graded as the notebook it is, by nbgrader as by the standalone grader (issue 29)."""
    return nbformat.read(ROOT / "solutions" / A.id / A.notebook, as_version=4)


def _oversized():
    """The solution padded past the file-size limit: nbgrader must not read it (issue 29)."""
    from autograder.grade.submission import MAX_BYTES
    return nbformat.writes(_solution()) + " " * (MAX_BYTES + 1)


def _graded_cells_of_its_own():
    """A wrong matmul whose answer cell the learner marked graded (30 points), beside a code cell
    and a written answer of its own marked graded (50 and 20 points): nbgrader's Create Assignment
    toolbar is a click away. nbgrader refused the notebook (0 on every test, no feedback) where
    the standalone grader scores it as a notebook of ordinary cells: 6 of 11."""
    nb = _solution()
    i = _index(nb, "matmul")
    nb.cells[i].source = "def matmul(A, B):\n    return torch.zeros(A.shape[0], B.shape[1], dtype=A.dtype)"
    nb.cells[i].metadata["nbgrader"].update(grade=True, points=30)
    bonus = new_code_cell("print('bonus')")
    bonus.metadata["nbgrader"] = {"grade": True, "solution": False, "locked": True, "points": 50,
                                  "grade_id": "tests_bonus", "schema_version": 3}
    written = nbformat.v4.new_markdown_cell("my own answer")
    written.metadata["nbgrader"] = {"grade": True, "solution": True, "locked": False, "points": 20,
                                    "grade_id": "bonus_written", "schema_version": 3}
    nb.cells[i + 1:i + 1] = [bonus, written]
    return nb


def _check_cell_unflagged(flags: dict):
    """The answer cell left unwritten, the right matmul in a cell added below its check cell,
    whose metadata the learner changed (`flags`): the notebook's check ran before the definition
    ("not written yet"), and grading reads the course's flags: 0 for matmul on both paths (the
    standalone grader read the learner's flags and gave 11 of 11)."""
    def make():
        nb = _solution()
        nb.cells[_index(nb, "matmul")].source = "def matmul(A, B):\n    raise NotImplementedError()"
        check = _index(nb, "tests_matmul")
        nb.cells[check].metadata["nbgrader"].update(flags)
        nb.cells.insert(check + 1, new_code_cell(
            "def matmul(A, B):\n    return (A[:, :, None] * B[None, :, :]).sum(dim=1)"))
        return nb
    return make


STUDENTS = {  # autograded in this order: a copied answer cell must not stop the later learners
    "a_copied_answer": _copied_answer,
    "b_honest": _solution,
    "c_kernel_probe": _kernel_probe,
    "d_deleted_test": _deleted_test,
    "e_copied_with_helper": _copied_with_helper,
    "f_answer_markdown": _answer_markdown,
    "g_metadata_stripped": _metadata_stripped,
    "h_oversized": _oversized,
    "i_graded_cells_of_its_own": _graded_cells_of_its_own,
    "j_check_cell_ungraded": _check_cell_unflagged({"grade": False}),
    "k_check_cell_as_answer": _check_cell_unflagged({"solution": True}),
}
FULL = {"tests_matmul": 5.0, "tests_linear_forward": 6.0}
EXPECTED = {**dict.fromkeys(STUDENTS, FULL), "f_answer_markdown": {**FULL, "tests_matmul": 0.0},
            "h_oversized": {"tests_matmul": 0.0, "tests_linear_forward": 0.0},
            "i_graded_cells_of_its_own": {**FULL, "tests_matmul": 0.0},
            "j_check_cell_ungraded": {**FULL, "tests_matmul": 0.0},
            "k_check_cell_as_answer": {**FULL, "tests_matmul": 0.0}}


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """A course copy (no autograder package in it) with the students above, autograded once."""
    root = tmp_path_factory.mktemp("hostile")
    shutil.copytree(ROOT / "source" / A.id, root / "source" / A.id)
    shutil.copy(ROOT / "nbgrader_config.py", root)
    for student, make in STUDENTS.items():
        path = root / "submitted" / student / A.id / A.notebook
        path.parent.mkdir(parents=True)
        made = make()
        if isinstance(made, str):
            path.write_text(made)
        else:
            nbformat.write(made, path)
    for step in (["generate_assignment", A.id, "--force"], ["autograde", A.id]):
        done = subprocess.run(["nbgrader", *step, "--log-level=ERROR"], cwd=root, env=tool_env(),
                              capture_output=True, text=True)
    return root, done


@pytest.fixture(scope="module")
def standalone(hostile):
    root, _ = hostile
    return {g.student: g for g in grade_folder(root / "submitted")}


def _recorded(root, student) -> dict:
    with Gradebook(f"sqlite:///{root}/gradebook.db") as gb:
        sub = gb.find_submission_notebook(NOTEBOOK, A.id, student)
        return {g.name: g.score for g in sub.grades if g.name.startswith("tests_")}


def _expected(graded) -> dict:
    scores = dict.fromkeys(FULL, 0.0)  # a notebook the grader refuses scores 0 on every test
    for r in graded.autograded:
        scores[f"tests_{r.function}"] = scores.get(f"tests_{r.function}", 0.0) + r.score
    return scores


def _autograded(root, student):
    return nbformat.read(root / "autograded" / student / A.id / A.notebook, as_version=4)


def test_autograde_finishes_for_every_learner(hostile):
    _, done = hostile
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.mark.parametrize("student", sorted(STUDENTS))
def test_recorded_scores_equal_the_standalone_grader(hostile, standalone, student):
    root, _ = hostile
    assert _recorded(root, student) == _expected(standalone[student])


def test_cells_a_learner_marked_for_grading_are_graded_as_ordinary_cells(hostile):
    """The gradebook holds the course's grade cells only, each with the course's points: a cell
    the learner marked graded adds nothing, and an answer cell marked graded is the answer cell."""
    root, _ = hostile
    with Gradebook(f"sqlite:///{root}/gradebook.db") as gb:
        def grade_cells(student):
            sub = gb.find_submission_notebook(NOTEBOOK, A.id, student)
            return {g.name: g.max_score for g in sub.grades}
        assert grade_cells("i_graded_cells_of_its_own") == grade_cells("b_honest")


def test_standalone_gives_these_notebooks_their_scores(standalone):
    for student in STUDENTS:
        assert _expected(standalone[student]) == EXPECTED[student], (student, standalone[student])


def test_an_honest_notebook_still_runs_in_the_kernel(hostile):
    root, _ = hostile
    nb = _autograded(root, "b_honest")
    ran = [c for c in nb.cells if c.cell_type == "code" and c.execution_count]
    shown = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs
             if o.output_type in ("stream", "display_data", "execute_result")]
    assert len(ran) > 10 and len(shown) > 5


def test_the_learners_kernel_is_limited_and_cannot_write_to_its_socket_folder(hostile):
    root, _ = hostile
    nb = _autograded(root, "c_kernel_probe")
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    line = next((x for x in text.splitlines() if x.startswith("PROBE ")), None)
    assert line, text[-2000:]
    probe = json.loads(line.removeprefix("PROBE "))
    assert probe["write"] == "PermissionError", probe
    assert probe["connection"] == "PermissionError", probe
    assert probe["chmod"] == "PermissionError", probe
    assert probe["alloc"] != "done", probe
    assert probe["forked"] < 64 and probe.get("fork") in ("BlockingIOError", "OSError"), probe
    limits = probe["limits"]
    assert limits["RLIMIT_CORE"] == 0 and limits["RLIMIT_FSIZE"] == 32 << 20, probe
    assert 0 < limits["RLIMIT_CPU"] <= 600 and limits["RLIMIT_NPROC"] == 64, probe


def test_a_deleted_test_cell_is_put_back(hostile):
    root, _ = hostile
    nb = _autograded(root, "d_deleted_test")
    ids = [c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells]
    # back in its place: right after the locked cell that defines its checks, below the answer
    assert ids.index("tests_linear_forward") == ids.index("checks_linear_forward") + 1
    assert ids.index("checks_linear_forward") == ids.index("linear_forward") + 1


# ---- unit tests of the plugin's steps: no kernel, no jail ----------------------------------------

def test_trusted_grades_grades_the_sources_only(monkeypatch):
    """Whatever the kernel printed is not in the notebook the grader reads."""
    seen = {}

    def grade(path):
        seen["size"] = path.stat().st_size
        seen["outputs"] = [o for c in nbformat.read(path, as_version=4).cells for o in c.get("outputs", [])]
        raise RuntimeError("stop here")
    monkeypatch.setattr("autograder.grade.batch.grade_notebook", grade)
    nb = _solution()
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = [new_output("stream", name="stdout", text="x" * (1 << 20))]
    grades.TrustedGrades().preprocess(nb, {})
    assert seen["outputs"] == [] and seen["size"] < 1 << 20


def test_trusted_grades_survives_a_notebook_it_cannot_write(monkeypatch):
    monkeypatch.setattr("autograder.grade.batch.grade_notebook", lambda path: pytest.fail("graded"))
    nb = _solution()
    nb.cells[_index(nb, "matmul")].source = "def matmul(A, B):\n    return '\ud800'"
    nb, _ = grades.TrustedGrades().preprocess(nb, {})
    cell = nb.cells[_index(nb, "tests_matmul")]
    assert "did not run" in cell.outputs[0].text and cell.outputs[-1].data["text/plain"] == "0"


def _stream(text, msg_id="m"):
    return {"msg_type": "stream", "content": {"name": "stdout", "text": text},
            "parent_header": {"msg_id": msg_id}, "header": {"msg_type": "stream"}, "metadata": {}}


def test_the_kernels_output_kept_per_cell_is_capped():
    execute = kernels.JailedExecute()
    execute.reset_execution_trackers()  # as nbclient does before it runs a notebook, and a cell
    execute.clear_before_next_output = False
    outs = []
    for _ in range(50):
        execute.output(outs, _stream("x" * (1 << 20)), None, 3)
    for _ in range(10_000):
        execute.output(outs, _stream("y"), None, 3)
    kept = sum(len(o.get("text", "")) for o in outs)
    assert kept <= kernels.OUTPUT_LIMIT + 1000 and len(outs) < 100
    assert sum("output was cut" in o.get("text", "") for o in outs) == 1
    other = []
    execute.output(other, _stream("a line\n"), None, 4)  # the next cell starts afresh
    assert [o.text for o in other] == ["a line\n"]


def test_the_next_learners_kernel_starts_from_nothing_of_the_last_ones():
    """Under nbgrader the learner's own kernel runs in the jail first: a segment, a message queue
    and a daemon that one learner's kernel leaves are gone before the next learner's kernel runs
    its first line (issue 29; the grading children: test_sandbox)."""
    from nbformat.v4 import new_notebook
    from test_sandbox import LEAVES

    def run(*sources):
        nb = new_notebook(cells=[new_code_cell(s) for s in sources])
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        nb, _ = kernels.JailedExecute(timeout=60).preprocess(nb, {})
        return [o.get("text", "") for c in nb.cells for o in c.outputs]

    left = run(LEAVES, "print('LEFT', leave(64 << 20))")
    assert any(text.startswith("LEFT") for text in left), left
    seen = run(LEAVES, "print('SEEN', look())")
    assert "SEEN [0, 0, 0, 0, []]\n" in seen, seen


def test_the_kernels_output_kept_per_notebook_is_capped():
    """40 cells printing 5 MB each kept 168 MB in the autograded notebook (issue 29): a notebook
    keeps at most NOTEBOOK_OUTPUT_LIMIT, said once, in the cell that went over."""
    execute = kernels.JailedExecute()
    execute.reset_execution_trackers()
    execute.clear_before_next_output = False
    cells = []
    for cell in range(40):
        outs = []
        for _ in range(5):
            execute.output(outs, _stream("x" * (1 << 20), msg_id=f"m{cell}"), None, cell)
        cells.append(outs)
    kept = sum(len(o.get("text", "")) for outs in cells for o in outs)
    assert kernels.NOTEBOOK_OUTPUT_LIMIT <= kept <= kernels.NOTEBOOK_OUTPUT_LIMIT + 4000
    said = [o.text for outs in cells for o in outs if "output was cut" in o.get("text", "")]
    assert sum("in this notebook" in t for t in said) == 1, said
    assert not cells[-1]


def test_a_file_over_the_limit_is_not_read_and_scores_zero_saying_why(hostile):
    root, _ = hostile
    nb = _autograded(root, "h_oversized")
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert "a notebook file may hold" in text and str(root) not in text, text[-2000:]

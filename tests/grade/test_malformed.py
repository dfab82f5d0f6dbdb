"""Malformed notebooks get a clear result or a one-line error, never a traceback, and cost no
other notebook (on the single-notebook and the batch path)."""

from __future__ import annotations

import copy
import json

import nbformat
import pytest

from autograder.course import ASSIGNMENTS, ROOT
from autograder.instructor.samples import Scenario, submission_notebook
from conftest import run

SOLUTION = json.loads(nbformat.writes(submission_notebook(Scenario("s", "01_linear_algebra", "", {}))))
for _cell in SOLUTION["cells"]:
    _cell["source"] = "".join(_cell["source"])
FULL = {"matmul": 5, "linear_forward": 6}


def _answer(nb, grade_id):
    return next(c for c in nb["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == grade_id)


def _edit(change):
    nb = copy.deepcopy(SOLUTION)
    change(nb)
    return json.dumps(nb).encode()


def _duplicate_answer(nb):
    i = nb["cells"].index(_answer(nb, "matmul"))
    copied = copy.deepcopy(nb["cells"][i])
    copied["id"] = "copied-cell"
    nb["cells"].insert(i + 1, copied)


def _to(kind):
    def change(nb):
        cell = _answer(nb, "matmul")
        cell["cell_type"] = kind
        cell.pop("outputs", None)
        cell.pop("execution_count", None)
    return change


def _rename(nb):
    cell = _answer(nb, "matmul")
    cell["source"] = cell["source"].replace("def matmul(", "def mat_mul(")


def _many_cells(nb):
    nb["cells"] += [{"cell_type": "code", "metadata": {}, "source": f"x{i} = {i}", "outputs": [],
                     "execution_count": None, "id": f"extra{i}"} for i in range(10_000)]


def _huge_output(nb):
    cell = _answer(nb, "linear_forward")
    cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "x" * (100 << 20)}]


def _bad_metadata(nb):
    nb["cells"][0]["metadata"] = "not a dict"
    nb["cells"][3]["metadata"] = {"nbgrader": ["not", "a", "dict"]}
    del nb["cells"][5]["source"]


def _nested(nb):
    nb["cells"].append({"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
                        "id": "deep", "source": "y = " + "(" * 5000 + "1" + ")" * 5000})


def _helper_cell(nb):
    """A correct matmul that calls a helper the learner wrote in a cell of their own."""
    i = nb["cells"].index(_answer(nb, "matmul"))
    nb["cells"].insert(i, {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
                           "id": "mine", "source": "EPS = 0.0\n\ndef row_times_column(A, B):\n"
                                                   "    return (A[:, :, None] * B[None, :, :]).sum(dim=1) + EPS\n\n"
                                                   "print('a demo line that is not run')\n"})
    _answer(nb, "matmul")["source"] = (
        "def matmul(A, B):\n    if A.dim() != 2 or B.dim() != 2 or A.shape[1] != B.shape[0]:\n"
        "        raise ValueError('shapes')\n    return row_times_column(A, B)\n")


def _below_check(nb):
    """The matmul answer cell moved below matmul's check cell (Restart & Run All fails the check)."""
    cell = _answer(nb, "matmul")
    nb["cells"].remove(cell)
    nb["cells"].insert(nb["cells"].index(_answer(nb, "tests_matmul")) + 1, cell)


def _rebound_below_check(nb):
    """A later answer cell rebinds matmul (torch's own) after matmul's check cell has passed."""
    cell = _answer(nb, "linear_forward")
    cell["source"] = "from torch import *\n\n" + cell["source"]


def _v3(nb):
    """The solution in nbformat 3 (as an old Jupyter wrote it)."""
    v4 = nbformat.from_dict(nb)
    return nbformat.writes(nbformat.v3.downgrade(v4) if hasattr(nbformat.v3, "downgrade")
                           else nbformat.convert(v4, 3), version=3)


ERRORS = {  # file content -> words of the one-line error
    "empty": (b"", "empty"),
    "invalid_json": (b'{"cells": [', "invalid JSON"),
    "not_utf8": (b"\xff\xfe\x00garbage \x80\x81", "invalid JSON"),
    "not_a_notebook": (b'{"hello": 1}', "not a notebook"),
    "metadata_stripped_unrelated": (json.dumps({"cells": [{"cell_type": "code", "source": "x = 1",
                                                           "metadata": {}}], "nbformat": 4,
                                                "nbformat_minor": 5, "metadata": {}}).encode(),
                                    "not a notebook of this course"),
    # bounded before anything parses it (issue 29): just over each limit
    "cell_over_the_code_limit": (json.dumps({"cells": [{"cell_type": "code", "metadata": {},
                                                        "source": "x = 1\n" * 33_334}],
                                             "nbformat": 4, "nbformat_minor": 5, "metadata": {}}).encode(),
                                 "more than the 200000 a cell may hold"),
    "file_over_the_size_limit": (b" " * (128 << 20) + b"{}", "more than the 134217728 a notebook file may hold"),
    "file_over_the_container_limit": (b'{"cells": [], "x": ' + b"[" * 500_000 + b"{" * 500_001,
                                      "more than the 1000000 a notebook file may hold"),
    "notebook_over_the_code_limit": (json.dumps({"cells": [{"cell_type": "code", "metadata": {},
                                                            "source": "x = 1\n" * 33_333}] * 6,
                                                 "nbformat": 4, "nbformat_minor": 5, "metadata": {}}).encode(),
                                     "more than the 1000000 a notebook may hold"),
}
RESULTS = {  # file content -> expected scores per function
    "duplicate_answer_cell": (_edit(_duplicate_answer), FULL),
    "answer_cell_markdown": (_edit(_to("markdown")), {"matmul": 0, "linear_forward": 6}),
    "answer_cell_raw": (_edit(_to("raw")), {"matmul": 0, "linear_forward": 6}),
    "answer_cell_deleted": (_edit(lambda nb: nb["cells"].remove(_answer(nb, "matmul"))),
                            {"matmul": 0, "linear_forward": 6}),
    "function_renamed": (_edit(_rename), {"matmul": 0, "linear_forward": 6}),
    "ten_thousand_cells": (_edit(_many_cells), FULL),
    "hundred_mb_output": (_edit(_huge_output), FULL),
    "metadata_not_a_dict": (_edit(_bad_metadata), FULL),
    "deeply_nested": (_edit(_nested), FULL),
    "helper_in_added_cell": (_edit(_helper_cell), FULL),
    "defined_below_its_check": (_edit(_below_check), {"matmul": 0, "linear_forward": 6}),
    # matmul keeps its marks; linear_forward's star import is outside its subset of Python
    # matmul keeps its marks (graded where its check stands); linear_forward's own code is by hand
    # and grading stands its matmul in for whatever `matmul` names, so the star import, which
    # binds nothing linear_forward uses but matmul, is no part of it and never runs (issue 36)
    "rebound_below_its_check": (_edit(_rebound_below_check), {"matmul": 5, "linear_forward": 6}),
    "nbformat_3": (_v3(SOLUTION).encode(), FULL),
}


def _scores(result):
    out = {}
    for test in result["tests"]:
        f = test["name"].split(":")[0]
        out[f] = out.get(f, 0) + test["score"]
    return out


@pytest.mark.parametrize("case", sorted(ERRORS))
def test_unreadable_input_is_one_line_on_stderr(tmp_path, case):
    content, words = ERRORS[case]
    path = tmp_path / "submission.ipynb"
    path.write_bytes(content)
    done = run("python", "-m", "autograder", "grade", str(path), "--json", str(tmp_path / "r.json"),
               cwd=tmp_path, check=False)
    assert done.returncode != 0
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and words in lines[0] and "Traceback" not in done.stderr, done.stderr


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    root = tmp_path_factory.mktemp("malformed")
    submitted = root / "submitted"
    cases = {**{k: v[0] for k, v in ERRORS.items()}, **{k: v[0] for k, v in RESULTS.items()}}
    for student, content in {**cases, "honest": json.dumps(SOLUTION).encode()}.items():
        path = submitted / student / "01_linear_algebra" / "linear_algebra.ipynb"
        path.parent.mkdir(parents=True)
        path.write_bytes(content)
    done = run("python", "-m", "autograder", "grade", str(submitted), "--out", str(root / "out"),
               cwd=root, check=False)
    return root / "out", done


@pytest.mark.parametrize("case", sorted(RESULTS))
def test_odd_but_readable_notebooks_get_their_scores(batch, case):
    out, done = batch
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
    result = json.loads((out / case / "01_linear_algebra.json").read_text())
    assert _scores(result) == RESULTS[case][1]
    assert all("Traceback" not in t["output"] for t in result["tests"])


def test_unreadable_notebooks_score_zero_in_a_batch_and_cost_no_one_else(batch):
    out, done = batch
    assert done.returncode == 0, done.stderr[-3000:]
    for case in ERRORS:
        result = json.loads((out / case / "01_linear_algebra.json").read_text())
        assert result["score"] == 0 and result.get("output")
    assert _scores(json.loads((out / "honest" / "01_linear_algebra.json").read_text())) == FULL


def test_answer_cell_lost_names_the_function(batch):
    out, _ = batch
    result = json.loads((out / "function_renamed" / "01_linear_algebra.json").read_text())
    messages = [t["output"] for t in result["tests"] if t["name"].startswith("matmul")]
    assert all("matmul is not defined" in m for m in messages)


def test_a_definition_below_its_check_cell_is_named(batch):
    out, _ = batch
    result = json.loads((out / "defined_below_its_check" / "01_linear_algebra.json").read_text())
    messages = [t["output"] for t in result["tests"] if t["name"].startswith("matmul")]
    assert messages and all("below its check cell" in m for m in messages), messages

"""The grader reads the learner's cells (ast, outside their process) and flags what no exercise
needs; a flag costs no points, reaches the instructor only, and never fires on honest work."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

from autograder.grade import results as report
from autograder.course import ASSIGNMENTS, ROOT
from autograder.grade.plugin import TestResult as Result
from autograder.grade.flags import review_notebook, review_results
from autograder.rules.review import flags_in
from autograder.instructor.samples import submission_notebook
from conftest import BUILT, SCENARIOS


def constructs(source: str, cell: str = "matmul") -> set[str]:
    return {f.construct for f in flags_in(source, cell)}


@pytest.mark.parametrize("source, construct", [
    ("import gc\nobjs = gc.get_objects()", "gc.get_objects"),
    ("import pickle\nf = pickle.loads(b'cgc\\nget_objects\\n.')", "pickle"),
    ("import ctypes", "ctypes"),
    ("import sys\nf = sys._getframe(1)", "sys._getframe"),
    ("def f():\n    raise ValueError\ntry:\n    f()\nexcept ValueError as e:\n    g = e.__traceback__.tb_frame.f_back.f_globals", "a traceback's tb_frame"),
    ("import inspect\nx = inspect.currentframe().f_back", "inspect"),
    ("import sys\nm = sys.modules['x']", "sys.modules"),
    ("from sys import modules", "sys.modules"),
    ("c = object.__subclasses__()", "__subclasses__"),
    ("import importlib\nm = importlib.import_module('os')", "importlib"),
    ("m = __import__('os')", "__import__"),
    ("import builtins\nbuiltins.isinstance = lambda *a: True", "builtins"),
    ("__builtins__['len'] = lambda x: 0", "__builtins__"),
    ("import autograder.jail.inside.child as c", "autograder"),
    ("x = getattr(__import__('sys'), 'modules')['autograder.jail.inside.wire']", "autograder"),
    ("g = f.__globals__", "__globals__"),
    ("r = f.__closure__[0].cell_contents", "__closure__"),
    ("from torch.utils._python_dispatch import _pop_mode_temporarily", "_pop_mode_temporarily"),
    ("m = torch._C._pop_torch_dispatch_stack(None)", "_pop_torch_dispatch_stack"),
    ("with torch._C._DisableTorchDispatch():\n    pass", "_DisableTorchDispatch"),
    ("m = _get_current_dispatch_mode()", "_get_current_dispatch_mode"),
    ("torch.equal = lambda a, b: True", "patches torch"),
    ("setattr(torch.Tensor, 'clone', None)", "patches torch"),
    ("import os\nos.write(3, b'x')", "os.write"),
    ("g = getattr(sys, '_getframe')", "sys._getframe"),
])
def test_each_construct_is_flagged(source, construct):
    assert construct in constructs(source), constructs(source)


def test_collecting_garbage_alone_is_not_flagged():
    assert constructs("import gc\ngc.collect()") == set()


def test_a_flag_quotes_its_own_line_after_a_form_feed():
    flags = flags_in("x = 1  # a form feed \x0c here\nimport ctypes\n", "record_ops")
    assert [(f.line, f.text) for f in flags] == [(2, "import ctypes")]


def test_reading_the_mode_stack_is_fine_in_record_ops_only():
    source = "from torch.utils._python_dispatch import _get_current_dispatch_mode"
    assert constructs(source, "record_ops") == set()
    assert constructs(source, "matmul") == {"_get_current_dispatch_mode"}
    assert constructs("torch._C._pop_torch_dispatch_stack(None)", "record_ops")


def test_ordinary_code_is_not_flagged():
    source = '''
import math
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

def f(x, W, autograd_steps=1):
    """torch.autograd is not autograder."""
    y = torch.autograd.grad  # a name is not a flag: the recorder judges what runs
    sys_like = {"modules": 1}
    x.grad = None
    W.data -= 0.1
    return x @ W.T, F.relu(x), math.sqrt(2), sys_like["modules"]
'''
    assert flags_in(source, "matmul") == []


def test_unparsable_code_is_not_flagged():
    assert flags_in("def f(:\n", "matmul") == []


def test_a_flag_quotes_the_cell_and_line():
    (flag,) = flags_in("x = 1\nimport ctypes\n", "cell graph_nodes")
    assert (flag.grade_id, flag.line, flag.text) == ("graph_nodes", 2, "import ctypes")
    assert "cell graph_nodes, line 2: `import ctypes`" in flag.describe()


def _written(scenario, folder: Path) -> Path:
    a = ASSIGNMENTS[scenario.assignment]
    path = folder / f"{scenario.student}.ipynb"
    nbformat.write(submission_notebook(scenario), path)
    return path


def test_samples_raise_exactly_their_flags(tmp_path):
    """Every honest sample and every correct variant raises no flag; hostile ones raise the flags
    their `flags` key lists, and no other."""
    wrong = []
    for scenario in SCENARIOS:
        found = {f"{f.grade_id}: {f.construct}" for f in review_notebook(_written(scenario, tmp_path))}
        if found != set(scenario.flags):
            wrong.append(f"{scenario.assignment}/{scenario.student}: flags {sorted(found)}, "
                         f"expected {sorted(scenario.flags)}")
    assert not wrong, "\n".join(wrong)
    assert any(s.flags for s in SCENARIOS)


@pytest.mark.parametrize("assignment", BUILT)
def test_release_and_solution_notebooks_raise_no_flag(assignment):
    a = ASSIGNMENTS[assignment]
    for folder in ("release", "solutions", "source"):
        assert review_notebook(ROOT / folder / a.id / a.notebook) == [], folder


def test_a_flag_is_a_hidden_zero_point_entry_in_results(tmp_path):
    nb = nbformat.read(ROOT / "release" / "04_computational_graph" / "computational_graph.ipynb", 4)
    for cell in nb.cells:
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "graph_nodes":
            cell.source = "import ctypes\n\ndef graph_nodes(t):\n    return []\n"
    path = tmp_path / "computational_graph.ipynb"
    nbformat.write(nb, path)
    (entry,) = review_results(path)
    assert (entry.name, entry.score, entry.max_score, entry.review) == \
        ("graph_nodes: needs review", 0.0, 0.0, True)
    assert "cell graph_nodes, line 1: `import ctypes`" in entry.output
    passed = Result("graph_nodes", "graph_nodes: works", 5.0, 5.0, "", True)
    data = report.results_json([passed, entry])
    assert (data["score"], data["max_score"]) == (5.0, 5.0)
    test = data["tests"][1]
    assert (test["status"], test["visibility"], test["score"], test["max_score"]) == \
        ("failed", "hidden", 0.0, 0.0)
    assert json.loads(json.dumps(data)) == data


def test_the_class_report_counts_and_quotes_what_needs_review(tmp_path):
    from autograder.instructor.classreport.page import render
    from autograder.instructor.classreport.tally import load, needs_review
    flag = {"name": "matmul: needs review", "score": 0.0, "max_score": 0.0, "status": "failed",
            "visibility": "hidden",
            "output": "Flagged for the instructor ...\ncell matmul, line 3: `import gc`: gc (x)"}
    ok = {"name": "matmul: works", "score": 5.0, "max_score": 5.0, "status": "passed",
          "output": "", "visibility": "visible"}
    for student, tests in (("mallory", [ok, flag]), ("alice", [ok])):
        folder = tmp_path / student
        folder.mkdir()
        (folder / "01_linear_algebra.json").write_text(json.dumps(
            {"score": 5.0, "max_score": 5.0, "tests": tests}))
    results = load(tmp_path)
    assert needs_review(results) == [("mallory", "01_linear_algebra", "matmul",
                                      ["cell matmul, line 3: `import gc`: gc (x)"])]
    page = render(results, str(tmp_path))
    assert "<b>1</b>needs review" in page and "Needs review" in page
    assert "cell matmul, line 3: `import gc`" in page
    assert "<b>2</b>full marks" in page  # a flag costs nothing

"""The by-hand world is closed (issue 36): the process that grades a by-hand function runs, of the
learner's code, exactly the statements its subset check read, and nothing else: what runs and
what is checked come from one computation (`subset.reach`), so they cannot disagree."""

from __future__ import annotations

import ast

import nbformat
import pytest

from autograder.course import ASSIGNMENTS, subset_rules
from autograder.grade.submission import load_submission
from autograder.instructor.samples import load_scenarios, submission_notebook
from autograder.rules.subset import SETUP

CARRIERS = [(s.assignment, s.student) for a in ASSIGNMENTS for s in load_scenarios(a)
            if s.student.startswith("closed_")]


def _write(nb, tmp_path, name="nb.ipynb"):
    path = tmp_path / name
    nbformat.write(nb, path)
    return path


def _statements_run(source: str) -> list[str]:
    """The top-level statements of a program cell, unparsed (comparable whatever the layout)."""
    return [ast.unparse(n) for n in ast.parse(source).body]


def _learner_code_run(submission, function) -> str:
    cells = dict(submission.programs)[function]
    return "\n".join(c["source"] for c in cells[_setup_count(submission):])


def _setup_count(submission) -> int:
    from autograder.grade.submission import _source
    return len(_source(submission.assignment.id).setup)


@pytest.mark.parametrize("assignment, student", CARRIERS, ids=lambda x: x)
def test_what_runs_is_what_the_check_read(assignment, student, tmp_path):
    """For every by-hand function the grader runs: the learner's statements its process runs are
    exactly those the subset check reads for it (plus each cell's `from __future__` lines), and
    a refused function runs nothing."""
    from autograder.grade.submission import _source
    from autograder.rules.subset import reach
    scenario = next(s for s in load_scenarios(assignment) if s.student == student)
    submission = load_submission(_write(submission_notebook(scenario), tmp_path))
    setup = len(_source(assignment).setup)
    programs = dict(submission.programs)
    for function in submission.assignment.functions:
        rules = subset_rules(submission.assignment, function)
        if rules is None:
            continue
        if function in dict(submission.refused):
            assert function not in programs
            continue
        cells = programs[function]
        program = [{"source": c["source"], "label": SETUP if i < setup else f"cell {i}",
                    "answer": None} for i, c in enumerate(submission.cells[:len(cells)])]
        found, statements = reach(program, function, rules)
        assert found == []
        for i in range(setup, len(cells)):
            expected = [ast.unparse(n) for n in statements.get(i, [])]
            if expected:
                tree = ast.parse(program[i]["source"])
                expected += [ast.unparse(n) for n in tree.body if isinstance(n, ast.ImportFrom)
                             and n.module == "__future__"]
            run = _statements_run(cells[i]["source"]) if cells[i]["source"].strip() else []
            assert sorted(run) == sorted(expected), (function, i)
        assert any(_statements_run(c["source"]) for c in cells[setup:] if c["source"].strip())


def test_an_added_statement_bound_to_a_local_name_never_runs(tmp_path):
    scenario = next(s for s in load_scenarios("01_linear_algebra")
                    if s.student == "closed_local_name_carrier")
    submission = load_submission(_write(submission_notebook(scenario), tmp_path))
    code = _learner_code_run(submission, "matmul")
    assert "_install" not in code and "functools.reduce = reduce" not in code
    assert "import functools, operator, torch" in code  # what the answer does use runs
    assert "def matmul" in code


def test_a_demo_line_and_an_unused_import_of_the_answer_cell_never_run(tmp_path):
    scenario = next(s for s in load_scenarios("01_linear_algebra")
                    if s.student == "closed_demo_lines_never_run")
    submission = load_submission(_write(submission_notebook(scenario), tmp_path))
    code = _learner_code_run(submission, "matmul")
    assert "numpy" not in code and "print(" not in code and "A @ B" not in code
    assert submission.refused == ()


def test_the_top_level_of_another_answer_cell_never_runs(tmp_path):
    """03: the mse_loss cell's top level installs a patch; mse_loss_grad's process never runs it."""
    scenario = next(s for s in load_scenarios("03_chain_rule")
                    if s.student == "closed_refused_cell_top_level")
    submission = load_submission(_write(submission_notebook(scenario), tmp_path))
    for function in ("mse_loss_grad", "linear_backward", "mlp_backward"):
        code = _learner_code_run(submission, function)
        assert "_install" not in code and "def mse_loss(" not in code, function


def test_an_answer_cell_moved_above_a_check_carries_nothing_into_it(tmp_path):
    """06: layer_grad_norms (no by-hand rule) moved above tests_train_mlp, its top level holding
    code: train_mlp's process runs none of that cell."""
    a = ASSIGNMENTS["06_putting_it_together"]
    scenario = next(s for s in load_scenarios(a.id) if s.student == "solution")
    nb = submission_notebook(scenario)
    ids = [c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells]
    moved = nb.cells.pop(ids.index("layer_grad_norms"))
    moved.source += "\n\nimport functools\nfunctools.reduce = print  # a carrier\n"
    ids = [c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells]
    nb.cells.insert(ids.index("train_mlp"), moved)
    submission = load_submission(_write(nb, tmp_path))
    code = _learner_code_run(submission, "train_mlp")
    assert "carrier" not in code and "layer_grad_norms" not in code
    assert "def train_mlp" in code


def test_the_rebuilt_cell_keeps_line_numbers_and_statements_that_share_a_line(tmp_path):
    from autograder.grade.submission import only
    source = "import math; X = 1  # x\nimport os\n\n@functools.cache\ndef f(a):\n    return math.pi * a\n"
    tree = ast.parse(source)
    text = only(source, [tree.body[0], tree.body[3]])
    lines = text.split("\n")
    assert lines[0] == "import math" and lines[1] == "" and lines[3] == "@functools.cache"
    assert "os" not in text and "X = 1" not in text
    text = only(source, [tree.body[1]])
    assert text.split("\n")[0] == "X = 1"
    compile(text, "t", "exec")

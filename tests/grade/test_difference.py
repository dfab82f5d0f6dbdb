"""The comparison layer describes a difference it has no hint for (autograder/grade/difference.py):
each shape of difference is named from the values and the call's inputs, and a difference of
no known shape is not described at all (a description is never a guess)."""

from __future__ import annotations

import pytest
import torch

from autograder.grade.compare import GradingFailure, expect_tensor, note_inputs
from autograder.grade.difference import describe, describe_shape

torch.manual_seed(0)
X = torch.randn(8, 3, dtype=torch.float64)
W = torch.randn(4, 3, dtype=torch.float64)
B = torch.randn(4, dtype=torch.float64)
Y = X @ W.T + B
INPUTS = [("x", X), ("W", W), ("b", B), ("lr", 0.05)]
Z = torch.tensor([-2.0, -0.5, 0.0, 0.0, 0.5, 3.0], dtype=torch.float64)
STEP = (Z > 0).double()
LOSSES = torch.tensor([4.0, 3.0, 2.5, 2.2, 2.0], dtype=torch.float64)


def _after(k):
    wrong = LOSSES.clone()
    wrong[k:] += 0.3
    return wrong


def _row(i):
    wrong = Y.clone()
    wrong[i] += 1
    return wrong


CASES = {  # name -> (got, expected, inputs, words the description holds)
    "batch-size factor": (Y * 8, Y, INPUTS, ["8 times", "x.shape[0]", "batch size"]),
    "number of entries": (Y / 24, Y, INPUTS, ["divided by 24", "x.numel()"]),
    "learning rate factor": (Y * 0.05, Y, INPUTS, ["0.05 times", "lr"]),
    "factor 2": (Y * 2, Y, INPUTS, ["2 times"]),
    "unnamed factor": (Y * 3.7, Y, INPUTS, ["3.7 times the expected value"]),
    "sign": (-Y, Y, INPUTS, ["wrong sign"]),
    "offset": (Y + 0.05, Y, INPUTS, ["off by the same amount, +0.05", "lr"]),
    "bias left out": (X @ W.T, Y, INPUTS, ["every row is off by the same vector", "-b"]),
    "bias subtracted": (X @ W.T - B, Y, INPUTS, ["-2 · b"]),
    "all zeros": (torch.zeros_like(Y), Y, INPUTS, ["every entry of your result is 0"]),
    "nan": (torch.where(Z == 0, torch.nan, STEP), STEP, [("z", Z)], ["2 of 6 entries are NaN"]),
    "input returned": (Z.clone(), torch.relu(Z), [("z", Z)], ["equals the input z"]),
    "transposed": (Y[:4].T.contiguous(), Y[:4], INPUTS, ["transposed"]),
    "kink at zero": ((Z >= 0).double(), STEP, [("z", Z)], ["exactly where z == 0", "2 of 6"]),
    "negatives": (torch.where(Z < 0, Z, torch.relu(Z)), torch.relu(Z), [("y", Z + 1), ("z", Z)],
                  ["equals the input z"]),
    "first row": (_row(0), Y, INPUTS, ["only the first row"]),
    "last column": (torch.cat([Y[:, :3], Y[:, 3:] * 1.5], dim=1), Y, INPUTS, ["only the last column"]),
    "departs after step 2": (_after(2), LOSSES, [], ["first 2 entries are right", "index 2"]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_difference_of_a_known_shape_is_described(case):
    got, expected, inputs, words = CASES[case]
    said = describe(got, expected, inputs, rtol=1e-7, atol=1e-9)
    assert all(w in said for w in words), said


def test_a_difference_of_no_known_shape_is_not_described():
    noisy = Y + torch.randn(Y.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    assert describe(noisy, Y, INPUTS) == ""
    assert describe(Y.sin(), Y, INPUTS) == ""


def test_a_transposed_result_of_the_wrong_shape_is_described():
    assert "transposed" in describe_shape(Y.T, Y, INPUTS)


def test_the_message_describes_only_when_no_listed_hint_matches():
    """A listed mistake's hint wins; without one, the message says what differs."""
    note_inputs(INPUTS)
    with pytest.raises(GradingFailure) as failed:
        expect_tensor(Y * 8, Y, "f(x, W, b)", mistakes={"a listed mistake": lambda: Y * 8})
    assert "Hint: a listed mistake" in str(failed.value) and "What differs" not in str(failed.value)
    with pytest.raises(GradingFailure) as failed:
        expect_tensor(Y * 8, Y, "f(x, W, b)", mistakes={"another mistake": lambda: Y * 2})
    assert "What differs: every entry is 8 times the expected value" in str(failed.value)
    assert "right shape but wrong values" in str(failed.value)


LISTS = {  # got -> words of the description, against EXPECTED_LIST
    "reversed": (["d", "b", "c", "b", "a"], ["reverse order"]),
    "sorted": (["a", "b", "b", "c", "d"], ["sorted"]),
    "moved": (["a", "c", "b", "b", "d"], ["another order", "position 1 holds c where b comes"]),
    "repeat dropped": (["a", "b", "c", "d"], ["b (once, twice expected)"]),
    "repeated": (["a", "b", "b", "c", "b", "d"], ["b (3 times, twice expected)"]),
    "extra": (["a", "b", "c", "b", "d", "x"], ["first 5", "do not belong: x"]),
    "missing": (["a", "b", "c", "b"], ["missing items: d"]),
}
EXPECTED_LIST = ["a", "b", "c", "b", "d"]


@pytest.mark.parametrize("case", sorted(LISTS))
def test_a_wrong_list_is_described_by_kind(case):
    from autograder.grade.difference import describe_list
    got, words = LISTS[case]
    said = describe_list(got, EXPECTED_LIST)
    assert all(w in said for w in words), said

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


def test_a_plain_factor_is_not_named_after_itself():
    """2 and 1/2 are factors worth looking for (a missing or extra 2, a halving), but saying that
    "2 is 2" names nothing: a factor with no input behind it is given as a number alone."""
    for got, words in ((Y * 2, "every entry is 2 times the expected value."),
                       (Y / 2, "every entry is the expected value divided by 2."),
                       (Y * 4, "every entry is 4 times the expected value.")):
        said = describe(got, Y, [("z", Z)], rtol=1e-7, atol=1e-9)
        assert said == words, said


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


SHAPES = {  # name -> (got, expected, words the description holds)
    "summed over the batch, dimension kept": (Y.sum(0, keepdim=True), Y, ["summed over dim 0"]),
    "mean over every entry": (Y.mean(), Y, ["mean of all", "one number", "no reduction"]),
    "sum over every entry": (B.sum(), B, ["sum of all", "one number"]),
    "a size-1 dimension too many": (B[None], B, ["values are right", "dimension of size 1",
                                                 "keepdim"]),
    "a size-1 dimension missing": (Y[:1].squeeze(0), Y[:1], ["values are right",
                                                             "dimension of size 1"]),
}


@pytest.mark.parametrize("case", sorted(SHAPES))
def test_a_result_reduced_or_with_a_size_one_dimension_is_described(case):
    got, expected, words = SHAPES[case]
    said = describe_shape(got, expected, INPUTS, rtol=1e-7, atol=1e-9)
    assert all(w in said for w in words), said


def test_a_wrong_shape_of_no_known_kind_is_not_described():
    assert describe_shape(Y.max(0).values, Y, INPUTS) == ""
    assert describe_shape(torch.zeros(4, dtype=torch.float64), Y, INPUTS) == ""


def test_a_python_number_where_a_tensor_belongs_says_where_it_came_from():
    note_inputs([("y_hat", Y[:, 0]), ("y", Y[:, 1])])
    with pytest.raises(GradingFailure) as failed:
        expect_tensor(float(Y.mean()), Y.mean(), "f(y_hat, y)")
    assert "Python float" in str(failed.value) and ".item()" in str(failed.value)
    assert "0-dim" in str(failed.value)
    empty = torch.zeros(0, 3, dtype=torch.float64)
    note_inputs([("x", empty), ("grad_out", torch.zeros(0, 2, dtype=torch.float64))])
    with pytest.raises(GradingFailure) as failed:
        expect_tensor(0, torch.zeros(2, 3, dtype=torch.float64), "g(x, grad_out)")
    assert "empty" in str(failed.value) and "sum()" in str(failed.value)
    note_inputs(INPUTS)
    with pytest.raises(GradingFailure) as failed:
        expect_tensor(3, Y, "f(x, W, b)")
    assert "Python int" in str(failed.value) and "empty" not in str(failed.value)


def test_an_inverted_condition_is_described():
    said = describe(1 - STEP, STEP, [("z", Z)], rtol=1e-7, atol=1e-9)
    assert "inverted" in said, said
    grad = torch.randn(Z.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    said = describe(grad * (1 - STEP), grad * STEP, [("grad_out", grad), ("z", Z)], rtol=1e-7, atol=1e-9)
    assert "inverted" in said and "grad_out" in said, said



@pytest.mark.parametrize("key, got, named", [
    ('"W1"', W.T.contiguous(), '"W2"'),   # another entry's value, of another shape
    ('"b1"', B * 2, '"b2"'),              # another entry's value, of the same shape
    ('"W1"', W + 1, None),                 # no other entry's value
])
def test_a_value_put_where_another_belongs_is_named_and_only_then(key, got, named):
    """compare.misplaced(): the hint fires when the entry holds another entry's expected value."""
    from autograder.grade.compare import misplaced
    expected = {'"W1"': W, '"b1"': B, '"W2"': W.T.contiguous(), '"b2"': B * 2}
    with pytest.raises(GradingFailure) as failed:
        expect_tensor(got, expected[key], f"mlp[{key}]", mistakes=misplaced(expected, key))
    said = str(failed.value)
    if named:
        assert f"Hint: {key} holds the value that belongs in {named}" in said, said
    else:
        assert "belongs in" not in said, said


def test_a_listed_mistake_that_gives_the_same_value_is_named_alone():
    """A listed hint that says the same in the exercise's words ("that is grad_W") is named alone,
    not as one of two alternatives with the misplaced entry's."""
    from autograder.grade.compare import misplaced
    expected = {"grad_x": W, "grad_W": W.T.contiguous()}
    mistakes = {"that is grad_W: return the gradients in the order of forward's inputs.":
                lambda: W.T.contiguous()} | misplaced(expected, "grad_x")
    with pytest.raises(GradingFailure) as failed:
        expect_tensor(W.T.contiguous(), W, "grad_x", mistakes=mistakes)
    said = str(failed.value)
    assert "Hint: that is grad_W" in said and "belongs in" not in said, said

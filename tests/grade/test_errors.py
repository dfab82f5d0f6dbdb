"""What an error means, read from its message (autograder/grade/errors.py): each entry is found
in the message today's torch raises, with the sizes and dtypes of that message; a message no
entry knows gets no meaning (and no invented cause)."""

from __future__ import annotations

import pytest
import torch

from autograder.grade.errors import DESCRIBING, NAMING, describing, naming, own_check


def _leaf():
    return torch.randn(3, requires_grad=True)


def _backward_twice():
    w = _leaf()
    loss = (w * w).sum()
    loss.backward()
    loss.backward()


def _no_grad_loss():
    w = _leaf()
    with torch.no_grad():
        loss = (w * 2).sum()
    loss.backward()


def _saved_value_changed():
    a = _leaf()
    b = a.exp()
    b.add_(1)
    b.sum().backward()


def _none_grad_update():
    p = _leaf()
    return p - 0.1 * p.grad


RAISES = [  # (what raises, words its meaning must hold)
    (_backward_twice, ["twice", "every step"]),
    (_no_grad_loss, ["no_grad", "did not record"]),
    (lambda: _leaf().sub_(1.0), ["in place", "torch.no_grad()"]),
    (lambda: _leaf()[0].add_(1.0), ["in place", "torch.no_grad()"]),
    (_saved_value_changed, ["saved", "out of place"]),
    (lambda: (_leaf() * 2).backward(), ["scalar", ".sum()"]),
    (lambda: torch.randn(4, 3) @ torch.randn(2, 3), ["(4, 3)", "(2, 3)", "3 and 2", ".T"]),
    (lambda: torch.nn.functional.linear(torch.randn(4, 3), torch.randn(3, 2)), ["(4, 3)", "(2, 3)"]),
    (lambda: torch.randn(4, 3) + torch.randn(4, 2), ["sizes 3 and 2 in dimension 1"]),
    (lambda: torch.randn(4, 3, dtype=torch.float64) @ torch.randn(3, 2), ["double", "float", "dtype"]),
    (_none_grad_update, ["None", ".grad"]),
    (lambda: _leaf().grad.zero_(), ["None", ".grad"]),
    (lambda: torch.randn(3, 4).sum(dim=2), ["dimension 2", "-2 to 1"]),
    (lambda: torch.randn(2, 3)[0, 3], ["index 3", "size is 3", "dimension 1"]),
    (lambda: torch.randn(2, 3)[2], ["index 2", "size is 2", "dimension 0"]),
    (lambda: torch.stack([]), ["empty", "no rows"]),
]


@pytest.mark.parametrize("raises, words", RAISES, ids=lambda v: getattr(v, "__name__", None))
def test_the_error_torch_raises_today_is_described_with_its_sizes(raises, words):
    with pytest.raises(Exception) as caught:
        raises()
    meaning = describing(str(caught.value))
    assert meaning and all(w in meaning for w in words), (str(caught.value), meaning)


def test_every_description_is_raised_above():
    found = set()
    for raises, _ in RAISES:
        with pytest.raises(Exception) as caught:
            raises()
        found |= {p for p in DESCRIBING if p.search(str(caught.value))}
    assert found == set(DESCRIBING)


@pytest.mark.parametrize("raises", [
    lambda: bool(torch.ones(2)),
    lambda: float(torch.ones(2)),
])
def test_a_naming_meaning_is_found_in_todays_message(raises):
    with pytest.raises(Exception) as caught:
        raises()
    assert naming(str(caught.value)) in NAMING.values()


def test_a_message_no_entry_knows_gets_no_meaning():
    assert describing("division by zero") == "" and naming("list index out of range") == ""


OWN_GUARD = '''def matmul(A, B):
    n, k = A.shape
    if A.shape[0] != B.shape[1]:
        raise ValueError(
            "shapes do not match")
    assert A.dim() == 3, "A must be a matrix"
    try:
        return A @ B
    except RuntimeError:
        raise
'''


@pytest.mark.parametrize("line, words", [
    (4, ["`if A.shape[0] != B.shape[1]:` (line 3) holds for these arguments",
         '`raise ValueError("shapes do not match")` ran']),
    (5, ["`if A.shape[0] != B.shape[1]:`"]),     # the traceback may give the raise's last line
    (6, ["`assert A.dim() == 3` (line 6) is false for these arguments"]),
])
def test_a_check_of_the_learners_own_that_refuses_valid_arguments_is_named(line, words):
    said = own_check(OWN_GUARD, line)
    assert said and all(w in said for w in words), said


@pytest.mark.parametrize("line", [2, 8, 10, 99])
def test_an_error_not_raised_by_a_check_of_the_learners_own_names_nothing(line):
    """Unpacking, an operation, a bare re-raise (the cause is the first error), a line that is not
    there: the error is not the learner's own refusal."""
    assert own_check(OWN_GUARD, line) == ""

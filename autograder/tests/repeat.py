"""Calling a graded function again, in the same process: state kept between calls shows there.

A learner's process serves every call of one graded function (autograder/jail/sandbox.py: the child
started for a function answers all of that function's calls, test after test), so whatever a
function keeps between calls (a mutable default argument such as `seen=set()`, a global cache,
an attribute on the function) is still there on the next call. Two ways to look for it:

* `again(check, ...)`: run a test's own check (it calls the learner and compares) a second
  time with the same inputs. A failure only the second time is state, whatever the value.
* `SECOND_CALL`: a driver (trusted code run in the learner's process) that calls the function
  twice on the very same objects (one graph, one model) and returns the second answer, for
  inputs that a Recipe builds afresh on every call.
"""

from __future__ import annotations

from autograder.grade.compare import GradingFailure, fail
from autograder.jail.inside.wire import Recipe

STATE = ("{name} keeps state between calls: a mutable default argument (seen=set(), "
         "out=[], cache={{}}) is made once, when the def runs, and every later call shares it; "
         "so does a global. Make such things inside the function, on every call.")

DRIVERS = '''
def second_call(function, *args):
    """The learner's function called twice on the same objects; the second answer."""
    function(*args)
    return function(*args)
'''

SECOND_CALL = Recipe(DRIVERS, "second_call")


def state_hint(name: str) -> str:
    return STATE.format(name=name)


def again(check, *args, name: str, **kwargs):
    """`check(*args, **kwargs)` twice in a row: the same inputs, the same learner process.

    When the first run passes and the second fails, the first answer was right, so the
    mistake is state kept between calls: the message says so and drops the value hints the
    check may have matched (they would blame a mistake the first call showed absent).
    """
    __tracebackhide__ = True
    result = check(*args, **kwargs)
    try:
        check(*args, **kwargs)
    except GradingFailure as failure:
        text = str(failure).split("\nHint:")[0]
        fail(f"The first call of {name} was right, but a second call with the same inputs was "
             f"not: {text}\nHint: {state_hint(name)}")
    return result

"""What a hidden-test cell calls in the notebook's own kernel: nothing that can score.

The score of a hidden-test cell comes from `autograder.nbgrader.grades.TrustedGrades`,
which replaces the cell's outputs after the kernel ran. Should autograde run without
it (a misconfigured course), this raises, so the cell scores 0 instead of the full
marks nbgrader gives a cell without an error: the grade fails closed.
"""


class HiddenTestsNotRecorded(RuntimeError):
    """nbgrader ran a hidden-test cell without the trusted preprocessor."""


def hidden_tests(function: str) -> None:
    raise HiddenTestsNotRecorded(
        f"the hidden tests of {function} are scored by the course's grader, not in this kernel: "
        "nbgrader_config.py must list autograder.nbgrader.grades.TrustedGrades in "
        "c.Autograde.autograde_preprocessors")

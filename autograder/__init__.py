"""Grader for the course pack. The map (each folder's __init__ says more):

course.py      the contract every room reads: assignments, graded functions, operator lists
grade/         one notebook or a batch -> scores and messages (submission, plan, batch, plugin, student)
rules/         what a by-hand answer may use, read from its code before it runs (subset, review)
jail/          the trust boundary: the grader's side here, the learner's side in jail/inside/
tests/         the hidden tests, one module per assignment (run by grade/plugin.py)
nbgrader/      nbgrader's steps replaced by the grader's (scores, feedback, kernels, repair)
instructor/    build, samples, demo, learner config, Gradescope zip, class report
similarity/    which learners handed in alike answers;  tutorial/: the PyTorch tutorial build
cli.py         python -m autograder {grade, report, similarity, gradescope, build, demo, tutorial}
"""

# nbgrader settings for this course; everything else is nbgrader's default.
c = get_config()  # noqa: F821 - provided by nbgrader

c.CourseDirectory.course_id = "pytorch-training-loop-math"


# Scores of hidden-test cells come from the jailed grader, never from the learner's kernel,
# which runs jailed too (autograder/nbgrader_plugin.py). execute=False: a fast autograde that
# does not run the notebooks (the feedback then shows no learner outputs).
try:
    from autograder.nbgrader_plugin import autograde_preprocessors
except ImportError:  # a learner's environment without the grader: validate needs none of it
    pass
else:
    c.Autograde.autograde_preprocessors = autograde_preprocessors(execute=True)

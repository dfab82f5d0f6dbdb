# nbgrader settings for this course; everything else is nbgrader's default.
c = get_config()  # noqa: F821 - provided by nbgrader

c.CourseDirectory.course_id = "pytorch-training-loop-math"

# release / fetch / submit / collect and the Assignment List work out of the box through an
# exchange folder beside this file (nbgrader creates it, world-writable, on the first release).
# On a shared server (JupyterHub) the staff need one root every user can reach: set
#     NBGRADER_EXCHANGE=/srv/nbgrader/exchange
# in the instructor's and the TAs' environment (their shell, the hub spawner's environment), which
# only the line below reads (nbgrader itself does not know it), or edit the line below. A
# c.Exchange.root in /etc/jupyter/ or ~/.jupyter/ does not work for the staff: nbgrader reads this
# file last, and this line sets the exchange again. Learners get a config of their own (their
# JupyterLab may read it from /etc/jupyter/):
#     python -m autograder learner-config --exchange PATH --out DIR
import os  # noqa: E402

c.Exchange.root = os.environ.get(
    "NBGRADER_EXCHANGE", os.path.join(os.path.dirname(os.path.abspath(__file__)), "exchange"))


# Scores of hidden-test cells come from the jailed grader, never from the learner's kernel,
# which runs jailed and limited too (autograder/nbgrader/). execute=False: a fast
# autograde that does not run the notebooks (the feedback then shows no learner outputs).
# The sanitize steps keep a copied answer cell or a deleted hidden-test cell from stopping
# autograde or from scoring unlike `python -m autograder grade`.
try:
    from autograder.nbgrader.grades import autograde_preprocessors, refuse_oversized
    from autograder.nbgrader.repair import name_duplicate_ids, sanitize_preprocessors
except ImportError:  # a learner's environment without the grader: validate needs none of it
    pass
else:
    c.Autograde.sanitize_preprocessors = sanitize_preprocessors()
    # nbformat's warning about a cell id held twice names the notebook it was reading.
    name_duplicate_ids()
    # A submitted file over the grader's limits (size, nesting) is not read: it scores 0 saying so.
    refuse_oversized()
    c.Autograde.autograde_preprocessors = autograde_preprocessors(execute=True)
    # A fresh clone has no gradebook: autograde puts the assignment in it from source/ first.
    from autograder.nbgrader.gradebook import gradebook_from_source
    c.Autograde.pre_convert_hook = gradebook_from_source(c)
    # Autograde's submissions are graded on every core, each by nbgrader's own steps in a worker
    # process (autograder/nbgrader/parallel.py); AUTOGRADER_NBGRADER_JOBS=1: one after another.
    from autograder.nbgrader.parallel import install as parallel_autograde
    parallel_autograde(c)
    # The learner's feedback: no hidden tests, no mark scheme, learner output sanitized (bleach).
    from autograder.nbgrader.feedback import feedback_preprocessors
    c.GenerateFeedback.preprocessors = feedback_preprocessors()
    # nbgrader export: every text cell that a spreadsheet would read as a formula is quoted.
    from autograder.nbgrader.export import SpreadsheetSafeCsvExport
    c.ExportApp.plugin_class = SpreadsheetSafeCsvExport

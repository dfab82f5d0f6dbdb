"""This course in nbgrader: the steps `nbgrader_config.py` installs, one job per module, and the
tests that hold each to its job.

* `grades`: hidden-test scores from the jailed grader (`TrustedGrades`), review comments, files
  over the grader's limits refused before nbgrader reads them (tests/nbgrader/test_nbgrader.py,
  tests/nbgrader/test_nbgrader_hostile.py);
* `kernels`: the learner's notebook run for the feedback in a jailed, limited kernel whose output
  is bounded (tests/nbgrader/test_nbgrader_hostile.py);
* `repair`: notebooks whose metadata would stop autograde or grade unlike the standalone grader
  (tests/nbgrader/test_nbgrader_hostile.py, tests/grade/test_malformed.py);
* `gradebook`: the gradebook filled from source/ on a fresh clone, hand-ins stamped, no manual
  grade for an unanswered written answer (tests/nbgrader/test_feedback.py, tests/nbgrader/test_exchange.py);
* `sanitize`: learner output and markdown made safe to show, math included
  (tests/nbgrader/test_learner_markdown.py, the Chromium test in tests/instructor/test_browser.py);
* `feedback`: no grader-only text, readable pages, the feedback's steps in order
  (tests/nbgrader/test_feedback.py);
* `export`: a spreadsheet-safe grades.csv (tests/grade/test_spreadsheet.py);
* `parallel`: autograde on every core, grades equal to a serial run (tests/nbgrader/test_nbgrader_parallel.py).
"""

from autograder.timing import time_preprocessors

time_preprocessors()   # only under AUTOGRADER_TIMING (bench/profile.py)

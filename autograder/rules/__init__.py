"""What a by-hand answer may use, decided from its code before anything runs.

* `subset`: the subset of Python each by-hand function is written in, read with `ast`; the
  statements it reads are all that runs of the learner's code (a copy sits in every notebook);
* `review`: flags for the instructor in the answers of exercises without a by-hand rule.
"""

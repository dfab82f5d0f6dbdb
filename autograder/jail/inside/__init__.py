"""The learner's side of the trust boundary: everything here runs inside the jail.

Nothing in this package may import the rest of `autograder`: the jail mounts
only this folder (and the package's empty `__init__`), never the hidden tests,
the course files or the grader. The one channel to the grader is a socket
carrying `wire` messages (plain JSON, never pickle):

* `server` is the jailed fork server: it imports torch once, then forks one
  `child` per (submission, graded function) on the grader's request; `reset` kills
  everything the learner started, and removes what it left, when the grader says so;
* `child` runs the learner's cells and answers calls of their functions, with `watch` (the
  recorder of what a call runs, and the watchers that keep it on), `keep` (what puts torch's
  names, the builtins and the hooks back before each call) and `plain` (the checks that the
  grader reads only plain values);
* `wire` is the data format, shared with the grader (which decodes learner
  output with it, so it must stay free of anything that executes data).
"""

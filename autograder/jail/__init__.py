"""The trust boundary.

* `inside/`: the learner's side. Everything there runs in the jail and imports nothing of the
  rest of `autograder`; the jail mounts only that folder (and the empty package `__init__`s).
* `jailer`: builds the bubblewrap jail and talks to the jailed fork server;
* `sandbox`: one submission's code in the jail, a child per graded function, calls over a socket;
* `cgroup`: the jail's memory cgroup.

This file imports nothing: the jail imports it on the way to `inside`.
"""

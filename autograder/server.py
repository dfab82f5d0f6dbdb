"""The fork server that sandboxes are forked from (kept free of torch imports).

It imports torch (via `autograder._child`) once; every sandbox is a fork of
it, so a sandbox starts in milliseconds and never sees the grader's memory.
"""

from __future__ import annotations

import multiprocessing
from multiprocessing import forkserver

CONTEXT = multiprocessing.get_context("forkserver")
CONTEXT.set_forkserver_preload(["autograder._child"])


def warm_up() -> None:
    """Start the fork server now, so it imports torch while the grader does the same."""
    forkserver.ensure_running()


def child_main(*args) -> None:
    """Process target; imports the child side only in the child (pre-loaded there)."""
    from autograder._child import main
    main(*args)

"""The learner's notebook kernel (nbgrader's feedback run), started in the jail with limits.

`python -m autograder.jail.inside.notebook_kernel -f CONNECTION_FILE ...` is `ipykernel_launcher`
with the bounds a grading child has (`child.limit_resources`): the kernel binds its sockets and
imports what every notebook of the course imports (torch, matplotlib), then its address space
may grow by `MEMORY` at most; CPU seconds, processes (of the jail's uid) and file sizes are
bounded and no core file is written. Hard limits: the learner cannot raise them.
"""

from __future__ import annotations

import sys

MEMORY = 2 << 30
CPU_SECONDS = 300
"""The whole notebook, every cell (nbgrader stops a cell after 30 s of wall time)."""
PROCESSES = 64
FILE_BYTES = 32 << 20


def main(argv: list[str]) -> None:
    if sys.path and sys.path[0] in ("", "."):  # as ipykernel_launcher: not the working folder
        del sys.path[0]
    from ipykernel.kernelapp import IPKernelApp
    app = IPKernelApp.instance()
    try:
        app.initialize(argv)  # sockets bound, its threads started
        try:
            import matplotlib  # noqa: F401
            import torch  # noqa: F401
        except ImportError:
            pass
    finally:
        from autograder.jail.inside.child import bound
        bound(MEMORY, CPU_SECONDS, PROCESSES, FILE_BYTES)  # also when the kernel could not start
    app.start()


WARM = ("ipykernel.kernelapp", "matplotlib_inline.backend_inline",
        # what IPKernelApp.initialize imports on top (its debugger, history, completer, the
        # storemagic extension): 0.23 s of each kernel's start otherwise, 0.06 s with them
        "ipykernel.debugger", "IPython.core.completerlib", "IPython.extensions.storemagic",
        "sqlite3", "tornado.queues")
"""What the jailed server imports before it forks the first kernel (once per server); then each
assignment's `notebook_warm` (course.py) before its first kernel."""


def forked(argv: list[str]) -> None:
    """The kernel, in a process forked from the jailed server (torch and matplotlib imported
    there already): as `main`, with figures shown inline as a freshly started kernel shows them
    (the server chose the Agg backend before ipykernel could ask for the inline one)."""
    from ipykernel.kernelapp import IPKernelApp
    sys.argv = [__file__, *argv]  # as a kernel started afresh sees it, not the server's
    app = IPKernelApp.instance()
    try:
        app.initialize(argv)
        import matplotlib.pyplot
        from matplotlib_inline import backend_inline
        matplotlib.pyplot.switch_backend("module://matplotlib_inline.backend_inline")
        backend_inline._enable_matplotlib_integration()
    finally:
        from autograder.jail.inside.child import bound
        bound(MEMORY, CPU_SECONDS, PROCESSES, FILE_BYTES)
    app.start()


if __name__ == "__main__":
    main(sys.argv[1:])

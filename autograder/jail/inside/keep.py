"""Keepers: what puts the child's process back as it was before learner code ran.

All run before the learner's cells: `child._caller` (which `child.main` makes first) takes
the keepers of torch's and the standard modules' names, of the builtins and of the profile and
trace hooks, and calls them at every call; `_originals` is what the grader's stand-ins see as
`torch`; `child.main` then calls `_forget_grader_modules`, so that an import of the grader's
modules in learner code loads new copies.
"""

from __future__ import annotations

import functools
import operator
import sys
import types

import torch


def _namespace_keeper():
    """A function that puts torch's namespaces back as they were now (before learner code):
    learner code may rebind torch.relu or Tensor.detach, which the stand-ins and the report
    rely on. Names torch adds by itself later (a submodule imported lazily) are left alone."""
    import copy
    import itertools
    import math
    import typing
    # torch's, and the standard modules a by-hand answer may use (subset.MODULES): a cell that
    # replaced functools.reduce changes nothing in a call
    owners = [torch, torch.nn, torch.nn.functional, torch.autograd, torch.Tensor,
              torch._C.TensorBase, torch.nn.Parameter, torch.linalg,
              math, itertools, functools, operator, copy, typing]
    saved = [(owner, dict(vars(owner))) for owner in owners]
    keys = {id(owner): (tuple(names), tuple(names.values())) for owner, names in saved}
    setter, deleter, is_, all_, map_, len_ = setattr, delattr, operator.is_, all, map, len

    def restore() -> None:
        for owner, names in saved:
            now = vars(owner)
            k, v = keys[id(owner)]
            if len_(now) == len_(k) and all_(map_(is_, map_(now.get, k), v)):
                continue  # (identity only, in C: a learner's __eq__ is never asked)
            for k, v in names.items():
                if now.get(k) is not v:
                    try:
                        setter(owner, k, v)
                    except (AttributeError, TypeError):
                        pass
            for k in [k for k in now if k not in names and not isinstance(now[k], types.ModuleType)]:
                try:
                    deleter(owner, k)
                except (AttributeError, TypeError):
                    pass
    return restore


def _hooks_keeper():
    """A function that removes every profile, trace and monitoring hook (they run code at each
    function call, the grader's included) and says whether none was set."""
    import threading
    setprofile, settrace, getprofile, gettrace = sys.setprofile, sys.settrace, sys.getprofile, sys.gettrace
    monitoring = getattr(sys, "monitoring", None)
    tools = range(6)
    threading_off = [getattr(threading, n) for n in ("setprofile", "settrace") if hasattr(threading, n)]
    all_threads = [getattr(threading, n) for n in ("setprofile_all_threads", "settrace_all_threads")
                   if hasattr(threading, n)]
    own = {tool for tool in tools if monitoring is not None and monitoring.get_tool(tool) is not None}

    def off() -> bool:
        clean = getprofile() is None and gettrace() is None
        setprofile(None)
        settrace(None)
        for f in threading_off:
            f(None)
        for f in all_threads:
            f(None)
        if monitoring is not None:
            for tool in tools:
                if tool not in own and monitoring.get_tool(tool) is not None:
                    clean = False
                    monitoring.set_events(tool, 0)
                    monitoring.free_tool_id(tool)
        return clean
    return off


def _originals() -> dict:
    """What the grader's stand-ins see as `torch` and `F`: copies of the modules' namespaces
    taken before learner code runs (`torch.relu = torch.sigmoid` in a cell changes nothing)."""
    def copy(module, **extra):
        twin = types.ModuleType(module.__name__)
        vars(twin).update(vars(module))
        vars(twin).update(extra)
        return twin
    functional = copy(torch.nn.functional)
    nn = copy(torch.nn, functional=functional)
    return {"torch": copy(torch, nn=nn), "F": functional, "nn": nn}


def _builtins_keeper():
    """A function that puts back Python's builtins as they were now (learner code may replace
    `isinstance`, `sorted`, ... which the report of a call relies on)."""
    import builtins
    table = builtins.__dict__
    saved = dict(table)

    def restore() -> None:
        if table != saved:
            table.clear()
            table.update(saved)
    return restore


def _forget_grader_modules() -> None:
    """Drop the grader's modules from sys.modules: an import in learner code then loads a new
    copy, never the objects this process runs (which `child._caller` holds by reference)."""
    import sys
    for name in [n for n in sys.modules if n == "autograder" or n.startswith("autograder.")]:
        del sys.modules[name]

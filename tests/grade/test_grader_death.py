"""Nothing outlives the batch grader: `kill -9` of its own process alone (not its group) takes
its workers, their jailed servers and learner processes, and multiprocessing's resource tracker
with it within seconds, and a rerun started at once resumes the batch."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid

import nbformat
import pytest

from autograder.instructor.build import tool_env
from autograder.course import ASSIGNMENTS
from autograder.instructor.samples import load_scenarios, submission_notebook
from conftest import cmdline, descendants, kill_all, proc_stat, wait_until_gone

A1 = "01_linear_algebra"
CLASS = 10
JOBS = 2


def _started(commands: dict[int, str], when: str) -> bool:
    """Whether the run has got as far as `when`: "starting" (every worker has launched its
    jailed server) or "grading" (a server has forked a process for learner code)."""
    servers = {p for p, c in commands.items() if "autograder.jail.inside.server" in c}
    if when == "starting":
        return len(servers) >= JOBS
    return any(proc_stat(p) and proc_stat(p)[1] in servers for p in servers)


@pytest.mark.parametrize("jail, when", [(True, "starting"), (True, "grading"), (False, "grading")],
                         ids=["jail-starting", "jail-grading", "no-jail-grading"])
def test_kill_9_of_the_grader_alone_leaves_no_process_behind(tmp_path, jail, when):
    """kill -9 of the grader's process alone, either while its workers start their jails (before
    bubblewrap has tied a jail to its worker) or while learner code runs."""
    scenario = next(s for s in load_scenarios(A1) if s.student == "solution")
    nb = submission_notebook(scenario)
    sub, out = tmp_path / "submitted", tmp_path / "out"
    for i in range(CLASS):
        path = sub / f"s{i:02d}" / A1 / ASSIGNMENTS[A1].notebook
        path.parent.mkdir(parents=True)
        nbformat.write(nb, path)
    mark = uuid.uuid4().hex
    args = [sys.executable, "-m", "autograder", "grade", str(sub), "--out", str(out),
            "--jobs", str(JOBS), "--only", "matmul", *([] if jail else ["--no-jail"])]
    env = {**tool_env(), "AUTOGRADER_TEST_RUN": mark, "AUTOGRADER_GRADER_VERSION": "test-death"}
    seen: dict[int, str] = {}
    with open(tmp_path / "run1.err", "w") as stderr:
        # a session of its own: the test's cleanup can reach the group, the kill below does not
        first = subprocess.Popen(args, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                                 stderr=stderr, start_new_session=True)

    try:
        deadline = time.monotonic() + 300
        while True:
            seen = descendants([first.pid])
            commands = {p: cmdline(p) for p in seen}
            if _started(commands, when):
                break
            assert first.poll() is None, (tmp_path / "run1.err").read_text()[-2000:]
            assert time.monotonic() < deadline, f"the run never got to {when}"
            time.sleep(0.05)
        os.kill(first.pid, signal.SIGKILL)  # the grader's own process, not its group
        killed = time.monotonic()
        assert first.wait() == -signal.SIGKILL
        assert len(list(out.glob("*/*.json"))) < CLASS, "the batch finished before the kill"
        kinds = {"worker": any("multiprocessing.spawn" in c for c in commands.values()),
                 "tracker": any("resource_tracker" in c for c in commands.values()),
                 "server": any("autograder.jail.inside.server" in c for c in commands.values()),
                 "bwrap": any(c.startswith("bwrap") for c in commands.values()) or not jail}
        assert all(kinds.values()), kinds
        wait_until_gone(seen, mark, killed)
    finally:
        kill_all(seen)
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
            first.wait()

    # a rerun started at once resumes the batch: what the first run wrote stays, the rest is
    # graded once, and nothing of the first run writes into it any more
    before = {p: p.read_bytes() for p in out.glob("*/*.json")}
    second = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert second.returncode == 0, second.stderr[-2000:]
    assert f"graded {CLASS - len(before)} notebooks, {len(before)} already current" in second.stdout
    results = {p: json.loads(p.read_text()) for p in out.glob("*/*.json")}
    assert len(results) == CLASS and not list(out.rglob("*.tmp"))
    assert all(p.read_bytes() == data for p, data in before.items())
    assert all(r["score"] == r["max_score"] > 0 for r in results.values())

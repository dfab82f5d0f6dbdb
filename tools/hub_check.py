#!/usr/bin/env python3
"""`make hub-check`: the course on a real JupyterHub, driven in real browsers (minutes; as root; not
part of `make test`).

What it does, each step timed and checked on what the user sees:

* a side venv (`.venv-hub/`, gitignored): JupyterHub from PyPI, and the pack's dependencies pinned
  as in `.venv` (constraints.txt's torch, the same JupyterLab and nbgrader); the Hub's proxy
  (configurable-http-proxy, npm, in `.venv-hub/node`). Made once, reused afterwards.
* Unix users (`useradd -m`, comment "make hub-check"): an instructor (hcinstructor), a teaching
  assistant (hcta) and three learners (hcalice answers right, hcbob wrong, hceve hostile); the
  staff share a group (hccourse) that owns the course folder, /home/hcinstructor/course, a clone
  of this repository with the pack installed from it (editable) in the side venv.
* the README's multi-user set-up: the exchange /srv/nbgrader/exchange (chmod 777); the learners'
  config /etc/jupyter/nbgrader_config.py (`python -m autograder learner-config`); the instructor
  tools hidden for each learner (tools/hide_instructor_tools.sh user); the staff's
  ~/.jupyter/nbgrader_config.py naming the course root; NBGRADER_EXCHANGE for the staff.
* JupyterHub on 127.0.0.1 (free ports), DummyAuthenticator with a password, LocalProcessSpawner
  (each server runs `jupyterhub-singleuser` from the side venv as its Unix user).
* Chromium (Playwright, headless): the instructor releases from the formgrader (Manage Assignments
  -> Release); each learner fetches from the Assignment List, answers, Validates and submits; the
  instructor collects, autogrades each submission and generates and releases feedback from the
  formgrader (the jailed grader running as the instructor's Unix user); the TA opens the formgrader
  and sees the graded submissions (01 has no written answer to grade by hand); the instructor
  opens the honest learner's submission, then the hostile one's, in the formgrader, and both
  feedbacks, and clicks the hostile cell's `javascript:` link (no dialog may open); the learners
  fetch their feedback and open it as a learner would (Assignment List -> "(view feedback)" -> the
  file in the file browser -> JupyterLab's HTML viewer) and read their score; `nbgrader export`
  (command line, as the instructor: the formgrader has no export) writes the three scores.
* the hostile learner's notebook also holds the payload corpus of tests/nbgrader/test_learner_markdown.py
  (markdown cells, and a code cell showing each payload as HTML and markdown output, which the
  autograde runs): while the instructor opens that submission and its feedback, and while that
  learner reads the feedback, Playwright's request log must hold nothing the honest learner's same
  pages do not also ask for (the page's own scripts and styles, the formgrader's API with the
  submission's id): any other request, to the hub or outside, fails the step.

Ends with the time of every step, a line per finding (only when something is wrong: the README no
longer matches what the hub showed) and one verdict line; exit status 0 only if every step passed.
Whatever happens it stops the hub, the proxy and the users' servers and kernels, removes the users
(and their homes), the group, /srv/nbgrader and /etc/jupyter/nbgrader_config.py; a leftover of an
earlier run is removed first. KEEP=1 keeps the temporary folder (hub log, screenshots).
"""

from __future__ import annotations

import contextlib
import csv
import grp
import hashlib
import json
import os
import pwd
import re
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
from test_learner_markdown import CORPUS  # noqa: E402  (the payloads the hostile learner adds)

VENV = Path(os.environ.get("HUB_VENV", ROOT / ".venv-hub")).resolve()
MAIN_PY = Path(os.environ.get("MAIN_PYTHON", ROOT / ".venv" / "bin" / "python"))
HUB_PYTHON = os.environ.get("HUB_PYTHON", "/usr/bin/python3")
CHP = VENV / "node" / "node_modules" / ".bin" / "configurable-http-proxy"
MARK = "make hub-check"          # the comment (GECOS) of every user it makes
INSTRUCTOR, TA = "hcinstructor", "hcta"
LEARNERS = {"hcalice": "right", "hcbob": "wrong", "hceve": "hostile"}
USERS = [INSTRUCTOR, TA, *LEARNERS]
STAFF_GROUP = "hccourse"
COURSE = Path(f"/home/{INSTRUCTOR}/course")
SRV = Path("/srv/nbgrader")
EXCHANGE = SRV / "exchange"
SRV_MARK = SRV / ".made-by-hub-check"
ETC_CONFIG = Path("/etc/jupyter/nbgrader_config.py")
ETC_MARK = "# made by `make hub-check` (tools/hub_check.py): removed when it ends\n"
ASSIGNMENT = "01_linear_algebra"
NB_PATH = f"{ASSIGNMENT}/linear_algebra.ipynb"
# matmul is worth 5, linear_forward 6 (samples/01_linear_algebra.toml)
EXPECTED = {"hcalice": 11.0, "hcbob": 5.0, "hceve": 6.0}
MAX_SCORE = 11.0
PASSWORD = secrets.token_urlsafe(12)
HOSTILE_LINK = "[x](javascript:alert(1))"

TIMES: list[tuple[str, float, str]] = []
FINDINGS: list[str] = []


def say(msg: str) -> None:
    print(f"hub-check: {msg}", flush=True)


def finding(msg: str) -> None:
    FINDINGS.append(msg)
    say(f"FINDING: {msg}")


class StepFailed(Exception):
    pass


@contextlib.contextmanager
def step(name: str):
    say(f"-- {name}")
    t0 = time.monotonic()
    try:
        yield
    except BaseException as e:
        TIMES.append((name, time.monotonic() - t0, "FAIL"))
        raise StepFailed(f"{name}: {type(e).__name__}: {e}") from e
    TIMES.append((name, time.monotonic() - t0, "ok"))
    say(f"   ok ({time.monotonic() - t0:.1f} s)")


def run(cmd, check=True, **kw) -> subprocess.CompletedProcess:
    r = subprocess.run(cmd, text=True, capture_output=True, **kw)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} exited {r.returncode}:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return r


def user_env(user: str, **extra) -> dict:
    home = pwd.getpwnam(user).pw_dir
    return {"HOME": home, "USER": user, "LOGNAME": user, "LANG": "C.UTF-8", "MPLBACKEND": "agg",
            "PATH": f"{VENV}/bin:/usr/local/bin:/usr/bin:/bin", **extra}


def as_user(user: str, cmd, cwd=None, env_extra=None, check=True, umask=0o007):
    """Run `cmd` as the Unix user (their groups, their HOME), as a login would."""
    return run(cmd, check=check, user=user, group=pwd.getpwnam(user).pw_gid,
               extra_groups=[g.gr_gid for g in grp.getgrall() if user in g.gr_mem],
               env=user_env(user, **(env_extra or {})), cwd=cwd or pwd.getpwnam(user).pw_dir,
               umask=umask)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------------------------------------
# Clean-up: what this script made, and only that


def our_users() -> list[str]:
    return [p.pw_name for p in pwd.getpwall() if p.pw_gecos == MARK]


def kill_user_processes(users) -> None:
    import psutil
    uids = {pwd.getpwnam(u).pw_uid for u in users if u in {p.pw_name for p in pwd.getpwall()}}
    for _ in range(3):
        procs = [p for p in psutil.process_iter(["uids"]) if p.info["uids"] and p.info["uids"].real in uids]
        if not procs:
            return
        for p in procs:
            with contextlib.suppress(psutil.Error):
                p.kill()
        psutil.wait_procs(procs, timeout=5)


def remove_leftovers() -> None:
    users = our_users()
    kill_user_processes(users)
    for u in users:
        run(["userdel", "-r", u], check=False)   # -r: the home and the mail spool
    with contextlib.suppress(KeyError):
        if grp.getgrnam(STAFF_GROUP):
            run(["groupdel", STAFF_GROUP], check=False)
    if SRV_MARK.exists():
        shutil.rmtree(SRV)
    if ETC_CONFIG.exists() and ETC_MARK in ETC_CONFIG.read_text():
        ETC_CONFIG.unlink()
        with contextlib.suppress(OSError):
            ETC_CONFIG.parent.rmdir()          # only when empty


# ---------------------------------------------------------------------------------------------
# The side venv


def venv_pins() -> str:
    """The versions `.venv` has of the packages the learners and the grader see (JupyterLab, its
    server, nbgrader, torch): the side venv gets the same ones; pip picks the rest for its Python."""
    freeze = run([str(MAIN_PY), "-m", "pip", "freeze", "--exclude-editable"]).stdout
    keep = {"jupyterlab", "jupyter_server", "jupyterlab_server", "notebook", "nbgrader", "nbconvert",
            "torch", "ipykernel", "nbclient", "nbformat"}
    return "".join(line + "\n" for line in freeze.splitlines()
                   if line.split("==")[0].lower().replace("-", "_") in keep)


def ensure_venv() -> None:
    pins = venv_pins()
    stamp = VENV / ".installed"
    want = hashlib.sha256((pins + (ROOT / "constraints.txt").read_text() + HUB_PYTHON).encode()).hexdigest()
    if stamp.exists() and stamp.read_text() == want and CHP.exists():
        say(f"   {VENV} is up to date")
        return
    # Every user's server runs from this venv, so its Python must be one every user can run (a
    # venv made from a Python under /root, e.g. pyenv's, fails with "bad interpreter").
    cfg = VENV / "pyvenv.cfg"
    if cfg.exists() and f"home = {Path(HUB_PYTHON).resolve().parent}\n" not in cfg.read_text():
        shutil.rmtree(VENV)
    if not (VENV / "bin" / "python").exists():
        run([HUB_PYTHON, "-m", "venv", str(VENV)])
        run([str(VENV / "bin" / "pip"), "install", "-q", "--upgrade", "pip"])
    pin_file = VENV / "pins.txt"
    pin_file.write_text(pins)
    deps = __import__("tomllib").loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    run([str(VENV / "bin" / "pip"), "install", "-q", "-c", str(ROOT / "constraints.txt"),
         "-c", str(pin_file), "jupyterhub", "setuptools", *deps])
    (VENV / "node").mkdir(exist_ok=True)
    run(["npm", "install", "--silent", "--prefix", str(VENV / "node"), "configurable-http-proxy"])
    stamp.write_text(want)


# ---------------------------------------------------------------------------------------------
# The hub


HUB_CONFIG = """\
# written by tools/hub_check.py
c = get_config()  # noqa: F821
c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = {port}
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = {hub_port}
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{proxy_api_port}"
c.ConfigurableHTTPProxy.command = [{chp!r}]
c.ConfigurableHTTPProxy.pid_file = {tmp!r} + "/proxy.pid"
c.JupyterHub.db_url = "sqlite:///" + {tmp!r} + "/jupyterhub.sqlite"
c.JupyterHub.cookie_secret_file = {tmp!r} + "/cookie_secret"
c.JupyterHub.pid_file = {tmp!r} + "/jupyterhub.pid"
c.JupyterHub.cleanup_servers = True
c.JupyterHub.authenticator_class = "dummy"
c.DummyAuthenticator.password = {password!r}
c.Authenticator.allowed_users = set({users!r})
c.Authenticator.admin_users = {{{instructor!r}}}
c.JupyterHub.spawner_class = "localprocess"
c.Spawner.cmd = [{singleuser!r}]
c.Spawner.default_url = "/lab"
c.Spawner.args = ["--LabApp.news_url=", "--LabApp.expose_app_in_browser=True"]
c.Spawner.environment = {{"MPLBACKEND": "agg"}}
c.Spawner.http_timeout = 120
c.Spawner.start_timeout = 120

STAFF, TA, COURSE, EXCHANGE = {staff!r}, {ta!r}, {course!r}, {exchange!r}


def pre_spawn_hook(spawner):
    if spawner.user.name in STAFF:
        # the course's nbgrader_config.py reads the exchange from here (README)
        spawner.environment["NBGRADER_EXCHANGE"] = EXCHANGE
    if spawner.user.name == TA:
        # nbgrader's formgrader needs the course folder inside the server's root folder
        spawner.notebook_dir = COURSE


c.Spawner.pre_spawn_hook = pre_spawn_hook
"""


class Hub:
    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = tmp / "jupyterhub_config.py"
        config.write_text(HUB_CONFIG.format(
            port=self.port, hub_port=free_port(), proxy_api_port=free_port(), chp=str(CHP),
            tmp=str(tmp), password=PASSWORD, users=USERS, instructor=INSTRUCTOR,
            singleuser=str(VENV / "bin" / "jupyterhub-singleuser"), staff=[INSTRUCTOR, TA], ta=TA,
            course=str(COURSE), exchange=str(EXCHANGE)))
        self.log_path = tmp / "jupyterhub.log"
        self._log = self.log_path.open("w")
        env = {"PATH": f"{VENV}/bin:{CHP.parent}:/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8",
               "HOME": str(tmp)}
        self.proc = subprocess.Popen([str(VENV / "bin" / "jupyterhub"), "-f", str(config)],
                                     cwd=tmp, env=env, stdout=self._log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        deadline = time.monotonic() + 90
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"jupyterhub exited {self.proc.returncode}: {self.log()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}/hub/api/", timeout=3) as r:
                    self.version = json.loads(r.read())["version"]
                    return
            except OSError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the hub did not answer in 90 s: {self.log()[-3000:]}")
                time.sleep(0.3)   # polling the hub until it answers

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        """SIGTERM: the hub stops the users' servers (cleanup_servers) and its proxy."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        pid_file = self.tmp / "proxy.pid"
        if pid_file.exists():
            with contextlib.suppress(ValueError, ProcessLookupError):
                os.kill(int(pid_file.read_text().strip()), signal.SIGKILL)
                say("   killed the proxy the hub left")
        self._log.close()


# ---------------------------------------------------------------------------------------------
# The browser side


class Browser:
    def __init__(self, tmp: Path):
        from playwright.sync_api import sync_playwright
        from test_browser import CHROMIUM, CHROMIUM_ARGS
        self.tmp = tmp
        self._pw = sync_playwright().start()
        self.browser = self._pw.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                                                args=CHROMIUM_ARGS)
        self.pages: dict[str, object] = {}
        self.dialogs: list[tuple[str, str]] = []
        self.page_errors: list[tuple[str, str]] = []

    def login(self, hub: Hub, user: str):
        context = self.browser.new_context(viewport={"width": 1400, "height": 900})
        page = context.new_page()
        page.set_default_timeout(30_000)
        page.on("dialog", lambda d: (self.dialogs.append((user, d.message)), d.dismiss()))
        page.on("pageerror", lambda e: self.page_errors.append((user, str(e))))
        page.goto(f"{hub.url}/hub/login")
        page.fill("#username_input", user)
        page.fill("#password_input", PASSWORD)
        page.click("#login_submit")
        page.wait_for_url(re.compile(rf"/user/{user}/lab"), timeout=150_000)
        page.locator("#jp-main-dock-panel").wait_for(timeout=120_000)
        self.pages[user] = page
        return page

    def screenshot(self, name: str) -> None:
        for user, page in self.pages.items():
            with contextlib.suppress(Exception):
                page.screenshot(path=str(self.tmp / f"{name}-{user}.png"), full_page=True)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.browser.close()
        with contextlib.suppress(Exception):
            self._pw.stop()


def open_assignment_list(page):
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Nbgrader$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Assignment List$")).click()
    released = page.locator("#released_assignments_list")
    panel = page.locator(".jp-MainAreaWidget", has=released)
    panel.wait_for()
    return panel


ERRORS = re.compile("does not exist|could not be created|Error fetching courses|rror")


def wait_saved(page) -> None:
    # the notebook toolbar's Save button (Ctrl+S typed into the editor is not always taken)
    page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Toolbar "
                 "[data-command='docmanager:save']").first.click()
    page.wait_for_function("""() => !document.querySelector(
        '.lm-TabBar-tab.jp-mod-current.jp-mod-dirty')""", timeout=30_000)


def learner_answers(browser: Browser, hub: Hub, user: str, kind: str, course_id: str) -> dict:
    """Log in, fetch, answer, Validate, submit; what the learner saw."""
    from test_browser import Notebook, _cell_indices, _sample_code, _solution
    seen = {}
    page = browser.login(hub, user)
    plugins = page.evaluate("""() => Object.fromEntries(
        ['formgrader', 'create-assignment', 'validate-assignment', 'assignment-list'].map(
            p => [p, window.jupyterapp.hasPlugin('@jupyter/nbgrader:' + p)]))""")
    assert plugins == {"formgrader": False, "create-assignment": False,
                       "validate-assignment": True, "assignment-list": True}, \
        f"{user}'s JupyterLab plugins: {plugins}"
    panel = open_assignment_list(page)
    released = page.locator("#released_assignments_list")
    released.get_by_text(ASSIGNMENT).or_(panel.get_by_text(ERRORS)).first.wait_for(timeout=60_000)
    text = panel.inner_text()
    assert ASSIGNMENT in text and not ERRORS.search(text), f"{user}'s Assignment List: {text}"
    released.get_by_role("button", name="Fetch").click()
    page.locator("#fetched_assignments_list").get_by_text(ASSIGNMENT).wait_for(timeout=60_000)
    fetched = Path(pwd.getpwnam(user).pw_dir) / NB_PATH
    assert fetched.exists() and fetched.stat().st_uid == pwd.getpwnam(user).pw_uid, fetched

    page.goto(f"{hub.url}/user/{user}/lab/tree/{NB_PATH}")
    nb = Notebook(page, _cell_indices(ROOT / "release" / NB_PATH))
    nb.cell("linear_forward").locator(".cm-content").wait_for(state="visible", timeout=60_000)
    page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").wait_for(timeout=60_000)
    if kind in ("right", "wrong"):
        nb.type_code("matmul", _solution("matmul"))
    nb.type_code("linear_forward", _sample_code("w_not_transposed", "linear_forward")
                 if kind == "wrong" else _solution("linear_forward"))
    if kind == "hostile":
        seen["hostile_output"] = add_hostile_cells(page, nb, course_id)
    wait_saved(page)
    kind_, text, failed = nb.validate()
    seen["validate"] = text
    if kind == "right":
        assert "validation-success" in kind_ and "Success" in text, f"{user} Validate: {text}"
    elif kind == "wrong":
        assert "validation-failed" in kind_ and "linear_forward" in text and "transposed" in text, \
            f"{user} Validate: {text}"
    else:
        assert "validation-failed" in kind_ and "matmul" in text and "not written yet" in text, \
            f"{user} Validate: {text}"
    wait_saved(page)
    if kind == "hostile":
        # the notebook saved and closed first (Validate saves it too): JupyterLab would save its
        # own copy over the file
        page.wait_for_timeout(2000)
        page.evaluate("""async () => {
            const widget = window.jupyterapp.shell.currentWidget;
            if (widget && widget.context) { await widget.context.save(); }
            await window.jupyterapp.commands.execute('application:close-all'); }""")
        page.locator(".jp-NotebookPanel").first.wait_for(state="detached")
        page.wait_for_timeout(2000)
        seen["payload_cells"] = add_payload_cells(user)
        page.wait_for_timeout(2000)
        assert holds_payloads(user), "JupyterLab saved its own copy over the payload cells"
    panel = open_assignment_list(page)
    page.locator("#fetched_assignments_list").get_by_role("button", name="Submit").click()
    page.locator("#submitted_assignments_list").get_by_text(ASSIGNMENT).wait_for(timeout=60_000)
    text = panel.inner_text()
    assert not ERRORS.search(text), f"{user}'s Assignment List after Submit: {text}"
    return seen


HOSTILE_CODE = f"""\
import os
for path in ["/home/hcalice/{NB_PATH}", "/home/hcalice", "{COURSE}", "{COURSE}/gradebook.db",
             "{COURSE}/autograder/tests", "{EXCHANGE}/{{course}}/inbound"]:
    try:
        got = os.listdir(path) if os.path.isdir(path) else open(path, "rb").read(64)
        print("READ", path, str(got)[:60])
    except OSError as e:
        print("DENIED", path, type(e).__name__)
try:
    import autograder.tests
    print("READ import autograder.tests", autograder.tests.__path__)
except Exception as e:
    print("DENIED import autograder.tests", type(e).__name__)
"""


HOSTILE_MD = f"Hostile cell: {HOSTILE_LINK} (a javascript: link)"


def add_hostile_cells(page, nb, course_id: str) -> str:
    """A code cell that reads other people's files, then a markdown cell with a javascript: link,
    added at the end of the notebook with the keyboard; returns the code cell's output."""
    last = nb.cells.count() - 1
    nb.cells.nth(last).locator(".jp-InputPrompt").click()
    page.keyboard.press("Escape")
    page.keyboard.press("b")                   # a code cell below
    page.keyboard.press("Enter")
    page.keyboard.insert_text(HOSTILE_CODE.replace("{course}", course_id))
    nb.at["hostile_code"] = last + 1
    page.keyboard.press("Shift+Enter")
    nb.wait_ran("hostile_code", None)
    out = nb.output("hostile_code")
    nb.cell("hostile_code").locator(".jp-InputPrompt").click()
    page.keyboard.press("Escape")
    page.keyboard.press("b")
    page.keyboard.press("m")                   # made a markdown cell
    page.keyboard.press("Enter")
    page.keyboard.insert_text(HOSTILE_MD)
    page.keyboard.press("Shift+Enter")          # rendered
    nb.cells.nth(last + 2).locator(".jp-RenderedMarkdown", has_text="Hostile cell").wait_for()
    return out


def holds_payloads(user: str) -> bool:
    import nbformat
    cells = nbformat.read(Path(pwd.getpwnam(user).pw_dir) / NB_PATH, as_version=4).cells
    return [c.source for c in cells[1:1 + len(CORPUS)]] == CORPUS


def add_payload_cells(user: str) -> int:
    """The payload corpus of tests/nbgrader/test_learner_markdown.py below the first cell of the learner's
    saved notebook, written into the file as that learner could (not typed into JupyterLab: there
    the learner's own browser would render them, and `![x](/logout)` logs the learner out): a
    markdown cell per payload, then a code cell that shows each as HTML and markdown output (the
    autograde runs it, in the jail). Returns how many cells were added."""
    import nbformat
    from nbformat.v4 import new_code_cell, new_markdown_cell

    from test_browser import payload_code
    path = Path(pwd.getpwnam(user).pw_dir) / NB_PATH
    nb = nbformat.read(path, as_version=4)
    cells = [new_markdown_cell(p) for p in CORPUS] + [new_code_cell(payload_code(CORPUS))]
    nb.cells[1:1] = cells
    new = path.with_name(f".{path.name}.payload")
    nbformat.write(nb, new)
    os.chown(new, pwd.getpwnam(user).pw_uid, pwd.getpwnam(user).pw_gid)
    os.replace(new, path)
    nbformat.read(path, as_version=4)    # whole, as the learner's submit will copy it
    return len(cells)


# ---------------------------------------------------------------------------------------------
# What learner content makes the reader's browser ask for

REQUESTS: dict[str, tuple[int, int]] = {}
"""view -> (requests of the honest learner's page, of the hostile learner's page)"""


@contextlib.contextmanager
def request_log(page, frames_only: bool = False):
    """Playwright's request log of `page` (its frames, its popups' openers aside) while the block
    runs; `frames_only`: only what its iframes ask for (JupyterLab's HTML viewer, whose page keeps
    polling the server's API on its own)."""
    seen: list[str] = []

    def on_request(request) -> None:
        try:
            frame = request.frame
        except Exception:   # a service worker's request has no frame
            frame = None
        if not frames_only or (frame is not None and frame != page.main_frame):
            seen.append(request.url)

    page.on("request", on_request)
    try:
        yield seen
    finally:
        page.remove_listener("request", on_request)


def _normal(url: str, user: str) -> str:
    """A request with what differs between two learners' same page made alike: the user's name,
    nbgrader's ids (32 hex digits), the viewer's blob: URL, the feedback's timestamp folder."""
    url = url.replace(user, "<user>")
    url = re.sub(r"[0-9a-f]{32}", "<id>", url)
    url = re.sub(r"^blob:.*", "blob:", url)
    return re.sub(r"feedback/[^/]*\d{4}-\d\d-\d\d[^/]*/", "feedback/<timestamp>/", url)


def still_logged_in(page, hub: Hub, user: str) -> None:
    """`user`'s server still takes the browser's cookie: the formgrader opens (no /hub/login) and
    /api/status answers 200 (with the XSRF header JupyterLab sends; the hub asks it of every
    cookie-authenticated API request)."""
    page.goto(f"{hub.url}/user/{user}/formgrader/manage_assignments")
    assignment_row(page)
    assert "/login" not in page.url, f"{user} was logged out: {page.url}"
    status = page.evaluate("""async url => {
        const m = document.cookie.match(/(?:^|; )_xsrf=([^;]*)/);
        const r = await fetch(url, {headers: m ? {'X-XSRFToken': decodeURIComponent(m[1])} : {}});
        return r.status; }""", f"{hub.url}/user/{user}/api/status")
    assert status == 200, f"{user} was logged out: /api/status answered {status}"


def no_learner_requests(view: str, baseline: tuple[str, list[str]], got: tuple[str, list[str]]) -> None:
    """`got` (user, its page's requests) asks for nothing `baseline`'s same page does not: else the
    learner's content made the reader's browser send it. Records the figures."""
    from test_learner_markdown import BEACON
    expected = {_normal(u, baseline[0]) for u in baseline[1]}
    extra = sorted({_normal(u, got[0]) for u in got[1]} - expected)
    outside = sorted({u for u in got[1] if BEACON in u})
    REQUESTS[view] = (len(baseline[1]), len(got[1]))
    say(f"   {view}: {len(got[1])} requests ({got[0]}), {len(baseline[1])} for {baseline[0]}'s; "
        f"{len(extra)} only for {got[0]}'s")
    assert not extra and not outside, f"{view}: requests from {got[0]}'s content: {extra + outside}"


# ---------------------------------------------------------------------------------------------
# Set-up on the machine (as root)


def set_up(course_id: str) -> None:
    run(["groupadd", STAFF_GROUP])
    for u in USERS:
        run(["useradd", "-m", "-c", MARK, "-s", "/bin/bash",
             *(["-G", STAFF_GROUP] if u in (INSTRUCTOR, TA) else []), u])
    for u in [TA, *LEARNERS]:                  # README: make learners' homes 0700
        os.chmod(pwd.getpwnam(u).pw_dir, 0o700)
    staff_gid = grp.getgrnam(STAFF_GROUP).gr_gid
    ihome = Path(pwd.getpwnam(INSTRUCTOR).pw_dir)
    os.chown(ihome, pwd.getpwnam(INSTRUCTOR).pw_uid, staff_gid)
    os.chmod(ihome, 0o750)                     # the TA may enter, nobody else
    # the README's "git clone <this repo> course" (the committed state of this checkout)
    run(["git", "clone", "-q", "--depth", "1", "--no-hardlinks", f"file://{ROOT}", str(COURSE)])
    run([str(VENV / "bin" / "pip"), "install", "-q", "--no-deps", "--no-build-isolation", "-e", str(COURSE)])
    run(["chown", "-R", f"{INSTRUCTOR}:{STAFF_GROUP}", str(COURSE)])
    run(["chmod", "-R", "g+rwX,o-rwx", str(COURSE)])
    run(["find", str(COURSE), "-type", "d", "-exec", "chmod", "g+s", "{}", "+"])
    for u in (INSTRUCTOR, TA):                 # nbgrader's docs: the course root in ~/.jupyter
        folder = Path(pwd.getpwnam(u).pw_dir) / ".jupyter"
        folder.mkdir()
        (folder / "nbgrader_config.py").write_text(
            f"c = get_config()  # noqa: F821\nc.CourseDirectory.root = {str(COURSE)!r}\n")
        run(["chown", "-R", f"{u}:{u}", str(folder)])
    # the exchange and the learners' config (README: Setting up learners' JupyterLab)
    SRV.mkdir()
    SRV_MARK.touch()
    EXCHANGE.mkdir()
    os.chmod(EXCHANGE, 0o777)
    run([str(MAIN_PY), "-m", "autograder", "learner-config", "--exchange", str(EXCHANGE),
         "--out", str(ETC_CONFIG.parent)], cwd=ROOT)
    ETC_CONFIG.write_text(ETC_CONFIG.read_text() + ETC_MARK)
    os.chmod(ETC_CONFIG, 0o644)
    for u in LEARNERS:                         # README: no instructor tools for learners
        as_user(u, ["bash", str(ROOT / "tools" / "hide_instructor_tools.sh"), "user"])
    # every cell in the DOM (cells are addressed by position), no news
    overrides = VENV / "share" / "jupyter" / "lab" / "settings" / "overrides.json"
    overrides.parent.mkdir(parents=True, exist_ok=True)
    overrides.write_text(json.dumps({
        "@jupyterlab/notebook-extension:tracker": {"windowingMode": "none"},
        "@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False}}))


NBGRADER_EXCHANGE_ROOT = """\
from nbgrader.apps.baseapp import NbGrader
app = NbGrader()
app.initialize([])
print(app.config.Exchange.root)
"""


def exchange_config_check() -> None:
    """The instructor's nbgrader, started in their home as the formgrader is, with the README's two
    ways of naming the exchange: c.Exchange.root in a config of theirs (here /etc/jupyter's, which
    the hub's learners need anyway; ~/.jupyter/ is read the same way) or NBGRADER_EXCHANGE."""
    py = str(VENV / "bin" / "python")
    plain = as_user(INSTRUCTOR, [py, "-c", NBGRADER_EXCHANGE_ROOT]).stdout.strip().splitlines()[-1]
    env = as_user(INSTRUCTOR, [py, "-c", NBGRADER_EXCHANGE_ROOT],
                  env_extra={"NBGRADER_EXCHANGE": str(EXCHANGE)}).stdout.strip().splitlines()[-1]
    say(f"   c.Exchange.root in /etc/jupyter: the instructor's nbgrader uses {plain}")
    say(f"   NBGRADER_EXCHANGE={EXCHANGE}: the instructor's nbgrader uses {env}")
    if plain == str(EXCHANGE):
        finding(f"c.Exchange.root in /etc/jupyter/ now reaches the instructor's nbgrader ({plain}): the "
                "README (Setting up learners' JupyterLab) says it does not, and that only "
                "NBGRADER_EXCHANGE works for the staff")
    assert env == str(EXCHANGE), env


# ---------------------------------------------------------------------------------------------
# The formgrader


def formgrader(browser: Browser, hub: Hub, user: str, path: str):
    """A tab of `user`'s browser on their formgrader page `path`."""
    context = browser.pages[user].context
    page = context.new_page()
    page.set_default_timeout(30_000)
    page.on("dialog", lambda d: (browser.dialogs.append((user, d.message)), d.dismiss()))
    page.on("pageerror", lambda e: browser.page_errors.append((user, str(e))))
    page.goto(f"{hub.url}/user/{user}/formgrader/{path}")
    return page


def click_and_read_modal(page, link, timeout=300_000) -> tuple[str, str]:
    """Click a formgrader action; wait for its result box; return (box id, text) and close it."""
    link.click()
    modal = page.locator(".modal.in")
    modal.wait_for(timeout=timeout)
    kind, text = modal.get_attribute("id"), modal.inner_text()
    modal.locator("button.close").first.click()
    modal.wait_for(state="detached", timeout=10_000)
    return kind, text


def assignment_row(page):
    row = page.locator("tr", has=page.locator("td.name", has_text=ASSIGNMENT))
    row.wait_for()
    return row


def submission_rows(page) -> dict[str, dict[str, str]]:
    """manage_submissions: student id -> {status, score} as the page shows them."""
    page.locator("td.student-id", has_text=list(LEARNERS)[0]).wait_for()
    return {r[0]: {"status": r[1], "score": r[2]} for r in page.eval_on_selector_all(
        "tr:has(td.student-id)", """rows => rows.map(r => [
            r.querySelector('td.student-id').innerText.trim(),
            r.querySelector('td.status').innerText.trim(),
            r.querySelector('td.score').innerText.trim()])""")}


def click_hostile_link(page, user: str, browser: Browser) -> str:
    """In the page showing the hostile markdown cell: no element anywhere carries a javascript:
    URL; click every link of that cell's paragraph, or its text "x" when the link was removed;
    no dialog may open. Returns the paragraph's HTML as the page has it."""
    para = page.locator("p", has_text="Hostile cell").first
    para.wait_for(timeout=60_000)
    scripted = page.eval_on_selector_all(
        "[href], [src], [action], [formaction]", """els => els.flatMap(e =>
            ['href', 'src', 'action', 'formaction'].map(a => e.getAttribute(a) || '')
            .filter(v => v.replace(/\\s/g, '').toLowerCase().startsWith('javascript:')))""")
    assert scripted == [], f"javascript: URLs in {user}'s page: {scripted}"
    html = para.evaluate("e => e.innerHTML")
    links = para.locator("a")
    targets = [links.nth(i) for i in range(links.count())] or [para.get_by_text("x", exact=True)]
    for target in targets:
        if target.count():
            target.first.click(force=True, no_wait_after=True)
        page.wait_for_timeout(500)           # a dialog would have opened by now
    seen = [d for d in browser.dialogs if d[0] == user]
    assert seen == [], f"a dialog opened in {user}'s browser: {seen}"
    return html


# ---------------------------------------------------------------------------------------------
# The flow


LEARNER_FEEDBACK: dict[str, tuple[str, list[str]]] = {}


def steps(browser: Browser, hub: Hub, course_id: str) -> None:
    ex = EXCHANGE / course_id
    with step("instructor logs in, releases 01 in the formgrader (Manage Assignments -> Release)"):
        browser.login(hub, INSTRUCTOR)
        fg = formgrader(browser, hub, INSTRUCTOR, "manage_assignments")
        row = assignment_row(fg)
        assert "draft" in row.locator("td.status").inner_text(), row.inner_text()
        kind, text = click_and_read_modal(fg, row.locator("td.release a"))
        assert kind == "success-modal" and "Successfully released" in text, text
        assert (ex / "outbound" / NB_PATH).exists(), f"nothing in {ex}/outbound"
        assignment_row(fg).locator("td.status", has_text="released").wait_for()
    seen = {}
    for user, kind in LEARNERS.items():
        with step(f"{user} ({kind}) logs in, fetches from the Assignment List, answers, Validates, submits"):
            seen[user] = learner_answers(browser, hub, user, kind, course_id)
            if kind == "hostile":
                out = seen[user]["hostile_output"]
                say("   " + out.replace("\n", "\n   "))
                read = [line for line in out.splitlines() if line.startswith("READ")]
                assert "DENIED" in out and not read, f"{user} read what is not theirs: {read}"
    with step("instructor collects in the formgrader (Manage Assignments -> Collect)"):
        fg.reload()
        kind, text = click_and_read_modal(fg, assignment_row(fg).locator("td.collect a"))
        assert kind == "success-modal" and "Successfully collected" in text, text
        fg.reload()
        assignment_row(fg).locator("td.num-submissions", has_text="3").wait_for()
        for user in LEARNERS:
            got = COURSE / "submitted" / user / NB_PATH
            assert got.exists() and got.stat().st_uid == pwd.getpwnam(INSTRUCTOR).pw_uid, got
    with step("instructor autogrades each submission in the formgrader (jailed grader, as hcinstructor)"):
        fg.goto(f"{hub.url}/user/{INSTRUCTOR}/formgrader/manage_submissions/{ASSIGNMENT}")
        for user in LEARNERS:
            row = fg.locator("tr", has=fg.locator("td.student-id", has_text=user))
            kind, text = click_and_read_modal(fg, row.locator("td.autograde a"))
            assert kind == "success-modal" and "Successfully autograded" in text, text
            assert "checksum has changed" not in text, text
        fg.reload()
        rows = submission_rows(fg)
        for user, score in EXPECTED.items():
            assert rows[user]["status"] == "graded", rows
            assert rows[user]["score"].replace(" ", "") == f"{score:g}/{MAX_SCORE:g}", rows
        for user in LEARNERS:
            done = COURSE / "autograded" / user / NB_PATH
            assert done.stat().st_uid == pwd.getpwnam(INSTRUCTOR).pw_uid, f"{done} is not the instructor's"
    with step("TA logs in, sees the graded submissions in the formgrader"):
        page = browser.login(hub, TA)
        plugins = page.evaluate("() => window.jupyterapp.hasPlugin('@jupyter/nbgrader:formgrader')")
        assert plugins, "the TA has no formgrader"
        tfg = formgrader(browser, hub, TA, f"manage_submissions/{ASSIGNMENT}")
        rows = submission_rows(tfg)
        for user, score in EXPECTED.items():
            assert rows[user]["status"] == "graded", rows
            assert rows[user]["score"].replace(" ", "") == f"{score:g}/{MAX_SCORE:g}", rows
        db = COURSE / "gradebook.db"
        ta_writes = lambda: as_user(TA, ["test", "-w", str(db)], check=False).returncode == 0  # noqa: E731
        if ta_writes():
            finding(f"nbgrader made gradebook.db mode {stat.S_IMODE(db.stat().st_mode):o}, which the TA "
                    "can write: the README's `chmod g+w gradebook.db` for a TA is no longer needed")
        as_user(INSTRUCTOR, ["chmod", "g+w", str(db)])   # README: for a TA to grade by hand
        assert ta_writes(), f"the TA cannot write gradebook.db after chmod g+w (the README's step)"
    with step("instructor opens hcalice's, then hceve's submission in the formgrader (request log), "
              "clicks hceve's javascript: link"):
        logs = {}
        for user in ("hcalice", "hceve"):
            fg.goto(f"{hub.url}/user/{INSTRUCTOR}/formgrader/manage_students/{user}/{ASSIGNMENT}")
            with request_log(fg) as seen:
                fg.get_by_role("link", name="linear_algebra").first.click()
                fg.wait_for_url(re.compile(r"/formgrader/submissions/"))
                fg.wait_for_load_state("load")
                fg.locator("#notebook").first.wait_for()
                fg.wait_for_timeout(2000)   # an image or a prefetch may start after the load event
            logs[user] = (user, list(seen))
        no_learner_requests("the formgrader's view of the hand-in", logs["hcalice"], logs["hceve"])
        text = fg.inner_text("body")
        assert "(image removed: /logout)" in text and "(link removed: //" in text, text[:3000]
        html = click_hostile_link(fg, INSTRUCTOR, browser)
        say(f"   the cell as the formgrader shows it: {html}")
        assert "(link removed: javascript:alert(1))" in html, html
        still_logged_in(fg, hub, INSTRUCTOR)
    with step("instructor generates and releases feedback in the formgrader"):
        fg.goto(f"{hub.url}/user/{INSTRUCTOR}/formgrader/manage_assignments")
        kind, text = click_and_read_modal(fg, assignment_row(fg).locator("td.generate-feedback a"))
        assert kind == "success-modal" and "Successfully generated feedback" in text, text
        kind, text = click_and_read_modal(fg, assignment_row(fg).locator("td.release-feedback a"))
        assert kind == "success-modal" and "Successfully released feedback" in text, text
        released = list((ex / "feedback").iterdir())
        assert len(released) == 3, released
        logs = {}
        for user in ("hcalice", "hceve"):
            with request_log(fg) as seen:
                fg.goto(f"{hub.url}/user/{INSTRUCTOR}/files/course/feedback/{user}/{NB_PATH[:-6]}.html")
                fg.wait_for_load_state("load")
                fg.wait_for_timeout(2000)
            logs[user] = (user, list(seen))
        no_learner_requests("the feedback, opened by the instructor", logs["hcalice"], logs["hceve"])
        html = click_hostile_link(fg, INSTRUCTOR, browser)
        say(f"   the cell as hceve's feedback shows it: {html}")
        still_logged_in(fg, hub, INSTRUCTOR)
    for user, kind in LEARNERS.items():
        with step(f"{user} fetches the feedback (Assignment List -> Fetch Feedback) and reads it"):
            page = browser.pages[user]
            panel = open_assignment_list(page)
            submitted = page.locator("#submitted_assignments_list")
            submitted.get_by_role("button", name="Fetch Feedback").click()
            view = submitted.get_by_text("(view feedback)").first
            view.wait_for(timeout=60_000)
            home = Path(pwd.getpwnam(user).pw_dir)
            files = sorted(home.glob(f"{ASSIGNMENT}/feedback/*/linear_algebra.html"))
            assert files, f"no feedback in {home}"
            # as a learner: "(view feedback)" opens the folder in the file browser, a double click
            # opens the file in JupyterLab's HTML viewer (an iframe of the server's origin)
            view.click()
            item = page.locator(".jp-DirListing-item", has_text="linear_algebra.html")
            with request_log(page, frames_only=True) as seen:
                item.first.dblclick()
                iframe = page.locator(".jp-HTMLViewer iframe").last
                iframe.wait_for(timeout=60_000)
                fb = iframe.element_handle().content_frame()
                fb.wait_for_load_state("load")
                fb.locator("body", has_text="Score:").wait_for(timeout=60_000)
                page.wait_for_timeout(2000)
            LEARNER_FEEDBACK[user] = (user, list(seen))
            if kind == "hostile":
                no_learner_requests("the feedback in the learner's HTML viewer",
                                    LEARNER_FEEDBACK["hcalice"], LEARNER_FEEDBACK[user])
            text = fb.inner_text("body")
            head = f"(Score: {EXPECTED[user]:.1f} / {MAX_SCORE:.1f})"
            assert head in text, f"{user}'s feedback does not say {head}: {text[:300]}"
            if kind == "wrong":
                assert "transposed" in text, f"{user}'s feedback names no mistake"
            if kind == "hostile":
                assert "not written yet" in text, f"{user}'s feedback: {text[:500]}"
                click_hostile_link(fb, user, browser)
            say(f"   {user} reads {head} (Assignment List -> (view feedback) -> HTML viewer)")
            assert not ERRORS.search(panel.inner_text()), panel.inner_text()
    with step("instructor exports the grades (nbgrader export, command line)"):
        as_user(INSTRUCTOR, ["nbgrader", "export"], cwd=COURSE,
                env_extra={"NBGRADER_EXCHANGE": str(EXCHANGE)})
        with open(COURSE / "grades.csv", newline="") as f:
            rows = {r["student_id"]: r for r in csv.DictReader(f) if r["assignment"] == ASSIGNMENT}
        got = {u: float(r["score"]) for u, r in rows.items()}
        assert got == EXPECTED, f"grades.csv: {got}"
        assert all(float(r["max_score"]) == MAX_SCORE for r in rows.values()), rows
    assert not browser.dialogs, f"dialogs: {browser.dialogs}"
    if browser.page_errors:
        say(f"   page errors (JavaScript) seen: {browser.page_errors[:5]}")


# ---------------------------------------------------------------------------------------------


def main() -> int:
    sys.stdout.reconfigure(line_buffering=True)
    if os.geteuid() != 0:
        say("FAIL: run as root (it makes Unix users and runs each user's server as that user)")
        return 2
    for need, why in [(Path("/usr/bin/chromium"), "apt-get install chromium"),
                      (Path("/usr/bin/bwrap"), "make jail"), (MAIN_PY, "make setup")]:
        if not need.exists():
            say(f"FAIL: {need} missing ({why})")
            return 2
    if not shutil.which("npm"):
        say("FAIL: npm missing (apt-get install npm): the hub's proxy is a node package")
        return 2
    from autograder.instructor.learner_config import course_id_of
    course_id = course_id_of()
    tmp = Path(tempfile.mkdtemp(prefix="hub-check."))
    hub = browser = None
    failed = None
    try:
        with step("leftovers of an earlier run removed"):
            if SRV.exists() and not SRV_MARK.exists():
                raise RuntimeError(f"{SRV} exists and is not this script's: move it away first")
            if ETC_CONFIG.exists() and ETC_MARK not in ETC_CONFIG.read_text():
                raise RuntimeError(f"{ETC_CONFIG} exists and is not this script's")
            for u in USERS:
                with contextlib.suppress(KeyError):
                    if pwd.getpwnam(u).pw_gecos != MARK:
                        raise RuntimeError(f"user {u} exists and is not this script's")
            remove_leftovers()
        with step("side venv (.venv-hub): JupyterHub, JupyterLab, nbgrader, proxy"):
            ensure_venv()
        with step("users, course folder, exchange, learners' config"):
            set_up(course_id)
        with step("instructor's exchange as the README says"):
            exchange_config_check()
        with step("hub started"):
            hub = Hub(tmp)
            say(f"   JupyterHub {hub.version} on {hub.url}")
        browser = Browser(tmp)
        steps(browser, hub, course_id)
    except StepFailed as e:
        failed = str(e)
        traceback.print_exc()
        if browser:
            browser.screenshot("failure")
        if hub:
            say(f"hub log (last lines): {hub.log()[-2500:]}")
    except KeyboardInterrupt:
        failed = "interrupted"
    finally:
        t0 = time.monotonic()
        if browser:
            browser.close()
        if hub:
            hub.stop()
        remove_leftovers()
        if os.environ.get("KEEP") == "1" or failed:
            say(f"kept {tmp} (hub log, screenshots)")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
        TIMES.append(("clean-up (hub, proxy, servers, users, /srv, /etc/jupyter)", time.monotonic() - t0, "ok"))
    print()
    for name, seconds, status in TIMES:
        print(f"{seconds:7.1f} s  {status:4}  {name}")
    total = sum(t for _, t, _ in TIMES)
    for f in FINDINGS:
        print(f"finding: {f}")
    for view, (honest, hostile) in REQUESTS.items():
        print(f"requests: {view}: {hostile} for the payload hand-in, {honest} for the honest one, "
              "none only for the payloads")
    if failed:
        print(f"hub-check: FAIL after {total:.0f} s at {failed}")
        return 1
    found = f"; {len(FINDINGS)} finding(s) above" if FINDINGS else ""
    print(f"hub-check: PASS in {total:.0f} s: 3 learners fetched, validated, submitted and read "
          f"their feedback on JupyterHub; grades.csv {EXPECTED}; the payload corpus "
          f"({len(CORPUS)} payloads) sent no request from the formgrader or the feedback{found}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

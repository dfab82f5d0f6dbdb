"""The learner's flow in a real browser: JupyterLab, a released notebook, nbgrader's Validate button.

The test starts its own JupyterLab on 127.0.0.1 (a free port, a random token, a temporary copy of
the course holding release/01_linear_algebra and nbgrader_config.py) and drives Debian's Chromium
through Playwright. The JupyterLab is a learner's: tools/hide_instructor_tools.sh (as the README
tells instructors) has hidden the Formgrader and Create Assignment, and the test checks that they
are gone and that Validate and the Assignment List are there. It opens the released notebook,
runs it, types a wrong `linear_forward` (W not transposed), runs its check cell and reads the
message, clicks Validate and reads the failure, types the right answer and Validates again.
A second test starts a learner's JupyterLab in a bare folder holding only the nbgrader_config.py of
`python -m autograder learner-config` and fetches and submits from its Assignment List.

Cells are found from the notebook file's own nbgrader metadata (grade ids), never by a fixed
index; the answers typed in come from the source notebook's solution region and from the sample
submission `w_not_transposed` in samples/01_linear_algebra.toml.

Needs /usr/bin/chromium (apt-get install chromium) and the `playwright` package (`.[test]`);
without them the test is skipped locally. CI (.ci/run) installs both and sets
BROWSER_TEST_REQUIRED=1, which turns the skip into a failure.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import tomllib
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from autograder.course import ROOT

CHROMIUM = Path("/usr/bin/chromium")
ASSIGNMENT = "01_linear_algebra"
NOTEBOOK = f"release/{ASSIGNMENT}/linear_algebra.ipynb"
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
CELL_TIMEOUT = 30_000       # ms: one cell, including the first `import torch`
VALIDATE_TIMEOUT = 90_000   # ms: nbgrader validate runs the whole notebook in a fresh kernel


def _missing() -> str | None:
    if not CHROMIUM.is_file():
        return f"{CHROMIUM} is missing (apt-get install chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is missing (pip install -e '.[test]')"
    return None


MISSING = _missing()
REQUIRED = os.environ.get("BROWSER_TEST_REQUIRED") == "1"
pytestmark = pytest.mark.skipif(MISSING is not None and not REQUIRED, reason=f"browser test: {MISSING}")


# ---------------------------------------------------------------------------------------------
# What to type, and where: from the course's own files


def _solution(grade_id: str) -> str:
    """The source notebook's answer cell for `grade_id`, solution markers removed."""
    nb = json.loads((ROOT / "source" / ASSIGNMENT / "linear_algebra.ipynb").read_text())
    for cell in nb["cells"]:
        if cell["metadata"].get("nbgrader", {}).get("grade_id") == grade_id:
            src = "".join(cell["source"])
            return "\n".join(line for line in src.splitlines() if "### BEGIN SOLUTION" not in line
                             and "### END SOLUTION" not in line) + "\n"
    raise LookupError(grade_id)


def _sample_code(student: str, function: str) -> str:
    samples = tomllib.loads((ROOT / "samples" / f"{ASSIGNMENT}.toml").read_text())["student"]
    return next(s for s in samples if s["student"] == student)["code"][function].strip() + "\n"


def _cell_indices(notebook: Path) -> dict[str, int]:
    """grade_id -> position of the cell in the notebook, and `check:<fn>` -> its check cell.

    The check cell of a function is the first cell after its answer cell whose grade id is
    `check_<fn>` (visible checks in a cell of their own) or `tests_<fn>` (the graded cell that
    runs the visible checks, so that Validate runs them). The locked cell `checks_<fn>` right
    above it defines `check_<fn>()`.
    """
    cells = json.loads(notebook.read_text())["cells"]
    ids = [c["metadata"].get("nbgrader", {}).get("grade_id") for c in cells]
    found = {gid: i for i, gid in enumerate(ids) if gid}
    for fn in ("matmul", "linear_forward"):
        after = range(found[fn] + 1, len(ids))
        found[f"check:{fn}"] = next(i for i in after if ids[i] in (f"check_{fn}", f"tests_{fn}"))
    return found


# ---------------------------------------------------------------------------------------------
# JupyterLab, started and stopped by the test


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _descendants(pid: int) -> list:
    import psutil
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


class Lab:
    def __init__(self, course: Path, home: Path, bare: bool = False, instructor: bool = False):
        """`bare`: a learner's own machine, with nothing of this machine's environment but the
        system's PATH: HOME is `home`, no PYTHONPATH, no NBGRADER_EXCHANGE. `instructor`: the
        instructor's JupyterLab (the formgrader left on)."""
        self.course, self.token, self.port = course, secrets.token_hex(16), _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        settings = home / "lab-settings"
        for plugin, values in {
            # every cell in the DOM, so that cells can be addressed by position
            "@jupyterlab/notebook-extension/tracker": {"windowingMode": "none"},
            # no news or update checks (the network is closed anyway)
            "@jupyterlab/apputils-extension/notification": {"fetchNews": "false",
                                                            "checkForUpdates": False},
        }.items():
            path = settings / f"{plugin}.jupyterlab-settings"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(values))
        base = {"HOME": str(home), "LANG": "C.UTF-8", "PATH": "/usr/bin:/bin"} if bare else os.environ
        env = {**base,
               "PATH": str(Path(sys.executable).parent) + os.pathsep + base.get("PATH", ""),
               "JUPYTER_CONFIG_DIR": str(home / "config"),       # no ~/.jupyter of the machine
               "JUPYTER_DATA_DIR": str(home / "data"),
               "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
               "JUPYTERLAB_SETTINGS_DIR": str(settings),
               "JUPYTERLAB_WORKSPACES_DIR": str(home / "workspaces"),
               "IPYTHONDIR": str(home / "ipython"),
               "MPLBACKEND": "agg",
               "PYTHONUNBUFFERED": "1"}
        # a learner's JupyterLab: the instructor tools hidden as the README says
        if not instructor:
            subprocess.run(["bash", str(ROOT / "tools" / "hide_instructor_tools.sh"), "user"],
                           env=env, check=True, capture_output=True)
        self.log_path = home / "jupyterlab.log"
        self._log = self.log_path.open("w")
        # cwd = the course: nbgrader's Validate handler reads nbgrader_config.py from the cwd (and
        # the Assignment List from the server's root folder and the user's Jupyter config)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1",
             f"--ServerApp.port={self.port}", "--ServerApp.port_retries=0",
             f"--IdentityProvider.token={self.token}", f"--ServerApp.root_dir={course}",
             "--LabApp.news_url=", "--LabApp.expose_app_in_browser=True",   # window.jupyterapp
             "--ServerApp.allow_root=True"],  # CI runs as root
            cwd=course, env=env, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True)
        self._wait_ready()

    def _api(self, path: str, method: str = "GET"):
        req = urllib.request.Request(f"{self.url}{path}", method=method,
                                     headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(req, timeout=5) as r:
            return json.loads(r.read() or b"null")

    def _wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"JupyterLab exited: {self.log_path.read_text()[-3000:]}")
            try:
                self._api("/api/status")
                return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(0.2)   # polling the server until it answers, not synchronising the page
        raise TimeoutError(f"JupyterLab did not answer in {timeout} s: {self.log_path.read_text()[-3000:]}")

    def page_url(self, path: str) -> str:
        return f"{self.url}/lab/tree/{path}?reset&token={self.token}"

    def stop(self) -> None:
        """Shut the server down (it stops its kernels), then kill what is left of it, by PID."""
        children = _descendants(self.proc.pid)
        if self.proc.poll() is None:
            try:
                self._api("/api/shutdown", method="POST")
            except Exception:
                self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        for child in children:          # kernels run in sessions of their own
            try:
                child.kill()
            except Exception:
                pass
        self._log.close()


@pytest.fixture
def lab(tmp_path):
    course = tmp_path / "course"
    shutil.copytree(ROOT / "release" / ASSIGNMENT, course / "release" / ASSIGNMENT)
    shutil.copy(ROOT / "nbgrader_config.py", course)
    server = Lab(course, tmp_path / "home")
    yield server
    server.stop()


@pytest.fixture
def learner_lab(tmp_path):
    """A course that released 01 into its exchange, and a learner's JupyterLab started in a bare
    folder holding only the nbgrader_config.py of `python -m autograder learner-config`."""
    from test_exchange import released

    course, learner, _ = released(tmp_path, ASSIGNMENT)
    server = Lab(learner, tmp_path / "learner-home", bare=True)
    server.exchange = course / "exchange"
    yield server
    server.stop()


@pytest.fixture
def page(tmp_path):
    if MISSING:
        pytest.fail(f"BROWSER_TEST_REQUIRED=1 but {MISSING}")
    from playwright.sync_api import sync_playwright
    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"), executable_path=str(CHROMIUM), headless=True,
            args=CHROMIUM_ARGS, viewport={"width": 1400, "height": 900})
        try:
            page = context.pages[0] if context.pages else context.new_page()
            page.set_default_timeout(CELL_TIMEOUT)
            yield page
        finally:
            context.close()


@contextlib.contextmanager
def screenshot_on_failure(page, lab, folder: Path):
    try:
        yield
    except BaseException:
        shot = folder / "failure.png"
        try:
            page.screenshot(path=str(shot), full_page=True)
            print(f"screenshot: {shot}")
        except Exception as e:   # the page may be gone
            print(f"no screenshot: {e}")
        print(f"JupyterLab log: {lab.log_path}\n{lab.log_path.read_text()[-4000:]}")
        raise


# ---------------------------------------------------------------------------------------------
# Driving the notebook


class Notebook:
    def __init__(self, page, indices: dict[str, int]):
        self.page, self.at = page, indices
        self.cells = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell")

    def cell(self, key: str):
        return self.cells.nth(self.at[key])

    def prompt(self, key: str) -> int | None:
        text = self.cell(key).locator(".jp-InputPrompt").inner_text()
        m = re.search(r"\[(\d+)\]", text)
        return int(m.group(1)) if m else None

    def wait_kernel(self, timeout: int = CELL_TIMEOUT) -> None:
        """The notebook's kernel is started, connected and idle. Not the toolbar's execution
        indicator: it reads 'idle' before any kernel exists, and a Run All issued then runs no
        cell (JupyterLab clears their execution instead; CI saw it once in twenty-odd runs)."""
        self.page.wait_for_function(
            """() => {
                const widget = window.jupyterapp.shell.currentWidget;
                const context = widget && widget.sessionContext;
                const kernel = context && context.session && context.session.kernel;
                return Boolean(context && context.isReady && !context.hasNoKernel && kernel
                               && kernel.connectionStatus === 'connected' && kernel.status === 'idle');
            }""", timeout=timeout)

    def wait_idle(self, timeout: int = CELL_TIMEOUT) -> None:
        """The kernel is idle and no cell waits to run."""
        self.page.wait_for_function(
            """() => {
                const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
                if (!panel) return false;
                const status = panel.querySelector('.jp-Notebook-ExecutionIndicator');
                if (status && status.getAttribute('data-status') !== 'idle') return false;
                return ![...panel.querySelectorAll('.jp-InputPrompt')].some(p => p.textContent.includes('*'));
            }""", timeout=timeout)

    def wait_ran(self, key: str, before: int | None, timeout: int = CELL_TIMEOUT) -> None:
        """The cell shows an execution count newer than `before`, and the kernel is idle again."""
        index = self.at[key]
        self.page.wait_for_function(
            """([index, before]) => {
                const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
                const cell = panel && panel.querySelectorAll('.jp-Notebook .jp-Cell')[index];
                const m = cell && /\\[(\\d+)\\]/.exec(cell.querySelector('.jp-InputPrompt').textContent);
                return m !== null && m !== undefined && (before === null || Number(m[1]) > before);
            }""", arg=[index, before], timeout=timeout)
        self.wait_idle(timeout)

    def type_code(self, key: str, code: str) -> None:
        editor = self.cell(key).locator(".cm-content")
        editor.click()
        self.page.keyboard.press("Control+a")
        self.page.keyboard.press("Delete")
        self.page.keyboard.insert_text(code)
        first = code.strip().splitlines()[0]
        self.page.wait_for_function(
            "([el, first]) => el.textContent.includes(first)",
            arg=[editor.element_handle(), first])

    def run(self, key: str) -> str:
        """Run one cell (select it, Shift+Enter) and return the text of its outputs."""
        before = self.prompt(key)
        cell = self.cell(key)
        cell.locator(".jp-InputPrompt").click()     # selects the cell, in command mode
        self.page.keyboard.press("Escape")
        self.page.keyboard.press("Shift+Enter")
        self.wait_ran(key, before)
        return self.output(key)

    def output(self, key: str) -> str:
        area = self.cell(key).locator(".jp-OutputArea")
        return area.inner_text() if area.count() else ""

    def run_all(self, stops_at: str) -> None:
        """Run → Run All Cells; wait until `stops_at` (the first failing cell) has run."""
        before = self.prompt(stops_at)
        self.page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
        self.page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")).click()
        try:
            self.wait_ran(stops_at, before, timeout=60_000)
        except Exception as e:
            raise AssertionError(f"Run All did not reach {stops_at}: {e}\n{self.state()}") from e

    def state(self) -> str:
        """Each cell's prompt and its output's first line, and any dialog's text: what a failed
        wait says about where the run stopped."""
        prompts = self.cells.locator(".jp-InputPrompt").all_inner_texts()
        lines = [f"cell {i}: {p.strip()!r} {self.cells.nth(i).locator('.jp-OutputArea').inner_text()[:80]!r}"
                 for i, p in enumerate(prompts)]
        dialog = self.page.locator(".jp-Dialog")
        if dialog.count():
            lines.append(f"dialog: {dialog.first.inner_text()[:300]!r}")
        return "\n".join(lines)

    def validate(self) -> tuple[str, str, list[tuple[str, str]]]:
        """Click nbgrader's Validate; return (result class, dialog text, [(code shown, error
        shown)] for each failed cell) and close the dialog."""
        self.page.locator(".validate-button").click()
        message = self.page.locator(".jp-Dialog #validation-message")
        message.wait_for(state="visible", timeout=VALIDATE_TIMEOUT)
        kind = message.get_attribute("class") or ""
        text = message.inner_text()
        # nbgrader's dialog: per failed cell, "The following cell failed:", a <pre> with the
        # cell's source, then a <pre> with the error
        blocks = message.locator(":scope > .jp-RenderedText > pre").all_inner_texts()
        failed = list(zip(blocks[0::2], blocks[1::2]))
        self.page.locator(".jp-Dialog .jp-Dialog-button.jp-mod-accept").click()
        self.page.locator(".jp-Dialog").wait_for(state="detached")
        return kind, text, failed


def _all_ok(output: str) -> bool:
    """Every line a check printed says ok (the check's own wording may mention ValueError)."""
    lines = [line for line in output.splitlines() if line.strip()]
    return bool(lines) and all(line.startswith("ok") for line in lines)


def test_learner_validate_flow(lab, page, tmp_path):
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    with screenshot_on_failure(page, lab, tmp_path):
        _learner_flow(lab, page)
    assert not errors, errors


def _learner_flow(lab, page) -> None:
    indices = _cell_indices(lab.course / NOTEBOOK)
    page.goto(lab.page_url(NOTEBOOK))
    nb = Notebook(page, indices)
    nb.cell("linear_forward").locator(".cm-content").wait_for(state="visible", timeout=60_000)
    assert "def linear_forward" in nb.cell("linear_forward").inner_text()
    nb.wait_kernel(timeout=60_000)
    page.locator(".validate-button").wait_for(state="visible")

    # The learner's JupyterLab has no instructor tools; the learner's tools are there.
    plugins = page.evaluate("""() => Object.fromEntries(
        ['formgrader', 'create-assignment', 'validate-assignment', 'assignment-list'].map(
            p => [p, window.jupyterapp.hasPlugin('@jupyter/nbgrader:' + p)]))""")
    assert plugins == {"formgrader": False, "create-assignment": False,
                       "validate-assignment": True, "assignment-list": True}, plugins
    with pytest.raises(urllib.error.HTTPError, match="404"):
        lab._api("/formgrader")

    # Run All on the untouched release stops at the first exercise, saying it is not written.
    nb.run_all(stops_at="check:matmul")
    first_error = nb.output("check:matmul")
    assert "not written yet" in first_error and "matmul" in first_error, first_error

    # A correct matmul passes its check.
    nb.type_code("matmul", _solution("matmul"))
    nb.run("matmul")
    nb.run("checks_matmul")  # Shift+Enter on: the locked cell defining the check
    out = nb.run("check:matmul")
    assert _all_ok(out), out

    # W not transposed: the check names the mistake.
    nb.type_code("linear_forward", _sample_code("w_not_transposed", "linear_forward"))
    nb.run("linear_forward")
    nb.run("checks_linear_forward")  # Shift+Enter on: the locked cell defining the check
    out = nb.run("check:linear_forward")
    assert "linear_forward" in out and ("transposed" in out or "(out, in)" in out), out

    # Validate fails, naming the exercise: the check's verdict and hint come right after a few
    # lines of the failed cell (its comment and the one call), not after the whole check code.
    kind, text, failed = nb.validate()
    assert "validation-failed" in kind, text
    assert "linear_forward" in text, text
    assert len(failed) == 1, failed
    shown, error = failed[0]
    assert "check_linear_forward()" in shown, shown
    assert len(shown.strip().splitlines()) <= 5, shown
    verdict = error.strip().splitlines()
    assert verdict[0].startswith("`linear_forward` raised ValueError"), error
    assert any(line.startswith("Hint: ") and "transposed" in line for line in verdict[:4]), error

    # The right answer: the check passes, and so does Validate.
    nb.type_code("linear_forward", _solution("linear_forward"))
    nb.run("linear_forward")
    nb.run("checks_linear_forward")  # Shift+Enter on: the locked cell defining the check
    out = nb.run("check:linear_forward")
    assert _all_ok(out), out
    kind, text, failed = nb.validate()
    assert "validation-success" in kind and not failed, text
    assert "Success" in text, text


def test_learner_assignment_list_fetch_and_submit(learner_lab, page, tmp_path):
    """Nbgrader -> Assignment List in the learner's JupyterLab shows the released assignment, with
    no "exchange directory does not exist" box and no "Error fetching courses!"; Fetch and Submit
    work from there."""
    lab = learner_lab
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    with screenshot_on_failure(page, lab, tmp_path):
        page.goto(f"{lab.url}/lab?reset&token={lab.token}")
        page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Nbgrader$")).click()
        page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Assignment List$")).click()
        released = page.locator("#released_assignments_list")
        panel = page.locator(".jp-MainAreaWidget", has=released)
        error = re.compile("does not exist|could not be created|Error fetching courses")
        # the assignment, or the first error box: whichever the page shows first
        released.get_by_text(ASSIGNMENT).or_(panel.get_by_text(error)).first.wait_for(timeout=60_000)

        def no_error() -> None:
            text = panel.inner_text()
            assert not error.search(text), text

        no_error()
        assert "pytorch-training-loop-math" in panel.inner_text(), panel.inner_text()
        released.get_by_role("button", name="Fetch").click()
        fetched = page.locator("#fetched_assignments_list")
        fetched.get_by_text(ASSIGNMENT).wait_for(timeout=60_000)
        assert (lab.course / ASSIGNMENT / "linear_algebra.ipynb").read_bytes() == \
            (ROOT / NOTEBOOK).read_bytes()
        fetched.get_by_role("button", name="Submit").click()
        page.locator("#submitted_assignments_list").get_by_text(ASSIGNMENT).wait_for(timeout=60_000)
        no_error()
        inbound = list((lab.exchange / "pytorch-training-loop-math" / "inbound").iterdir())
        assert len(inbound) == 1 and inbound[0].name.split("+")[1] == ASSIGNMENT, inbound
    assert not errors, errors


# ---------------------------------------------------------------------------------------------
# No learner payload runs in the instructor's or the learner's browser (issue 29)

def _payload_page(tmp_path) -> Path:
    """The feedback's HTML (nbgrader's feedback steps and nbconvert's exporter, as
    `generate_feedback` runs them, which is also how the formgrader renders an autograded notebook)
    of a notebook whose markdown cells and outputs hold every payload of the markdown corpus."""
    import nbformat
    from nbconvert import HTMLExporter
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

    from autograder.nbgrader.sanitize import LearnerHTML
    from test_learner_markdown import CORPUS

    cells = [new_markdown_cell(p) for p in CORPUS]
    for p in CORPUS:  # the same text as a cell's rich output, markdown and HTML
        cell = new_code_cell("display(...)")
        cell.outputs = [new_output("display_data", data={"text/markdown": p, "text/plain": "x"}),
                        new_output("display_data", data={"text/html": p, "text/plain": "x"})]
        cells.append(cell)
    nb, _ = LearnerHTML().preprocess(new_notebook(cells=cells), {})
    html, _ = HTMLExporter().from_notebook_node(nbformat.from_dict(nb))
    page = tmp_path / "feedback.html"
    page.write_text(html)
    return page


def test_no_learner_payload_runs_when_its_page_is_opened_or_its_links_clicked(tmp_path, page):
    """Every link of the sanitized page is clicked, one per fresh load: no dialog opens, no
    script sets the page's marker, and no click leaves for a javascript:, vbscript: or data: URL."""
    feedback = _payload_page(tmp_path)
    dialogs, navigations = [], []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.on("framenavigated", lambda f: navigations.append(f.url))
    page.goto(feedback.as_uri())
    links = page.eval_on_selector_all("a[href], area[href]", "els => els.length")
    for i in range(links):
        page.goto(feedback.as_uri())
        page.evaluate("window.__learner_ran = false")
        page.eval_on_selector_all("a[href], area[href]", f"els => els[{i}].click()")
        page.wait_for_timeout(150)
        if page.url.startswith("file:"):
            assert page.evaluate("window.__learner_ran") is False
    page.goto(feedback.as_uri())
    page.wait_for_timeout(300)
    assert dialogs == [], dialogs
    assert not [u for u in navigations if u.split(":")[0].lower() in ("javascript", "vbscript", "data")]


# ---------------------------------------------------------------------------------------------
# Nothing a learner wrote makes the reader's browser send a request (issue 37)

HONEST, HOSTILE = "honest", "hostile"


def payload_code(payloads: list[str]) -> str:
    """A learner's code cell showing every payload as rich output (HTML and markdown), and images
    whose output metadata (set by the learner's code) name a src and an unquoted attribute."""
    from test_learner_markdown import BEACON, PNG
    return (f"import json\nfrom IPython.display import HTML, Markdown, display\n"
            f"for p in json.loads({json.dumps(json.dumps(payloads))}):\n"
            f"    display(HTML(p))\n    display(Markdown(p))\n"
            f"display({{'image/png': {PNG!r}, 'text/plain': 'png'}}, raw=True, metadata={{\n"
            f"    'image/png': {{'width': '1 onerror=document.title=1'}},\n"
            f"    'filenames': {{'image/png': '/logout'}}}})\n"
            f"display({{'image/jpeg': {PNG!r}, 'text/plain': 'jpeg'}}, raw=True, metadata={{\n"
            f"    'filenames': {{'image/jpeg': 'http://{BEACON}/filenames.jpg'}}}})\n")


def hostile_notebook(source: Path):
    """The released notebook with the payload corpus below its first cell: as markdown cells,
    and as the output of a code cell (the autograde runs it in the jail)."""
    import nbformat
    from nbformat.v4 import new_code_cell, new_markdown_cell

    from test_learner_markdown import CORPUS
    nb = nbformat.read(source, as_version=4)
    nb.cells[1:1] = [new_markdown_cell(p) for p in CORPUS] + [new_code_cell(payload_code(CORPUS))]
    return nb


@pytest.fixture
def graded_course(tmp_path):
    """A course copy with two hand-ins of 01, an untouched one and one holding the payload corpus,
    autograded (the stored notebook the formgrader shows) and given feedback."""
    import nbformat

    from conftest import tool_env
    course = tmp_path / "course"
    shutil.copytree(ROOT / "source", course / "source")
    shutil.copy(ROOT / "nbgrader_config.py", course)
    release = ROOT / NOTEBOOK
    for student, nb in {HONEST: nbformat.read(release, as_version=4),
                        HOSTILE: hostile_notebook(release)}.items():
        folder = course / "submitted" / student / ASSIGNMENT
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / release.name)
    for command in ("autograde", "generate_feedback"):
        done = subprocess.run(["nbgrader", command, ASSIGNMENT, "--log-level=WARN"], cwd=course,
                              env=tool_env(), capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stderr[-3000:]
    return course


def _submission_ids(course: Path) -> dict[str, str]:
    from nbgrader.api import Gradebook
    with Gradebook(f"sqlite:///{course}/gradebook.db") as gb:
        return {s: gb.find_submission_notebook(Path(NOTEBOOK).stem, ASSIGNMENT, s).id
                for s in (HONEST, HOSTILE)}


def _requests_of(page, url: str, wait_ms: int = 1500) -> list[str]:
    """Every request the browser sends while `url` loads and settles (images, styles, fetches,
    frames, popups, service workers: the whole context's log)."""
    seen: list[str] = []
    context = page.context
    listener = lambda request: seen.append(request.url)  # noqa: E731
    context.on("request", listener)
    try:
        # the Referer of a page of the server, as when the file is opened from JupyterLab (a /files/
        # GET with none is refused: "Blocking request from unknown origin")
        page.goto(url, referer=url.split("/files/")[0] + "/lab")
        page.wait_for_load_state("load")
        page.wait_for_timeout(wait_ms)   # an image or a prefetch may start after the load event
    finally:
        context.remove_listener("request", listener)
    return seen


def test_no_learner_content_sends_a_request_from_the_formgrader_or_the_feedback(
        graded_course, tmp_path, page):
    """The instructor's JupyterLab serves the formgrader's view of the payload hand-in and its
    feedback (from the same origin, logged in): Playwright's request log holds nothing the
    untouched hand-in's same pages do not also ask for (the page's own scripts and styles), no
    request to the payloads' outside host and none to a path they name; the instructor is still
    logged in afterwards (`/api/status` answers 200 to the browser's cookie)."""
    from urllib.parse import urlsplit

    from test_learner_markdown import BEACON
    lab = Lab(graded_course, tmp_path / "home", instructor=True)
    ids = _submission_ids(graded_course)
    try:
        with screenshot_on_failure(page, lab, tmp_path):
            page.goto(f"{lab.url}/formgrader?token={lab.token}")   # logs the browser in (cookie)
            assert page.evaluate("fetch('/api/status').then(r => r.status)") == 200

            def views(student: str) -> dict[str, str]:
                feedback = f"feedback/{student}/{ASSIGNMENT}/{Path(NOTEBOOK).stem}.html"
                return {"formgrader": f"{lab.url}/formgrader/submissions/{ids[student]}/",
                        "feedback": f"{lab.url}/files/{feedback}"}

            def normal(url: str, student: str) -> str:
                return url.replace(ids[student], "<submission>").replace(f"/{student}/", "/<student>/")

            for view, url in views(HOSTILE).items():
                baseline = {normal(u, HONEST) for u in _requests_of(page, views(HONEST)[view])}
                assert len(baseline) > 1, (view, baseline)   # the log works: the page's own assets
                got = [normal(u, HOSTILE) for u in _requests_of(page, url)]
                extra = sorted({u for u in got if u not in baseline})
                assert extra == [], f"{view}: requests only the payload page made: {extra}"
                outside = [u for u in got if BEACON in u]
                named = [u for u in got if urlsplit(u).path in ("/logout", "/api/contents", "/notes.md")]
                assert outside == [] and named == [], (view, outside, named)
                assert page.evaluate("window.__learner_ran || document.title === '1'") is False
                text = page.inner_text("body")
                assert "(image removed: /logout)" in text and "(link removed:" in text, (view, text[:2000])
                # still logged in: the formgrader opens (no /login?next=...) and the server
                # answers the browser's cookie (the feedback page itself is sandboxed by /files/)
                page.goto(f"{lab.url}/formgrader")
                assert "/login" not in page.url, f"{view}: the instructor was logged out: {page.url}"
                status = page.evaluate("fetch('/api/status').then(r => r.status)")
                assert status == 200, f"{view}: the instructor was logged out ({status})"
    finally:
        lab.stop()


# ---------------------------------------------------------------------------------------------
# The course as a PyTorch tutorial (issue 31): the page that pytorch.org's build makes of it

def test_tutorial_page_shows_every_figure_no_traceback_and_its_math(tmp_path_factory, page):
    """The tutorial's HTML page (Sphinx + sphinx-gallery; tests/tutorial/test_tutorial.py builds it once per
    run), opened from file://: every image of the gallery has loaded, no output shows a traceback,
    and the math is there as Sphinx's math elements (typeset by MathJax where its script loads)."""
    from test_tutorial import built_site

    html = built_site(tmp_path_factory)
    page.goto(html.as_uri())
    page.wait_for_load_state("load")
    images = page.eval_on_selector_all(
        "img", "els => els.map(e => [e.getAttribute('src'), e.complete, e.naturalWidth])")
    gallery = [img for img in images if "sphx_glr_" in img[0]]
    assert len(gallery) >= 3, images  # its three figures (issue 41: a fit, a step, the loss curves)
    assert [img for img in gallery if not (img[1] and img[2] > 0)] == []
    assert "Traceback" not in page.inner_text("body")
    outputs = page.eval_on_selector_all(".sphx-glr-script-out", "els => els.map(e => e.innerText)")
    assert outputs and not any("Traceback" in o for o in outputs)
    maths = page.eval_on_selector_all("span.math, div.math, mjx-container, .katex", "els => els.length")
    assert maths > 100, maths

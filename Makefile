# `make demo`: set up, then run the instructor pipeline on the sample submissions.
# `make test`: set up, then run the test suite (what CI runs).
VENV ?= .venv
PYTHON ?= python3
# The CPU build pinned in constraints.txt; elsewhere pass e.g. TORCH_SPEC=torch to keep
# whatever build your package index gives (pyproject.toml only asks for torch>=2.3).
TORCH_SPEC ?= -c constraints.txt torch
BIN := $(abspath $(VENV))/bin
export PATH := $(BIN):$(PATH)

.PHONY: setup jail browser demo test build tutorial clean mutants newest-torch newest-python slurm-check k8s-check hub-check

setup: $(VENV)/.installed jail

# $(call system_package,COMMAND,PACKAGE,WHY,IF MISSING): install PACKAGE with apt-get when
# COMMAND is missing and we can (root on Debian/Ubuntu), else print IF MISSING.
define system_package
	@command -v $(1) >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing $(2) ($(3))"; \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -q $(2) >/dev/null 2>&1 || \
	      { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $(2) >/dev/null; }; \
	  else \
	    echo "$(4)"; \
	  fi; }
endef

# Learner code is graded in a bubblewrap jail (the grader refuses to run without it, unless
# --no-jail).
jail:
	$(call system_package,bwrap,bubblewrap,the jail for learner code,bubblewrap (bwrap) is missing: install it (apt-get install bubblewrap / dnf install bubblewrap) to grade learner code in a jail)

$(VENV)/.installed: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet $(TORCH_SPEC)
	$(BIN)/python -m pip install --quiet -e .
	touch $@

demo: setup
	$(BIN)/python -m autograder demo

# The suite runs in parallel (pytest-xdist), one module per worker at a time (`loadfile`: a
# module's fixtures are built once), the modules marked `early` first (tests/conftest.py).
# TEST_WORKERS=0 runs it in this one process.
TEST_WORKERS ?= auto
test: setup $(VENV)/.test-installed browser
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

$(VENV)/.test-installed: $(VENV)/.installed
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@

# The browser test drives Chromium; without it the test is skipped (BROWSER_TEST_REQUIRED=1,
# set by CI, turns that skip into a failure).
browser:
	$(call system_package,chromium,chromium,for the browser test,chromium is missing: the browser test will be skipped (apt-get install chromium))

# `make mutants [A="01_linear_algebra ..."]`: mutation score of the hidden tests per assignment,
# and the surviving mutants (tools/mutants.py; minutes, so CI does not run it).
mutants: setup
	$(BIN)/python tools/mutants.py $(A)

# `make newest-torch [A="07_custom_autograd ..."]`: the newest torch pip gives, in a side venv
# (NEWEST_VENV, default .venv-newest; constraints.txt's torch pin left out): every solution run top
# to bottom, nbgrader validate (solutions pass, releases fail), the grader (full marks, 0).
# Minutes and a multi-GB torch, so CI does not run it (tools/newest_torch.py).
NEWEST_VENV ?= .venv-newest
newest-torch: setup
	$(BIN)/python tools/newest_torch.py --venv $(NEWEST_VENV) $(A)

# `make newest-python`: the same checks in a side venv (PY_VENV, default .venv-python-newest) built
# with the newest CPython found here (NEWEST_PYTHON, default the newest python3.X on PATH or in
# pyenv), plus the grader's interpreter-dependent tests (jail, sandbox, recorder, subset) under it.
PY_VENV ?= .venv-python-newest
NEWEST_PYTHON ?= $(shell for v in 3.14 3.13 3.12; do p=$$(ls -d $$HOME/.pyenv/versions/$$v*/bin/python$$v 2>/dev/null | tail -1); [ -n "$$p" ] || p=$$(command -v python$$v); [ -n "$$p" ] && { echo $$p; break; }; done)
newest-python: setup
	$(BIN)/python tools/newest_torch.py --python $(NEWEST_PYTHON) --venv $(PY_VENV) --tests $(A)

# `make slurm-check`: a one-node Slurm cluster on localhost (as root; installs slurm-wlm and munge
# when missing) grades sample submissions with docs/batch.md's job array in 4 shards and checks the
# merged results equal one run (tools/slurm_check.sh; minutes, so CI does not run it).
slurm-check: setup
	bash tools/slurm_check.sh

# `make hub-check`: the course on a real JupyterHub on 127.0.0.1 (as root): an instructor, a TA and
# three learners made as Unix users, driven in headless Chromium from release to grades.csv, each
# step timed; JupyterHub and its proxy go in a side venv (HUB_VENV), the users and /srv/nbgrader are
# removed at the end (tools/hub_check.py; minutes, so CI does not run it).
HUB_VENV ?= .venv-hub
hub-check: setup $(VENV)/.test-installed browser
	HUB_VENV=$(HUB_VENV) $(BIN)/python tools/hub_check.py

# `make k8s-check`: docs/batch.md's Kubernetes manifests against the Kubernetes API schemas
# (kubernetes-validate, offline, in a venv of its own under $(VENV)).
k8s-check:
	bash tools/k8s_check.sh $(abspath $(VENV))/k8s-validate

build: setup
	$(BIN)/python -m autograder build

# The course as one PyTorch tutorial (docs/tutorial.md): tutorial/training_loop_math_tutorial.py,
# and its HTML as pytorch.org builds it (Sphinx + sphinx-gallery) in tutorial/site/_build/html.
TUTORIAL_DIR ?= tutorial
tutorial: $(VENV)/.test-installed
	$(BIN)/python -m autograder tutorial --out $(TUTORIAL_DIR) --html

clean:
	rm -rf $(VENV) $(NEWEST_VENV) submitted autograded feedback feedback_json gradebook.db grades.csv

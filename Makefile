# `make demo`: set up, then run the instructor pipeline on the sample submissions.
# `make test`: set up, then run the test suite (what CI runs).
VENV ?= .venv
PYTHON ?= python3
# The CPU build pinned in constraints.txt; elsewhere pass e.g. TORCH_SPEC=torch to keep
# whatever build your package index gives (pyproject.toml only asks for torch>=2.3).
TORCH_SPEC ?= -c constraints.txt torch
BIN := $(abspath $(VENV))/bin
export PATH := $(BIN):$(PATH)

.PHONY: setup demo test build clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet $(TORCH_SPEC)
	$(BIN)/python -m pip install --quiet -e .
	touch $@

demo: setup
	$(BIN)/python -m autograder demo

test: setup
	$(BIN)/python -m pytest

build: setup
	$(BIN)/python -m autograder build

clean:
	rm -rf $(VENV) submitted autograded feedback feedback_json gradebook.db grades.csv

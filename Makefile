# The two set-up commands: `make demo` and `make test`. Both set up everything they need.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
DEMO_DIR := .ranks-demo

.PHONY: demo test bench lint system-deps clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	@./scripts/system-deps.sh --optional prometheus
	$(BIN)/ranks demo --workdir $(DEMO_DIR)

system-deps:
	./scripts/system-deps.sh

test: $(STAMP) system-deps
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q -m "not perf" tests

bench: $(STAMP) system-deps
	$(BIN)/python -m pytest -q -s -m perf tests/perf

lint: $(STAMP)
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) $(DEMO_DIR) build *.egg-info

# The only commands a newcomer needs: make run, make test (and lint, bench).
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp

.PHONY: install run console test lint format bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

run: install
	$(VENV)/bin/legio run

console: install
	$(VENV)/bin/legio console

lint: install
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/ruff format --check src tests benchmarks
	$(VENV)/bin/mypy

format: install
	$(VENV)/bin/ruff format src tests benchmarks
	$(VENV)/bin/ruff check --fix src tests benchmarks

# every core (pytest-xdist); one part: .venv/bin/python -m pytest tests/test_stop.py
test: lint
	$(PY) -m pytest -n auto

bench: install
	@set -e; found=0; for b in benchmarks/bench_*.py; do [ -e "$$b" ] || continue; \
		found=1; echo "== $$b"; $(PY) $$b; done; \
		[ $$found = 1 ] || echo "no benchmarks yet (benchmarks/bench_*.py)"

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis

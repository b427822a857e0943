# Two entry points: `make demo` and `make test` (`make docs` builds the documentation site). Each creates .venv and installs the
# project with its dev extra the first time (or when pyproject.toml changes).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
STAMP := $(VENV)/.installed

.PHONY: demo test lint bench stack docs docs-serve

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VENV)/bin/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/polythink demo

test: $(STAMP)
	$(VENV)/bin/python -m pytest -q -n auto --maxprocesses 4 --dist loadfile

# The gateway with Redis and Prometheus on this machine (deploy/stack.py; Ctrl-C stops it).
stack: $(STAMP)
	$(VENV)/bin/python -m pip install --quiet -e '.[dev,serve]'
	$(VENV)/bin/python deploy/stack.py

bench: $(STAMP)
	$(VENV)/bin/python -m pip install --quiet -e '.[dev,bench]'
	$(VENV)/bin/polythink bench --quick

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks docs deploy
	$(VENV)/bin/ruff format --check src tests benchmarks docs deploy
	$(VENV)/bin/mypy --strict src

# The documentation site (mkdocs.yml, docs/): built offline into site/, warnings are errors.
DOCS_STAMP := $(VENV)/.docs-installed

$(DOCS_STAMP): $(STAMP) pyproject.toml
	$(VENV)/bin/python -m pip install --quiet -e '.[dev,docs]'
	touch $(DOCS_STAMP)

docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

docs-serve: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs serve --strict --dev-addr 127.0.0.1:8000

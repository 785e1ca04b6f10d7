# `make demo` and `make test` bootstrap .venv themselves (torch CPU 2.13.0 first, then the project).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.recframe-installed

.PHONY: demo test test-slow lint venv clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[dev,text]'
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m recframe.demo

test: $(STAMP)
	$(PY) -m ruff check recframe causal_ext calib_ext tests benchmarks
	$(PY) -m pytest -q -n 2 --durations=10

test-slow: $(STAMP)
	$(PY) -m pytest -q -m slow --durations=10

lint: $(STAMP)
	$(PY) -m ruff check recframe causal_ext calib_ext tests benchmarks

clean:
	rm -rf $(VENV) runs .pytest_cache .ruff_cache

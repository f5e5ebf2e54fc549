# The two commands of the README: `make demo` (the main job) and `make test`;
# `make formal` runs the placement-safety proofs (formal/).
# Each creates .venv and installs the project into it when needed.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
JOBS   ?= 2

.PHONY: demo test test-slow formal bench synth clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[sim,synth,plot,test,formal]'
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/rnic demo --loss 0.01

test: $(STAMP)
	$(PY) -m pytest -n $(JOBS) -q -m "not slow"

test-slow: $(STAMP)
	$(PY) -m pytest -n $(JOBS) -q -m slow

formal: $(STAMP)
	$(PY) -m formal.run

bench: $(STAMP)
	$(VENV)/bin/rnic bench model
	$(VENV)/bin/rnic bench e2e

synth: $(STAMP)
	$(PY) scripts/synth_report.py

clean:
	rm -rf $(VENV) sim_build build .pytest_cache .hypothesis

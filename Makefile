# The two commands of the README: `make demo` (the main job) and `make test`;
# `make formal` runs the placement-safety proofs (formal/); `make docs` builds the Sphinx site (docs/) into
# build/docs, warnings as errors.
# Each creates .venv and installs the project into it when needed.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
JOBS   ?= 2

.PHONY: demo test test-slow formal docs bench synth bitstream clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[hdl,sim,synth,plot,profile,test,formal,board,docs]'
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/rnic demo --loss 0.01

# worksteal: a worker that runs out takes queued tests from the other, so one long Verilator build
# near the end does not leave a core idle.
test: $(STAMP)
	$(PY) -m pytest -n $(JOBS) --dist worksteal -q -m "not slow"

test-slow: $(STAMP)
	$(PY) -m pytest -n $(JOBS) --dist worksteal -q -m slow

formal: $(STAMP)
	$(PY) -m formal.run

docs: $(STAMP)
	$(PY) -m sphinx -b html -W --keep-going docs build/docs

bench: $(STAMP)
	$(VENV)/bin/rnic bench model
	$(VENV)/bin/rnic bench e2e

synth: $(STAMP)
	$(PY) scripts/synth_report.py

# The board's bitstream (build/$(BOARD)/top.bit): resources and every clock's Fmax; fails if a clock misses.
BOARD ?= ecpix5
bitstream: $(STAMP)
	$(PY) -m boards.build --board $(BOARD)

clean:
	rm -rf $(VENV) sim_build build .pytest_cache .hypothesis

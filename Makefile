# Two commands do all the set-up on a fresh machine:
#   make demo   creates .venv, installs requirements, trains on the embedded demo corpus
#   make test   creates .venv, installs requirements + test tools, runs the test suite
# `make demo DEMO_HPARAMS=epochs=2` runs a shorter demo (CI runs that before `make test`).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
DEMO_HPARAMS ?=

.PHONY: demo test bench-planner clean

$(VENV)/.installed: requirements.txt requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements-dev.txt
	touch $@

demo: $(VENV)/.installed
	$(PY) train.py --hparams "overwrite=true,$(DEMO_HPARAMS)"

test: $(VENV)/.installed
	$(PY) -m pytest -q -n 2 --dist worksteal

bench-planner: $(VENV)/.installed
	$(PY) scripts/bench_planner.py

clean:
	rm -rf runs corpora .cache

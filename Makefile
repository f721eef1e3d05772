# Two commands do all the set-up on a fresh machine:
#   make demo   creates .venv, installs requirements, trains on the embedded demo corpus
#   make test   creates .venv, installs requirements + test tools, runs the test suite
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: demo test bench-planner gpu-check clean

$(VENV)/.installed: requirements.txt requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements-dev.txt
	touch $@

demo: $(VENV)/.installed
	$(PY) train.py --hparams overwrite=true

test: $(VENV)/.installed
	$(PY) -m pytest -q -n 2 --dist worksteal

bench-planner: $(VENV)/.installed
	$(PY) scripts/bench_planner.py

# The GPU measurement (scripts/gpu_check.py). Needs no venv where torch and the requirements are
# already installed (a GPU machine without a registry): it uses the venv's Python if there is one.
GPU_PY = $(if $(wildcard $(PY)),$(PY),$(PYTHON))
gpu-check:
	$(GPU_PY) scripts/gpu_check.py $(ARGS)

clean:
	rm -rf runs corpora .cache

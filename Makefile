# Two commands do all the set-up on a fresh machine:
#   make demo   creates .venv, installs requirements, trains on the embedded demo corpus
#   make test   creates .venv, installs requirements + test tools, runs the test suite
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: demo test bench-planner docker-check clean

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

# Builds the Docker image with podman on a local Debian base with this machine's CPU torch and runs
# `train.py --check` and one demo epoch as build steps (root, podman, debootstrap; 17 min here).
docker-check:
	bash scripts/docker_check.sh

clean:
	rm -rf runs corpora .cache

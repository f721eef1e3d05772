# Two commands do all the set-up on a fresh machine:
#   make demo   creates .venv, installs requirements, trains on the embedded demo corpus
#   make test   creates .venv, installs requirements + test tools, runs the test suite
#   (make test-quick leaves out the tests marked slow)
# `make demo DEMO_HPARAMS=epochs=2` runs a shorter demo (CI runs that before `make test`).
# Offline install (docs/gpu.md): everything but torch, downloaded here, installed there:
#   make wheelhouse [PYTHON_VERSION=3.12] [PLATFORM=manylinux_2_28_x86_64] [TARGET_HAS=freeze.txt] [REQUIREMENTS=FILE]
#   make install-offline WHEELHOUSE=DIR [ONLY_MISSING=1]   (into $(PYTHON), its torch kept)
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
WHEELHOUSE ?= wheelhouse
DEMO_HPARAMS ?=

.PHONY: demo test test-quick bench-planner gpu-window gpu-check gpu-carry docker-check clean wheelhouse install-offline

$(VENV)/.installed: requirements.txt requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements-dev.txt
	touch $@

demo: $(VENV)/.installed
	$(PY) train.py --hparams "overwrite=true,$(DEMO_HPARAMS)"

test: $(VENV)/.installed
	$(PY) -m pytest -q -n 2 --dist worksteal

# The suite without the tests marked slow (end-to-end runs of many seconds): docs/development.md.
test-quick: $(VENV)/.installed
	$(PY) -m pytest -q -n 2 --dist worksteal -m "not slow"

bench-planner: $(VENV)/.installed
	$(PY) -m scripts.bench.planner

# The GPU measurement (scripts/release/gpu_check/). Needs no venv where torch and the requirements are
# already installed (a GPU machine without a registry): it uses the venv's Python if there is one.
GPU_PY = $(if $(wildcard $(PY)),$(PY),$(PYTHON))
gpu-check:
	$(GPU_PY) -m scripts.release.gpu_check $(ARGS)

# The GPU window (scripts/release/gpu_check/window.py): the cells that decide, everything under OUT,
# in at most 8 minutes on one H100/H200. ARGS="--device cpu --tiny" is its dry run on the CPU.
OUT ?= runs/gpu-window
gpu-window:
	$(GPU_PY) -m scripts.release.gpu_check --window --out $(OUT) $(ARGS)

# What a lent GPU machine lacks, gathered here into $(GPU_CARRY)/ (ignored) to travel with the checkout
# (docs/gpu.md): the cp312 wheels of the packages its image does not have
# (scripts/release/gpu_image_packages.txt) and the LJSpeech lengths and clips of ../shared.
GPU_CARRY ?= .gpu
SHARED_DIR ?= ../shared
gpu-carry:
	rm -rf $(GPU_CARRY) && mkdir -p $(GPU_CARRY)/shared/data/ljspeech
	$(PYTHON) -m scripts.release.wheelhouse download --dest $(GPU_CARRY)/wheels --python-version 3.12 \
		--target-has scripts/release/gpu_image_packages.txt
	cp -r $(SHARED_DIR)/data/ljspeech/lengths.tsv $(SHARED_DIR)/data/ljspeech/mini $(GPU_CARRY)/shared/data/ljspeech/
	du -sh $(GPU_CARRY)/wheels $(GPU_CARRY)/shared

wheelhouse:
	$(PYTHON) -m scripts.release.wheelhouse download --dest $(WHEELHOUSE) $(if $(REQUIREMENTS),--requirements $(REQUIREMENTS)) \
		$(if $(PYTHON_VERSION),--python-version $(PYTHON_VERSION)) $(if $(PLATFORM),--platform $(PLATFORM)) \
		$(if $(TARGET_HAS),--target-has $(TARGET_HAS))

install-offline:
	$(PYTHON) -m scripts.release.wheelhouse install --wheelhouse $(WHEELHOUSE) $(if $(ONLY_MISSING),--only-missing) \
		$(if $(REQUIREMENTS),--requirements $(REQUIREMENTS))

# Builds the Docker image with podman on a local Debian base with this machine's CPU torch and runs
# `train.py --check` and one demo epoch as build steps (root, podman, debootstrap; 17 min here).
docker-check:
	bash scripts/release/docker_check.sh

clean:
	rm -rf runs corpora .cache

# Two commands: `make run` (set up everything on a fresh machine, then run the default
# experiment) and `make test` (set up, then run the test suite).
VENV   ?= .venv
# The interpreter the venv is made from (.ci/run makes one venv per Python it tests).
PYTHON ?= python3
PY     := $(VENV)/bin/python
ARCH   := $(shell uname -m)
# PyTorch + torchvision pairs that install together (x86_64: CUDA build, runs on CPU too).
ifeq ($(ARCH),aarch64)
TORCH  := torch==2.9.1 torchvision==0.24.1
else
TORCH  := torch==2.14.1 torchvision==0.29.1
endif

.PHONY: setup data run test lint bench bench-peers docs

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -c "import torch, torchvision" 2>/dev/null || $(PY) -m pip install -q $(TORCH)
	$(PY) -m pip install -q -e '.[test,all,docs]'
	touch $@

# Fashion-MNIST from Debian's package where apt-get exists (offline machines); elsewhere
# torchvision downloads it on first use.
data:
	@if command -v apt-get >/dev/null && ! dpkg -s dataset-fashion-mnist >/dev/null 2>&1; then \
	  apt-get install -y -q dataset-fashion-mnist >/dev/null || \
	  (apt-get update -q >/dev/null && apt-get install -y -q dataset-fashion-mnist >/dev/null) || \
	  echo "note: could not install dataset-fashion-mnist; fmnist will be downloaded by torchvision"; \
	fi

run: setup data
	$(VENV)/bin/fedrun

# The example plugin (examples/fedprox_server), installed as a user installs a package: the
# suite runs its algorithm, config and claims from there.
$(VENV)/.example: $(VENV)/.installed $(wildcard examples/fedprox_server/pyproject.toml examples/fedprox_server/*/*.py examples/fedprox_server/*/*/*.yaml)
	$(PY) -m pip install -q --no-deps --no-build-isolation examples/fedprox_server
	touch $@

# The suite, and its wall time at the end.
test: setup data $(VENV)/.example
	@start=$$(date +%s); $(PY) -m pytest; status=$$?; \
	echo "make test: $$(( $$(date +%s) - start )) s"; exit $$status

# Static checks: ruff's lint and format, mypy (pyproject.toml: --strict on the whole package).
lint: setup
	$(VENV)/bin/ruff check fedprox_cli
	$(VENV)/bin/ruff format --check fedprox_cli
	$(VENV)/bin/mypy

# Engine benchmark (README, Performance); pass options with ARGS="--workloads 1 --threads 1".
bench: setup
	$(PY) scripts/bench_engine.py $(ARGS)

# fedrun against Flower and pfl-research on the same FedAvg workloads (docs/performance.md); the
# peers install into side environments under .peers/ on first use. ARGS="--repeats 1" etc.
bench-peers: setup data
	$(PY) scripts/bench_peers.py $(ARGS)

# The documentation site (docs/, mkdocs.yml) into build/site; strict: a broken link fails it.
docs: setup
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

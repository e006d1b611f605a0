# The only commands anyone needs. Every target creates .venv from the pinned lock if missing.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

HOST ?= 127.0.0.1
PORT ?= 8000
BUILD_TOOLS := pip==26.3 setuptools==80.9.0 wheel==0.45.1

.PHONY: run test check lint typecheck bench bench-smoke lock clean

$(STAMP): requirements.lock pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check $(BUILD_TOOLS)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements.lock
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	touch $(STAMP)

## run: start memhub on http://$(HOST):$(PORT) (streamable HTTP /mcp, SSE /sse, /health)
run: $(STAMP)
	$(BIN)/memhub serve --transport http,sse --host $(HOST) --port $(PORT)

## test: the whole suite (real SQLite files, real MCP clients, real subprocesses and HTTP)
test: $(STAMP)
	$(BIN)/python -m pytest

## check: lint + types + tests
check: lint typecheck test

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

typecheck: $(STAMP)
	$(BIN)/mypy

## bench: latency benchmarks over the real MCP client (not part of CI)
bench: $(STAMP)
	$(BIN)/python bench/latency.py --sizes 1000,10000

bench-smoke: $(STAMP)
	$(BIN)/python bench/latency.py --sizes 200 --queries 20

lock:
	$(BIN)/python -m pip freeze --exclude-editable > requirements.lock

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info

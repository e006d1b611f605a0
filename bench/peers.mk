# memhub beside other MCP memory servers (bench/peers/README.md). Included from the main Makefile.
# The peers install into bench/peers/.envs/ on demand (git-ignored): never memhub dependencies,
# never run in CI.
PEERS_THREADS := OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE MKL_NUM_THREADS=1
PEERS_PYTHON  := $(or $(BIN),.venv/bin)/python
PEERS_VENV    := $(or $(STAMP),.venv/.installed)

.PHONY: bench-peers bench-peers-install bench-peers-smoke

## bench-peers-install: build the peers' throwaway environments (idempotent)
bench-peers-install:
	bash bench/peers/install.sh

## bench-peers: store/search latency at 1k and 10k and LoCoMo conv-0 hit@5, writes bench/results/peers.json
bench-peers: $(PEERS_VENV) bench-peers-install
	$(PEERS_THREADS) $(PEERS_PYTHON) bench/peers/run.py --sizes 1000,10000 --calls 100

## bench-peers-smoke: a quick look that every peer starts, stores and searches
bench-peers-smoke: $(PEERS_VENV) bench-peers-install
	$(PEERS_THREADS) $(PEERS_PYTHON) bench/peers/run.py --sizes 100 --calls 10 --no-locomo \
		--out bench/results/peers-smoke.json

"""Seed 001's constants and memhub's own bounds for the vault, with their documented defaults.

docs/vault.md lists every one of them; change them here (they are not per-call knobs).
"""

from __future__ import annotations

# seed 001 §4: vault_scan chunking
VAULT_SCAN_DEFAULT_CHUNK_LINES = 200
VAULT_SCAN_MAX_CHUNK_LINES = 1_000
# seed 001 §3/§4: stop rules of the find -> scan -> coverage -> audit flow
COVERAGE_MIN_RATIO = 0.9
MARGINAL_GAIN_MIN = 0.05

# vault_read / vault_scan output bounds
READ_DEFAULT_MAX_CHARS = 20_000
READ_HARD_LIMIT_CHARS = 100_000

# vault_find
FIND_DEFAULT_TIME_MS = 60_000
FIND_DEFAULT_MAX_CANDIDATES = 200
FIND_MAX_CANDIDATES = 10_000
FIND_MAX_TIME_MS = 600_000
FIND_HARD_LIMIT_FILES = 100_000  # files one call examines at most (cutoff_reason hard_limit)
LOOSE_MIN_SCORE = 0.5  # Stage 1: share of the query's loose keys a node must contain
SUFFICIENCY_MIN = 0.8  # Stage 1.5: at or above, integration_status is ready and next_actions stop
FILE_BIAS_MAX = 0.8  # a file holding more than this share of several candidates: look wider
SECTION_MAX_LINES = 60  # a heading section longer than this is split into several nodes

# vault_search
SEARCH_DEFAULT_LIMIT = 50
SEARCH_MAX_LIMIT = 500
REGEX_TIMEOUT_MS = 1_000  # a regex search stops after this much evaluation time in total
SNIPPET_CHARS = 200

# artifact_audit
GROUNDING_MIN_RATIO = 0.6  # a node is grounded when this share of its loose keys occurs in the source

# files
TEXT_SUFFIXES = (".md", ".markdown", ".txt")
MAX_NOTE_BYTES = 4 * 1024 * 1024  # larger files are skipped by find/search (counted in warnings)
MAX_READ_BYTES = 64 * 1024 * 1024  # larger files are refused by read, scan, coverage and writes
MAX_CONTENT_CHARS = 1_000_000  # vault_create / vault_write / vault_replace input
MAX_PATH_CHARS = 1_024
MAX_NAME_BYTES = 255
LOCK_WAIT_S = 30.0  # a write waits this long at most for another process's write to the vault

# the one store: note sections indexed as items
SYNC_INTERVAL_S = 2.0  # an mtime scan of the vault at most this often (on access)
SYNC_BATCH_FILES = 2_000  # changed files indexed per call at most; the rest on the next calls

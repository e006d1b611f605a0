"""The `vault` toolset (seed 001): ten tools over a folder of Markdown notes (an Obsidian vault)."""

from __future__ import annotations

from memhub.core.settings import Settings
from memhub.mcp.toolkit import Toolset, ToolSpec
from memhub.services.vault import audit, errors, find, reading, search, writing
from memhub.services.vault import config as c
from memhub.services.vault import models as m
from memhub.services.vault.state import VaultState

_FLOW = " Flow: find, scan, coverage, audit; follow next_actions until stop."

TOOLS = (  # a tuple: each spec keeps its own ToolSpec[In, Out] type for the checker
    ToolSpec(
        "vault_ls",
        "List one folder of the vault (files with their size, folders), by name.",
        m.LsInput,
        m.LsOutput,
        reading.vault_ls,
        read_only=True,
        title="List folder",
        idempotent=True,
    ),
    ToolSpec(
        "vault_read",
        "Read a note's lines: range (1-based, inclusive) or full=true; at most limits.max_chars "
        f"characters (hard limit {c.READ_HARD_LIMIT_CHARS}); next_offset continues.",
        m.ReadInput,
        m.ReadOutput,
        reading.vault_read,
        read_only=True,
        title="Read note",
        idempotent=True,
    ),
    ToolSpec(
        "vault_find",
        "Find where the vault covers a topic (Japanese or English), exact and loose matches over "
        f"sections; next_actions says what to call next, or stop.{_FLOW}",
        m.FindInput,
        m.FindOutput,
        find.vault_find,
        read_only=True,
        title="Find in vault",
    ),
    ToolSpec(
        "vault_scan",
        f"Read a note chunk by chunk (chunk_lines default {c.VAULT_SCAN_DEFAULT_CHUNK_LINES}, max "
        f"{c.VAULT_SCAN_MAX_CHUNK_LINES}) from cursor.start_line (default 1); next_cursor continues, "
        "eof tells the end.",
        m.ScanInput,
        m.ScanOutput,
        reading.vault_scan,
        read_only=True,
        title="Scan note",
        idempotent=True,
    ),
    ToolSpec(
        "vault_coverage",
        "How much of a note the given line ranges cover (overlaps and neighbours merged): coverage_ratio, "
        f"covered and uncovered ranges, meets_min_coverage (>= {c.COVERAGE_MIN_RATIO}).",
        m.CoverageInput,
        m.CoverageOutput,
        reading.vault_coverage,
        read_only=True,
        title="Line coverage",
        idempotent=True,
    ),
    ToolSpec(
        "artifact_audit",
        "Check an artifact (summary, design note) against its source note: rootless nodes, orphan "
        "branches, one-way references, coverage of cited lines; next_actions says what to do.",
        m.AuditInput,
        m.AuditOutput,
        audit.artifact_audit,
        read_only=True,
        title="Audit artifact",
        idempotent=True,
    ),
    ToolSpec(
        "vault_create",
        "Create a new note (folders are created as needed; conflict if it exists). .system/ is reserved; "
        "daily/ takes only daily/YYYY-MM-DD.md.",
        m.CreateInput,
        m.WrittenOutput,
        writing.vault_create,
        read_only=False,
        title="Create note",
    ),
    ToolSpec(
        "vault_write",
        "Overwrite or append to an existing note (conflict if it does not exist, or if it changed outside "
        "memhub since it was read). daily/ notes: append only. .system/ is reserved. Writes are atomic.",
        m.WriteInput,
        m.WrittenOutput,
        writing.vault_write,
        read_only=False,
        title="Write note",
        destructive=True,
    ),
    ToolSpec(
        "vault_replace",
        "Replace literal text in a note (max_replacements default 1; conflict if the text does not occur). "
        "Not in .system/ or daily/.",
        m.ReplaceInput,
        m.ReplaceOutput,
        writing.vault_replace,
        read_only=False,
        title="Replace text",
        destructive=True,
    ),
    ToolSpec(
        "vault_search",
        f"Search lines of notes: mode regex (default; evaluation bounded to {c.REGEX_TIMEOUT_MS} ms, an "
        "invalid pattern is searched as plain text), plain (case-insensitive substring) or loose "
        f"(Japanese/English fuzzy); glob and relative_dir narrow it; limit default {c.SEARCH_DEFAULT_LIMIT}.",
        m.SearchInput,
        m.SearchOutput,
        search.vault_search,
        read_only=True,
        title="Search notes",
    ),
)


def vault_state(settings: Settings) -> VaultState:
    return VaultState(settings.vault_path, settings.user, lock_mode=settings.vault_lock)


TOOLSET = Toolset("vault", errors.render, TOOLS, state=vault_state)

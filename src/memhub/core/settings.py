"""Settings, declared once with their environment variable, default and help text.

Only composition roots (the CLI, tests) build a `Settings`; everything else receives values.
`docs/configuration.md` lists them; a test fails when one is undocumented.
"""

from __future__ import annotations

import getpass
import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

TRANSPORTS = ("stdio", "http", "sse")


def _meta(env: str, help: str) -> dict[str, str]:
    return {"env": env, "help": help}


@dataclass(frozen=True)
class Settings:
    home: Path = field(
        default=Path("~/.local/share/memhub").expanduser(),
        metadata=_meta("MEMHUB_HOME", "Directory holding the database (and later the vault)."),
    )
    db: str | None = field(
        default=None,
        metadata=_meta(
            "MEMHUB_DB", "Database: a SQLite file path or sqlite:///path; default: $MEMHUB_HOME/memhub.db."
        ),
    )
    user: str = field(
        default="", metadata=_meta("MEMHUB_USER", "Who the stdio caller is; default: the OS user.")
    )
    project: str = field(
        default="",
        metadata=_meta("MEMHUB_PROJECT", "Current project name; default: the git root name of the cwd."),
    )
    embedder: str = field(
        default="auto",
        metadata=_meta(
            "MEMHUB_EMBEDDER",
            "Embedding backend: auto (best installed), e5+use, e5, use, hash or none (text only).",
        ),
    )
    toolsets: tuple[str, ...] = field(
        default=(), metadata=_meta("MEMHUB_TOOLSETS", "Comma list of toolsets to serve; default: all.")
    )
    transports: tuple[str, ...] = field(
        default=("stdio",), metadata=_meta("MEMHUB_TRANSPORT", "Comma list of stdio, http, sse.")
    )
    host: str = field(default="127.0.0.1", metadata=_meta("MEMHUB_HOST", "HTTP/SSE bind address."))
    auth: str = field(
        default="none",
        metadata=_meta("MEMHUB_AUTH", "HTTP authentication: none (loopback only) or apikey."),
    )
    port: int = field(default=8000, metadata=_meta("MEMHUB_PORT", "HTTP/SSE port."))
    log_level: str = field(
        default="WARNING", metadata=_meta("MEMHUB_LOG_LEVEL", "DEBUG, INFO, WARNING or ERROR (stderr).")
    )
    rate_limit_read: int = field(
        default=0,
        metadata=_meta("MEMHUB_RATE_LIMIT_READ", "Read calls per minute per principal (0: unlimited)."),
    )
    rate_limit_write: int = field(
        default=0,
        metadata=_meta("MEMHUB_RATE_LIMIT_WRITE", "Write calls per minute per principal (0: unlimited)."),
    )
    rate_limit_admin: int = field(
        default=0,
        metadata=_meta("MEMHUB_RATE_LIMIT_ADMIN", "Admin calls per minute per principal (0: unlimited)."),
    )
    agent_memory_secret: str = field(
        default="",
        metadata=_meta(
            "AGENT_MEMORY_SECRET",
            "The secret accept_proposal requires (decisions toolset); empty: accepting through MCP is off.",
        ),
    )
    decision_cooldown_s: float = field(
        default=0.0,
        metadata=_meta(
            "MEMHUB_DECISION_COOLDOWN_S",
            "Seconds a principal must wait between two decision writes (0: no cooldown).",
        ),
    )
    review_window_s: float = field(
        default=3600.0,
        metadata=_meta(
            "MEMHUB_REVIEW_WINDOW_S", "Seconds after it was written before a proposal may be accepted."
        ),
    )
    pce_active_context_ttl_s: float = field(
        default=1800.0,
        metadata=_meta(
            "MEMHUB_PCE_ACTIVE_CONTEXT_TTL_S",
            "Seconds an active context (pce.memory.activate) stays readable.",
        ),
    )
    pce_policy_hmac_key: str = field(
        default="",
        metadata=_meta(
            "MEMHUB_PCE_POLICY_HMAC_KEY",
            "When set, pce.memory.policy.apply requires an approver and an HMAC-SHA256 signature"
            " with this key.",
        ),
    )
    pce_require_policy: bool = field(
        default=False,
        metadata=_meta(
            "MEMHUB_PCE_REQUIRE_POLICY",
            "1: pce activate/search answer POLICY_MISSING until a policy is applied"
            " (0: the built-in policy).",
        ),
    )
    pce_feedback_bucket_s: int = field(
        default=3600,
        metadata=_meta(
            "MEMHUB_PCE_FEEDBACK_BUCKET_S",
            "Width of pce.memory.feedback's idempotency bucket: one signal per claim and caller per bucket.",
        ),
    )

    @property
    def proposals_dir(self) -> Path:
        """Where decision proposals (markdown files) are written and read."""
        return self.home / "proposals"

    @property
    def db_url(self) -> str:
        """Where the store is (memhub.store.open.open_store reads it)."""
        return self.db if self.db is not None else str(self.home / "memhub.db")

    @property
    def db_path(self) -> Path:
        """The SQLite file of a file-backed store."""
        scheme, sep, rest = self.db_url.partition("://")
        if not sep:
            return Path(self.db_url)
        if scheme != "sqlite":
            raise ValueError(f"{self.db_url} is not a SQLite file")
        return Path(rest.removeprefix("/") if rest.startswith("//") else rest)


def setting_docs() -> dict[str, tuple[str, str]]:
    """name -> (environment variable, help) for every setting."""
    return {f.name: (f.metadata["env"], f.metadata["help"]) for f in fields(Settings)}


def _split(value: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in value.split(",") if part.strip())


def git_root_name(cwd: Path) -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--show-toplevel"], cwd=cwd, capture_output=True, text=True, timeout=2
        )
    except (OSError, subprocess.SubprocessError):
        return cwd.name
    return Path(out.stdout.strip()).name if out.returncode == 0 and out.stdout.strip() else cwd.name


def load_settings(environ: Mapping[str, str], overrides: Mapping[str, object], cwd: Path) -> Settings:
    """Defaults < environment < explicit overrides (command-line flags). Raises ValueError."""
    values: dict[str, object] = {}
    for f in fields(Settings):
        raw = environ.get(f.metadata["env"])
        if raw is not None and raw != "":
            values[f.name] = raw
    values.update({k: v for k, v in overrides.items() if v is not None})
    if "home" in values:
        values["home"] = Path(str(values["home"])).expanduser()
    if "db" in values:
        db = str(values["db"])
        values["db"] = db if "://" in db else str(Path(db).expanduser())
    for key in ("toolsets", "transports"):
        if isinstance(values.get(key), str):
            values[key] = _split(str(values[key]))
    if "port" in values:
        values["port"] = int(str(values["port"]))
    for key in ("rate_limit_read", "rate_limit_write", "rate_limit_admin"):
        if key in values:
            values[key] = int(str(values[key]))
    if "pce_require_policy" in values and isinstance(values["pce_require_policy"], str):
        values["pce_require_policy"] = str(values["pce_require_policy"]).lower() in ("1", "true", "yes", "on")
    if "pce_feedback_bucket_s" in values:
        values["pce_feedback_bucket_s"] = int(str(values["pce_feedback_bucket_s"]))
    for key in ("decision_cooldown_s", "review_window_s", "pce_active_context_ttl_s"):
        if key in values:
            values[key] = float(str(values[key]))
    settings = Settings(**values)  # type: ignore[arg-type]
    if settings.auth not in ("none", "apikey"):
        raise ValueError("auth must be none or apikey")
    bad = set(settings.transports) - set(TRANSPORTS)
    if bad or not settings.transports:
        raise ValueError(f"transport must be a comma list of {', '.join(TRANSPORTS)}")
    user = settings.user or os.environ.get("USER") or getpass.getuser()
    return replace(settings, user=user, project=settings.project or git_root_name(cwd))

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

TOOLSETS = ("discussion", "assoc", "vault")  # toolsets built so far; the seeds define five
TRANSPORTS = ("stdio", "http", "sse")


def _meta(env: str, help: str) -> dict[str, str]:
    return {"env": env, "help": help}


@dataclass(frozen=True)
class Settings:
    home: Path = field(
        default=Path("~/.local/share/memhub").expanduser(),
        metadata=_meta("MEMHUB_HOME", "Directory holding the database (and later the vault)."),
    )
    db: Path | None = field(
        default=None, metadata=_meta("MEMHUB_DB", "SQLite file; default: $MEMHUB_HOME/memhub.db.")
    )
    vault: Path | None = field(
        default=None,
        metadata=_meta(
            "MEMHUB_VAULT", "Folder of Markdown notes (an Obsidian vault); default: $MEMHUB_HOME/vault."
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
        default=TOOLSETS, metadata=_meta("MEMHUB_TOOLSETS", "Comma list of toolsets to serve.")
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

    @property
    def db_path(self) -> Path:
        return self.db if self.db is not None else self.home / "memhub.db"

    @property
    def vault_path(self) -> Path:
        return self.vault if self.vault is not None else self.home / "vault"


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
    for key in ("home", "db", "vault"):
        if key in values:
            values[key] = Path(str(values[key])).expanduser()
    for key in ("toolsets", "transports"):
        if isinstance(values.get(key), str):
            values[key] = _split(str(values[key]))
    if "port" in values:
        values["port"] = int(str(values["port"]))
    settings = Settings(**values)  # type: ignore[arg-type]
    unknown = set(settings.toolsets) - set(TOOLSETS)
    if unknown:
        raise ValueError(f"unknown toolset(s) {sorted(unknown)}; available: {', '.join(TOOLSETS)}")
    if settings.auth not in ("none", "apikey"):
        raise ValueError("auth must be none or apikey")
    bad = set(settings.transports) - set(TRANSPORTS)
    if bad or not settings.transports:
        raise ValueError(f"transport must be a comma list of {', '.join(TRANSPORTS)}")
    user = settings.user or os.environ.get("USER") or getpass.getuser()
    return replace(settings, user=user, project=settings.project or git_root_name(cwd))

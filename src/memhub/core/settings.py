"""Settings, declared once with their environment variable, default and help text.

Only composition roots (the CLI, tests) build a `Settings`; everything else receives values.
`docs/configuration.md` lists them; a test fails when one is undocumented.
"""

from __future__ import annotations

import getpass
import os
import subprocess
from collections.abc import Mapping
from dataclasses import Field, dataclass, field, fields, replace
from pathlib import Path

TRANSPORTS = ("stdio", "http", "sse")
AUTH_MODES = ("none", "apikey", "jwt")


def _meta(env: str, help: str, *, empty_is_a_value: bool = False) -> dict[str, str]:
    """`empty_is_a_value`: the variable set to "" means "" (off), not "unset, use the default"."""
    return {"env": env, "help": help, "empty": "value" if empty_is_a_value else "unset"}


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
    vault_lock: str = field(
        default="auto",
        metadata=_meta(
            "MEMHUB_VAULT_LOCK",
            "How processes sharing the vault take turns writing it: folder (flock on its root),"
            " file (lockf on its .memhub-lock: NFS, several machines) or auto (folder where it works).",
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
        metadata=_meta(
            "MEMHUB_AUTH",
            "HTTP authentication: none (loopback only), apikey (and JWT when a JWT key is set) or jwt.",
        ),
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

    config: str = field(
        default="",
        metadata=_meta(
            "MEMHUB_CONFIG", "A JSON or TOML config file (seed 003 §4.2.2/§6.3 shape); flags win."
        ),
    )
    http_port: int = field(
        default=0, metadata=_meta("MEMHUB_HTTP_PORT", "Port of POST /mcp (0: the port setting).")
    )
    sse_port: int = field(
        default=0,
        metadata=_meta("MEMHUB_SSE_PORT", "Port of GET/POST /sse (0: the HTTP port: one listener)."),
    )
    allowed_hosts: tuple[str, ...] = field(
        default=(),
        metadata=_meta(
            "MEMHUB_ALLOWED_HOSTS",
            "Host headers accepted (host or host:port or host:*); default: the bound address.",
        ),
    )
    allowed_origins: tuple[str, ...] = field(
        default=(),
        metadata=_meta(
            "MEMHUB_ALLOWED_ORIGINS",
            "Origins accepted and answered with CORS headers; default: the allowed hosts.",
        ),
    )
    allowed_methods: tuple[str, ...] = field(
        default=("GET", "POST", "DELETE", "OPTIONS"),
        metadata=_meta("MEMHUB_ALLOWED_METHODS", "Methods a CORS preflight may allow."),
    )
    rate_limit_ip_read: int = field(
        default=0,
        metadata=_meta(
            "MEMHUB_RATE_LIMIT_IP_READ", "Read calls per minute per client IP over HTTP (0: unlimited)."
        ),
    )
    rate_limit_ip_write: int = field(
        default=0,
        metadata=_meta("MEMHUB_RATE_LIMIT_IP_WRITE", "Write calls per minute per client IP (0: unlimited)."),
    )
    rate_limit_ip_admin: int = field(
        default=0,
        metadata=_meta("MEMHUB_RATE_LIMIT_IP_ADMIN", "Admin calls per minute per client IP (0: unlimited)."),
    )
    max_body_bytes: int = field(
        default=4_194_304,
        metadata=_meta("MEMHUB_MAX_BODY_BYTES", "Largest HTTP request body accepted (413 above it)."),
    )
    sse_heartbeat_s: float = field(
        default=30.0,
        metadata=_meta("MEMHUB_SSE_HEARTBEAT_S", "Seconds between SSE heartbeat comments (0: none)."),
    )
    sse_max_connections: int = field(
        default=100,
        metadata=_meta("MEMHUB_SSE_MAX_CONNECTIONS", "Open SSE streams at most (503 above it; 0: no limit)."),
    )
    max_sessions: int = field(
        default=1000,
        metadata=_meta(
            "MEMHUB_MAX_SESSIONS",
            "Open MCP sessions (streamable HTTP and SSE) at most; the oldest idle one is closed for a new"
            " one (0: no limit).",
        ),
    )
    max_sessions_per_principal: int = field(
        default=100,
        metadata=_meta(
            "MEMHUB_MAX_SESSIONS_PER_PRINCIPAL",
            "Open MCP sessions one principal may hold; its oldest idle one is closed for a new one"
            " (0: no limit).",
        ),
    )
    trusted_proxies: tuple[str, ...] = field(
        default=(),
        metadata=_meta(
            "MEMHUB_TRUSTED_PROXIES",
            "Comma list of proxy addresses (or CIDR networks) whose X-Forwarded-For/-Proto headers are"
            " believed; empty: none, the socket address is the client.",
        ),
    )
    tls_cert: str = field(default="", metadata=_meta("MEMHUB_TLS_CERT", "PEM certificate: serve HTTPS."))
    tls_key: str = field(default="", metadata=_meta("MEMHUB_TLS_KEY", "PEM private key of tls_cert."))
    tls_min_version: str = field(
        default="1.3", metadata=_meta("MEMHUB_TLS_MIN_VERSION", "Lowest TLS version accepted: 1.3 or 1.2.")
    )
    jwt_secret: str = field(
        default="",
        metadata=_meta("MEMHUB_JWT_SECRET", "HS256 secret that JWT bearer tokens are signed with."),
    )
    jwt_public_key: str = field(
        default="", metadata=_meta("MEMHUB_JWT_PUBLIC_KEY", "PEM public key file for RS256/ES256 tokens.")
    )
    jwt_jwks: str = field(
        default="", metadata=_meta("MEMHUB_JWT_JWKS", "JWKS file (keys by kid) for RS256/ES256 tokens.")
    )
    jwt_audience: str = field(
        default="",
        metadata=_meta("MEMHUB_JWT_AUDIENCE", "Required aud claim (empty: tokens must have no aud)."),
    )
    jwt_issuer: str = field(
        default="", metadata=_meta("MEMHUB_JWT_ISSUER", "Required iss claim (empty: any).")
    )
    jwt_claim: str = field(
        default="sub", metadata=_meta("MEMHUB_JWT_CLAIM", "The claim naming the principal.")
    )
    backup_time: str = field(
        default="03:00",
        metadata=_meta(
            "MEMHUB_BACKUP_TIME",
            "UTC time HH:MM of serve's daily backup (empty: no daily backup).",
            empty_is_a_value=True,
        ),
    )
    backup_keep: int = field(
        default=7, metadata=_meta("MEMHUB_BACKUP_KEEP", "Daily backups kept; older ones are deleted.")
    )
    encryption_key: str = field(
        default="",
        metadata=_meta(
            "MEMHUB_ENCRYPTION_KEY", "Base64 32-byte key: memory content encrypted at rest (AES-GCM)."
        ),
    )
    encryption_key_file: str = field(
        default="", metadata=_meta("MEMHUB_ENCRYPTION_KEY_FILE", "File holding the encryption key (base64).")
    )

    @property
    def proposals_dir(self) -> Path:
        """Where decision proposals (markdown files) are written and read."""
        return self.home / "proposals"

    @property
    def http_listen_port(self) -> int:
        return self.http_port or self.port

    @property
    def sse_listen_port(self) -> int:
        return self.sse_port or self.http_listen_port

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


def _convert(f: Field[object], raw: object) -> object:
    """A raw value (text from the environment or a flag, or a config file's JSON/TOML value)
    as the type the setting declares. Raises ValueError."""
    kind = str(f.type)
    if kind in ("Path", "Path | None"):
        return Path(str(raw)).expanduser()
    if kind.startswith("tuple"):
        if isinstance(raw, list | tuple):
            return tuple(str(part).strip() for part in raw if str(part).strip())
        return _split(str(raw))
    if kind == "int":
        if isinstance(raw, bool):
            raise ValueError(f"{f.name} must be a number")
        return int(str(raw))
    if kind == "float":
        return float(str(raw))
    if kind == "bool":
        if isinstance(raw, bool):
            return raw
        text = str(raw).strip().lower()
        if text not in ("1", "true", "yes", "on", "0", "false", "no", "off"):
            raise ValueError(f"{f.name} must be true or false")
        return text in ("1", "true", "yes", "on")
    return str(raw)


def load_settings(environ: Mapping[str, str], overrides: Mapping[str, object], cwd: Path) -> Settings:
    """Defaults < config file < environment < explicit overrides (command-line flags).
    Raises ValueError."""
    from memhub.core.config_file import read_config

    by_name = {f.name: f for f in fields(Settings)}
    config = overrides.get("config") or environ.get("MEMHUB_CONFIG") or ""
    values: dict[str, object] = {}
    if config:
        for name, raw in read_config(Path(str(config)).expanduser(), environ).items():
            if name not in by_name:
                raise ValueError(f"{config}: unknown setting {name}")
            values[name] = _convert(by_name[name], raw)
    for f in by_name.values():
        raw = environ.get(f.metadata["env"])
        if raw is not None and (raw != "" or f.metadata["empty"] == "value"):
            values[f.name] = _convert(f, raw)
    for name, raw in overrides.items():
        if raw is not None:
            values[name] = _convert(by_name[name], raw)
    if "db" in values:
        db = str(values["db"])
        values["db"] = db if "://" in db else str(Path(db).expanduser())
    settings = Settings(**values)  # type: ignore[arg-type]
    if settings.auth not in AUTH_MODES:
        raise ValueError(f"auth must be one of {', '.join(AUTH_MODES)}")
    bad = set(settings.transports) - set(TRANSPORTS)
    if bad or not settings.transports:
        raise ValueError(f"transport must be a comma list of {', '.join(TRANSPORTS)}")
    if settings.tls_min_version not in ("1.2", "1.3"):
        raise ValueError("tls_min_version must be 1.2 or 1.3")
    if settings.vault_lock not in ("auto", "folder", "file"):
        raise ValueError("vault_lock must be auto, folder or file")
    if bool(settings.tls_cert) != bool(settings.tls_key):
        raise ValueError("TLS needs both tls_cert and tls_key")
    if settings.auth == "jwt" and not (settings.jwt_secret or settings.jwt_public_key or settings.jwt_jwks):
        raise ValueError("auth jwt needs jwt_secret, jwt_public_key or jwt_jwks")
    if settings.backup_time:
        parse_hhmm(settings.backup_time)
    user = settings.user or os.environ.get("USER") or getpass.getuser()
    return replace(settings, user=user, project=settings.project or git_root_name(cwd))


def parse_hhmm(text: str) -> tuple[int, int]:
    """`03:00` -> (3, 0). Raises ValueError."""
    hours, sep, minutes = text.strip().partition(":")
    if not sep or not hours.isdigit() or not minutes.isdigit():
        raise ValueError(f"{text!r} is not a time HH:MM")
    h, m = int(hours), int(minutes)
    if not (0 <= h < 24 and 0 <= m < 60):
        raise ValueError(f"{text!r} is not a time HH:MM")
    return h, m

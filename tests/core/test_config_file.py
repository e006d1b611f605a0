"""The config file (seed 003 §4.2.2/§6.3 shape, JSON or TOML): file < environment < flags."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memhub.core.settings import load_settings

SEED_SHAPE = {
    "transports": {
        "stdio": {"enabled": True},
        "http": {
            "enabled": True,
            "port": 8000,
            "host": "localhost",
            "cors": {
                "allowed_origins": ["http://localhost:3000"],
                "allowed_methods": ["GET", "POST", "OPTIONS"],
            },
        },
        "sse": {
            "enabled": True,
            "port": 8001,
            "host": "localhost",
            "max_connections": 100,
            "heartbeat_interval": 30,
        },
    },
    "authentication": {
        "stdio": {"type": "none"},
        "http": {"type": "api_key", "header": "X-API-Key", "jwt_secret": "${JWT_SECRET}"},
        "sse": {"type": "session", "timeout": 3600},
    },
}


def test_the_seed_example_loads(tmp_path: Path) -> None:
    path = tmp_path / "memhub.json"
    path.write_text(json.dumps(SEED_SHAPE))
    settings = load_settings({"JWT_SECRET": "from-env"}, {"config": str(path), "user": "u"}, tmp_path)
    assert settings.transports == ("stdio", "http", "sse")
    assert (settings.http_listen_port, settings.sse_listen_port, settings.host) == (8000, 8001, "localhost")
    assert settings.allowed_origins == ("http://localhost:3000",)
    assert settings.allowed_methods == ("GET", "POST", "OPTIONS")
    assert (settings.sse_max_connections, settings.sse_heartbeat_s) == (100, 30.0)
    assert settings.auth == "apikey" and settings.jwt_secret == "from-env"


def test_environment_and_flags_win(tmp_path: Path) -> None:
    path = tmp_path / "memhub.toml"
    path.write_text("[transports.http]\nport = 9000\n[memhub]\nrate_limit_ip_write = 5\nbackup_keep = 3\n")
    env = {"MEMHUB_CONFIG": str(path), "MEMHUB_RATE_LIMIT_IP_WRITE": "7"}
    settings = load_settings(env, {"http_port": 9100, "user": "u"}, tmp_path)
    assert (
        settings.http_listen_port == 9100 and settings.rate_limit_ip_write == 7 and settings.backup_keep == 3
    )


@pytest.mark.parametrize(
    "data",
    [
        {"transports": {"http": {"prot": 1}}},
        {"authentication": {"http": {"type": "oauth"}}},
        {"authentication": {"http": {"header": "X-Token"}}},
        {"memhub": {"no_such_setting": 1}},
        {"memhub": {"backup_time": "25:00"}},
    ],
)
def test_mistakes_are_errors(tmp_path: Path, data: dict[str, object]) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError):
        load_settings({}, {"config": str(path), "user": "u"}, tmp_path)


def test_an_empty_backup_time_turns_the_daily_backup_off(tmp_path: Path) -> None:
    path = tmp_path / "memhub.toml"
    path.write_text('[memhub]\nbackup_time = "04:30"\n')
    assert load_settings({}, {"user": "u"}, tmp_path).backup_time == "03:00"  # the default
    assert load_settings({"MEMHUB_BACKUP_TIME": ""}, {"user": "u"}, tmp_path).backup_time == ""
    env = {"MEMHUB_CONFIG": str(path), "MEMHUB_BACKUP_TIME": ""}
    assert load_settings(env, {"user": "u"}, tmp_path).backup_time == ""  # the environment wins
    # other settings keep treating an empty variable as unset
    assert (
        load_settings({"MEMHUB_BACKUP_KEEP": "", "MEMHUB_TRANSPORT": ""}, {"user": "u"}, tmp_path).backup_keep
        == 7
    )

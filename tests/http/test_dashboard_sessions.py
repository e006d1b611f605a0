"""Dashboard sessions: signed ids, idle and total lifetimes, a full table keeps the logged-in."""

from __future__ import annotations

from memhub.http.dashboard import sessions
from memhub.http.dashboard.sessions import Sessions


def test_a_cookie_names_a_live_session_only_with_its_signature() -> None:
    table = Sessions()
    session = table.start("alice")
    cookie = table.cookie(session)
    assert table.load(cookie) is session
    sid, _, signature = cookie.partition(".")
    assert table.load(f"{sid}.{'0' * len(signature)}") is None
    assert table.load(sid) is None and table.load("") is None and table.load(None) is None
    assert Sessions().load(cookie) is None  # another process's secret
    table.end(session)
    assert table.load(cookie) is None


def test_idle_and_ended_sessions_are_gone() -> None:
    table = Sessions(idle_s=-1.0)
    assert table.load(table.cookie(table.start("alice"))) is None
    short = Sessions()
    assert short.load(short.cookie(short.start("alice", until=0.0))) is None  # a JWT that expired


def test_the_csrf_token_is_the_sessions_own() -> None:
    table = Sessions()
    one, two = table.start(), table.start()
    assert one.check_csrf(one.csrf) and not one.check_csrf(two.csrf)
    assert not one.check_csrf("") and not one.check_csrf(None)


def test_a_flood_of_anonymous_sessions_keeps_the_logged_in(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(sessions, "MAX_SESSIONS", 50)
    table = Sessions()
    alice = table.start("alice")
    for _ in range(200):
        table.start()
    assert table.load(table.cookie(alice)) is alice
    assert len(table._by_id) <= 50

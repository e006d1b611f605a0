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


def test_a_flood_of_anonymous_visits_keeps_another_visitors_login_form(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """One client fetching the login page without end used to evict every other visitor's
    anonymous session, so their login form's CSRF token failed: anonymous ones are now kept by
    the cookie alone."""
    monkeypatch.setattr(sessions, "MAX_SESSIONS", 50)
    table = Sessions()
    visitor = table.start()
    cookie = table.cookie(visitor)
    for _ in range(500):
        table.start()
    loaded = table.load(cookie)
    assert loaded is not None and loaded.principal is None
    assert loaded.check_csrf(visitor.csrf)
    assert not loaded.check_csrf(table.start().csrf)  # each anonymous session has its own token
    assert table._by_id == {}  # nothing kept for anonymous visitors
    sid, _, signature = cookie.partition(".")
    forged = "a" + str(int(sid[1:].partition("-")[0]) + 10) + "-" + sid.partition("-")[2]
    assert table.load(f"{forged}.{signature}") is None  # the issue time is signed


def test_an_anonymous_session_lasts_the_idle_time_from_its_issue() -> None:
    table = Sessions(idle_s=-1.0)
    assert table.load(table.cookie(table.start())) is None
    fresh = Sessions()
    assert fresh.load(fresh.cookie(fresh.start())) is not None

"""The web dashboard over real HTTP on 127.0.0.1 (`memhub serve --auth apikey`): login,
sessions, CSRF, CSP, escaping, who sees what, search explanations equal to the tools'
results, proposals accepted as a person's decision, discussions."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import http_server
from tests.http.dashboard_site import Site, csrf_of, dashboard_site, explained, hits
from tests.store.backends import Backend


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory, backend: Backend) -> Iterator[Site]:
    with dashboard_site(tmp_path_factory.mktemp("dash"), backend) as built:
        yield built


# -- login, sessions, headers ---------------------------------------------------------------------


def test_pages_need_a_login_and_the_key_goes_in_a_post_body(site: Site) -> None:
    client = site.browser()
    first = client.get("/")
    assert first.status_code == 303 and first.headers["location"] == "/ui/login"
    form = client.get("/ui/login")
    assert form.status_code == 200
    assert 'method="post" action="/ui/login"' in form.text and 'type="password"' in form.text
    # a key in the URL logs nobody in
    assert client.get(f"/ui/login?credential={site.keys['alice']}").status_code == 200
    assert client.get("/").status_code == 303
    before = client.cookies.get("memhub_session")
    wrong = client.post("/ui/login", data={"csrf": csrf_of(form.text), "credential": "mh_wrong"})
    assert wrong.status_code == 401 and "unknown API key" in wrong.text
    assert client.get("/").status_code == 303
    done = client.post("/ui/login", data={"csrf": csrf_of(form.text), "credential": site.keys["alice"]})
    assert done.status_code == 303
    cookie = done.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Secure" not in cookie  # no TLS here
    assert client.cookies.get("memhub_session") != before  # a new session id after login
    page = client.get("/")
    assert page.status_code == 200 and "alice" in page.text and "Items by kind" in page.text
    assert site.keys["alice"] not in page.text


def test_every_page_has_a_strict_csp(site: Site) -> None:
    client = site.login("alice")
    for path in ("/", "/ui/search?q=deploy", "/ui/projects", "/ui/proposals", "/ui/login"):
        response = client.get(path)
        csp = response.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "default-src 'none'" in csp and "unsafe-inline" not in csp, path
        assert response.headers["x-frame-options"] == "DENY"
        assert "<script>" not in response.text and " onclick=" not in response.text


def test_a_post_without_the_csrf_token_is_refused(site: Site) -> None:
    client = site.login("alice")
    assert client.post("/ui/logout", data={}).status_code == 403
    assert client.post("/ui/logout", data={"csrf": "forged"}).status_code == 403
    refused = client.post("/ui/proposals/old.md/accept", data={})
    assert refused.status_code == 403
    assert 'status: "open"' in (site.home / "proposals" / "old.md").read_text(encoding="utf-8")
    assert client.get("/").status_code == 200  # still logged in
    other = site.login("alice")  # another session's token does not work here either
    token = csrf_of(other.get("/").text)
    assert client.post("/ui/logout", data={"csrf": token}).status_code == 403


def test_logout_ends_the_session(site: Site) -> None:
    client = site.login("bob")
    page = client.get("/")
    out = client.post("/ui/logout", data={"csrf": csrf_of(page.text)})
    assert out.status_code == 303
    assert client.get("/").status_code == 303


def test_a_forged_cookie_is_no_session(site: Site) -> None:
    client = site.browser()
    client.cookies.set("memhub_session", "abc.def")
    assert client.get("/").status_code == 303


def test_a_revoked_key_ends_the_session_at_once(tmp_path: Path, backend: Backend) -> None:
    import subprocess

    from tests.helpers import MEMHUB
    from tests.http.dashboard_site import create_key

    db = backend.url(tmp_path, "m.db")
    key = create_key(db, "carol", "--admin")
    with http_server(db, "--auth", "apikey") as base:
        site = Site(base, tmp_path, db, {"carol": key})
        client = site.login("carol")
        assert client.get("/").status_code == 200
        subprocess.run([MEMHUB, "--db", str(db), "apikey", "revoke", "carol"], check=True, timeout=30)
        assert client.get("/").status_code == 303


def test_refused_logins_spend_the_client_ip_budget(tmp_path: Path, backend: Backend) -> None:
    from tests.http.dashboard_site import create_key

    db = backend.url(tmp_path, "m.db")
    key = create_key(db, "carol")
    with http_server(db, "--auth", "apikey", env={"MEMHUB_RATE_LIMIT_IP_READ": "3"}) as base:
        site = Site(base, tmp_path, db, {"carol": key})
        client = site.browser()
        token = csrf_of(client.get("/ui/login").text)
        codes = [
            client.post("/ui/login", data={"csrf": token, "credential": f"mh_guess{i}"}).status_code
            for i in range(5)
        ]
        assert codes[:2] == [401, 401] and 429 in codes, codes
        limited = client.post("/ui/login", data={"csrf": token, "credential": key})
        assert limited.status_code == 429 and int(limited.headers["retry-after"]) >= 1


def test_loopback_without_auth_is_the_local_user(tmp_path: Path, backend: Backend) -> None:
    db = backend.url(tmp_path, "m.db")
    with http_server(db) as base:
        client = Site(base, tmp_path, db, {}).browser()
        page = client.get("/")
        assert page.status_code == 200 and "alice" in page.text and "Log out" not in page.text
        assert client.get("/ui/login").status_code == 303
        assert client.post("/ui/logout", data={}).status_code == 403  # CSRF still applies
        assert client.get("/mcp").status_code != 200  # the API is where it was


# -- what each person sees --------------------------------------------------------------------------


def test_hostile_text_is_escaped(site: Site) -> None:
    client = site.login("alice")
    page = client.get("/ui/search", params={"q": "deploy pipeline checklist"})
    assert page.status_code == 200
    assert "<script>alert" not in page.text and "<img src=x" not in page.text
    assert "&lt;script&gt;alert(" in page.text and "&lt;img src=x onerror=alert(1)&gt;" in page.text
    item = int(site.ids["hostile"].split("_")[1])
    detail = client.get(f"/ui/item/{item}")
    assert (
        detail.status_code == 200
        and "<b>bold</b>" not in detail.text
        and "&lt;b&gt;bold&lt;/b&gt;" in detail.text
    )
    query = client.get("/ui/search", params={"q": '"><script>alert(2)</script>'})
    assert "<script>alert(2)" not in query.text


def test_nobody_sees_another_users_private_memory(site: Site) -> None:
    alice, bob, vic = site.login("alice"), site.login("bob"), site.login("vic")
    found = alice.get("/ui/search", params={"q": "private deploy pipeline"}).text
    ids = [i for i, _ in hits(found, "memory")]
    assert site.ids["alice_private"] in ids and site.ids["bob_private"] not in ids
    assert "bob private" not in found
    theirs = int(site.ids["bob_private"].split("_")[1])
    assert alice.get(f"/ui/item/{theirs}").status_code == 404  # an admin does not read others' memories
    assert bob.get(f"/ui/item/{theirs}").status_code == 200
    mine = int(site.ids["alice_private"].split("_")[1])
    for client in (bob, vic):
        assert client.get(f"/ui/item/{mine}").status_code == 404
        assert "alice private" not in client.get("/ui/search", params={"q": "private deploy pipeline"}).text


def test_a_non_admin_sees_no_admin_page(site: Site) -> None:
    for who in ("bob", "vic"):
        client = site.login(who)
        page = client.get("/")
        assert "/ui/proposals" not in page.text
        for path in ("/ui/proposals", "/ui/admin", "/ui/audit", "/ui/policies"):
            assert client.get(path).status_code == 403, path
        assert (
            client.post("/ui/admin/keys", data={"csrf": csrf_of(page.text), "name": "mallory"}).status_code
            == 403
        )
        assert client.post("/ui/audit/verify", data={"csrf": csrf_of(page.text)}).status_code == 403
        refused = client.post("/ui/proposals/old.md/accept", data={"csrf": csrf_of(page.text)})
        assert refused.status_code == 403
    assert 'status: "open"' in (site.home / "proposals" / "old.md").read_text(encoding="utf-8")


def test_a_viewer_walks_the_topic_tree_others_cannot(site: Site) -> None:
    vic, bob = site.login("vic"), site.login("bob")
    pid, root, child, leaf = (site.ids[k] for k in ("project", "root", "child", "leaf"))
    assert "atlas" in vic.get("/ui/projects").text
    project = vic.get(f"/ui/projects/{pid}").text
    assert f"/ui/projects/{pid}/topics/{root}" in project
    tree = vic.get(f"/ui/projects/{pid}/topics/{root}").text
    assert "Database" in tree and "インデックス設計" in tree
    database = vic.get(f"/ui/projects/{pid}/topics/{child}").text
    assert "We compared MySQL and PostgreSQL" in database and "PostgreSQL" in database
    assert vic.get(f"/ui/projects/{pid}/topics/{leaf}").status_code == 200
    assert "atlas" not in bob.get("/ui/projects").text
    assert bob.get(f"/ui/projects/{pid}").status_code == 404
    assert bob.get(f"/ui/projects/{pid}/topics/{root}").status_code == 404


# -- search explanations equal the tools' results ------------------------------------------------


def test_memory_hits_and_their_explanations_equal_the_search_tool(site: Site) -> None:
    query = "deploy pipeline"
    tool = site.call("alice", "search", type="semantic", query=query)["memories"]
    page = site.login("alice").get("/ui/search", params={"q": query}).text
    shown = hits(page, "memory") + hits(page, "vault note")
    expected = [(m["id"], m["score"]) for m in tool]
    assert sorted(shown, key=lambda h: -h[1]) == sorted(expected, key=lambda h: -h[1])
    assert [i for i, _ in hits(page, "memory")] == [m["id"] for m in tool if m["id"].startswith("mem_")]
    for memory in tool:
        final = float(explained(page, memory["id"], "final"))
        assert round(final, 4) == pytest.approx(memory["score"], abs=1e-4)
        bm25 = explained(page, memory["id"], "bm25")
        assert bm25 != "no keyword hit"  # text only (embedder none): every hit is a keyword hit
        assert float(explained(page, memory["id"], "coverage")) > 0


def test_decision_hits_equal_search_decisions(site: Site) -> None:
    query = "database pipeline"
    tool = site.call("alice", "search_decisions", query=query, limit=10)["results"]
    page = site.login("alice").get("/ui/search", params={"q": query}).text
    shown = hits(page, "decision")
    assert [i for i, _ in shown] == [r["id"] for r in tool]
    for (public, score), result in zip(shown, tool, strict=True):
        assert score == pytest.approx(result["score"], abs=1e-6)
        assert float(explained(page, public, "final")) == pytest.approx(result["score"], abs=1e-6)
        assert explained(page, public, "status") == result["status"]


def test_claim_hits_equal_pce_search(site: Site) -> None:
    query = "deploy pipeline registry"
    tool = site.call("alice", "pce.memory.search", query=query, top_k=10)["data"]["items"]
    page = site.login("alice").get("/ui/search", params={"q": query}).text
    shown = hits(page, "claim")
    assert [i for i, _ in shown] == [item["claim"]["id"] for item in tool]
    for (public, score), item in zip(shown, tool, strict=True):
        # recency decays with the seconds between the two searches: equal to 1e-6
        assert score == pytest.approx(item["score"], abs=1e-6)
        assert float(explained(page, public, "final")) == pytest.approx(item["score"], abs=1e-6)


def test_filters_are_reported_as_counts_only(site: Site) -> None:
    page = site.login("bob").get("/ui/search", params={"q": "private deploy pipeline"}).text
    assert "alice private" not in page
    assert re.search(r"filters removed:", page) is None or "counts only" in page


# -- records, decisions, proposals ---------------------------------------------------------------


def test_a_decision_shows_its_supersede_timeline(site: Site) -> None:
    client = site.login("alice")
    new = int(site.ids["dec_new"].split("_")[1])
    page = client.get(f"/ui/item/{new}").text
    old = int(site.ids["dec_old"].split("_")[1])
    assert f"/ui/item/{old}" in page and "superseded" in page and "active" in page
    assert page.index(f"dec_{old}<") < page.index(f"dec_{new}<")  # oldest first
    assert "[via MCP]" in page  # recorded by an agent


def test_a_proposal_is_accepted_after_its_window_as_a_persons_decision(site: Site) -> None:
    client = site.login("alice")
    queue = client.get("/ui/proposals")
    assert queue.status_code == 200
    assert "fresh.md" in queue.text and "of review left" in queue.text
    token = csrf_of(queue.text)
    early = client.post("/ui/proposals/fresh.md/accept", data={"csrf": token})
    assert early.status_code == 403 and "review window" in early.text and "left" in early.text
    assert 'status: "open"' in (site.home / "proposals" / "fresh.md").read_text(encoding="utf-8")
    done = client.post("/ui/proposals/old.md/accept", data={"csrf": token})
    assert done.status_code == 303, done.text
    text = (site.home / "proposals" / "old.md").read_text(encoding="utf-8")
    assert 'status: "accepted"' in text and 'decided_by: "alice"' in text
    accepted = re.search(r'accepted_decision: "dec_(\d+)"', text)
    assert accepted
    page = client.get(f"/ui/item/{accepted.group(1)}").text
    assert "a person (dashboard)" in page and "Use PostgreSQL 17" in page
    timeline = page[page.index('class="timeline"') :]
    assert "Use PostgreSQL 17" in timeline and "[via MCP]" in timeline  # the agent's older one keeps its mark
    latest = timeline[timeline.index("Use PostgreSQL 17") - 400 : timeline.index("Use PostgreSQL 17")]
    assert "[via MCP]" not in latest.split("<li")[-1]
    again = client.post("/ui/proposals/old.md/accept", data={"csrf": token})
    assert again.status_code == 409
    rejected = client.post("/ui/proposals/fresh.md/reject", data={"csrf": token, "reason": "not now"})
    assert rejected.status_code == 303
    assert 'status: "rejected"' in (site.home / "proposals" / "fresh.md").read_text(encoding="utf-8")


# -- vault ----------------------------------------------------------------------------------------


def test_the_vault_tree_and_a_hostile_note(site: Site) -> None:
    client = site.login("alice")
    root = client.get("/ui/vault")
    assert root.status_code == 200 and "guides/" in root.text and "index.md" in root.text
    folder = client.get("/ui/vault", params={"dir": "guides"})
    assert "guides/hostile.md" in folder.text
    note = client.get("/ui/vault/note", params={"path": "guides/hostile.md"})
    assert note.status_code == 200
    assert (
        "<script>alert" not in note.text
        and "<iframe" not in note.text
        and "onerror=alert(1)>" not in note.text
    )
    assert "&lt;script&gt;" in note.text and 'href="/ui/vault/note?path=index.md"' in note.text
    index = client.get("/ui/vault/note", params={"path": "index.md"})
    assert "<h1>索引</h1>" in index.text and 'href="/ui/vault/note?path=guides%2Fhostile.md"' in index.text
    assert client.get("/ui/vault/note", params={"path": "../m.db"}).status_code in (400, 403, 404)


def test_the_vault_is_its_owners_alone(site: Site) -> None:
    bob = site.login("bob")
    assert bob.get("/ui/vault").status_code == 403
    assert bob.get("/ui/vault/note", params={"path": "index.md"}).status_code == 403


# -- admin ------------------------------------------------------------------------------------------


def test_an_admin_creates_a_key_shown_once_and_revokes_it(site: Site) -> None:
    client = site.login("alice")
    token = csrf_of(client.get("/ui/admin").text)
    created = client.post("/ui/admin/keys", data={"csrf": token, "name": "dora"})
    assert created.status_code == 200 and created.headers["cache-control"] == "no-store"
    key = re.search(r'<code id="new-key">(mh_[^<]+)</code>', created.text)
    assert key
    again = client.get("/ui/admin").text
    assert key.group(1) not in again and 'data-user="dora"' in again
    site.keys["dora"] = key.group(1)
    dora = site.login("dora")
    assert dora.get("/").status_code == 200
    assert client.post("/ui/admin/keys/dora/revoke", data={"csrf": token}).status_code == 303
    assert dora.get("/").status_code == 303  # the session ended with the key
    form = site.browser()
    page = form.get("/ui/login")
    assert (
        form.post("/ui/login", data={"csrf": csrf_of(page.text), "credential": key.group(1)}).status_code
        == 401
    )
    assert client.post("/ui/admin/keys", data={"csrf": token, "name": "<bad name>"}).status_code == 400


def test_the_audit_log_filters_and_verifies_its_chain(site: Site) -> None:
    client = site.login("alice")
    page = client.get("/ui/audit", params={"tool": "record_decision"})
    assert page.status_code == 200 and "record_decision" in page.text and "add-project" not in page.text
    bob = client.get("/ui/audit", params={"who": "bob"}).text
    assert "<td>bob</td>" in bob and "<td>alice</td>" not in bob
    verified = client.post("/ui/audit/verify", data={"csrf": csrf_of(page.text)})
    assert verified.status_code == 200 and "chain intact" in verified.text


def test_policy_versions_are_listed(site: Site) -> None:
    page = site.login("alice").get("/ui/policies")
    assert page.status_code == 200 and ("in force" in page.text or "No policy has been applied" in page.text)


def test_visualize_pictures_are_svg_images_of_what_one_sees(site: Site) -> None:
    client = site.login("alice")
    for kind in ("category_chart", "timeline", "domain_graph"):
        picture = client.get(f"/ui/picture/{kind}.svg")
        assert picture.status_code == 200 and picture.headers["content-type"].startswith("image/svg+xml")
        assert picture.text.startswith("<svg") and "Noto Sans CJK JP" in picture.text
    memory_map = client.get("/ui/picture/memory_map.svg", params={"center": site.ids["hostile"]})
    assert memory_map.status_code == 200 and "<script>" not in memory_map.text
    assert client.get("/ui/picture/nope.svg").status_code == 400
    bob = site.login("bob")
    assert (
        bob.get("/ui/picture/memory_map.svg", params={"center": site.ids["alice_private"]}).status_code == 404
    )


def test_bad_parameters_are_plain_refusals(site: Site) -> None:
    client = site.login("alice")
    assert client.get("/ui/picture/memory_map.svg", params={"center": "x" * 5000}).status_code == 400
    odd = client.get("/ui/search", params={"q": "deploy\x00pipeline"})
    assert odd.status_code == 200 and "Traceback" not in odd.text
    assert client.get("/ui/search", params={"q": "x" * 600}).status_code == 400
    assert client.get("/ui/item/999999").status_code == 404
    assert client.get("/ui/projects/999999").status_code == 404
    assert client.get("/ui/proposals/x.md/accept").status_code == 405


def test_an_items_history_comes_from_the_audit_log_for_its_readers_only(site: Site) -> None:
    """Memory, claim and decision pages list the audit events naming the item (newest first,
    paged by event id, no detail shown); an item one may not read has no history to show."""
    alice, bob = site.login("alice"), site.login("bob")
    mine = int(site.ids["alice_private"].split("_")[1])
    page = alice.get(f"/ui/item/{mine}").text
    history = page[page.index("<h2>History</h2>") :]
    assert re.search(r"<td>alice</td><td>memory</td><td>ok</td>", history), history
    assert "memory_id" not in history  # the event's detail is not shown
    assert bob.get(f"/ui/item/{mine}").status_code == 404
    assert "History" not in bob.get(f"/ui/item/{mine}").text
    claim = int(str(site.ids["claim"]).split("_")[1])
    claim_page = alice.get(f"/ui/item/{claim}").text
    assert re.search(r"<td>alice</td><td>pce\.memory\.upsert</td><td>ok</td>", claim_page)
    old = int(site.ids["dec_old"].split("_")[1])
    decision = alice.get(f"/ui/item/{old}").text
    for tool in ("record_decision", "supersede_decision"):  # recorded, then replaced
        assert f"<td>{tool}</td>" in decision
    newest = [int(n) for n in re.findall(r"<tr><td class=\"num\">(\d+)</td>", decision)]
    assert newest == sorted(newest, reverse=True) and len(newest) == 2
    older = alice.get(f"/ui/item/{old}", params={"history_before": newest[0]}).text
    assert "<td>supersede_decision</td>" not in older and "<td>record_decision</td>" in older


def test_a_notes_coverage_is_the_vault_tools_last_result(site: Site) -> None:
    """The note page shows the coverage `vault_coverage` computed and audited for it (the
    newest, by its caller), and says when none was computed."""
    client = site.login("alice")
    none = client.get("/ui/vault/note", params={"path": "index.md"}).text
    assert "no coverage computed for this note" in none
    result = site.call(
        "alice", "vault_coverage", path="index.md", cited_ranges=[{"start_line": 1, "end_line": 1}]
    )
    shown = client.get("/ui/vault/note", params={"path": "index.md"}).text
    ratio = round(result["coverage_ratio"] * 100, 1)
    assert f"<strong>{ratio}%</strong>" in shown and "covered: L1–L1" in shown
    first, *_ = result["uncovered_ranges"]
    assert f"not covered: L{first['start_line']}–L{first['end_line']}" in shown
    other = client.get("/ui/vault/note", params={"path": "guides/hostile.md"}).text
    assert "no coverage computed for this note" in other  # another note's coverage is not this one's


def test_a_csp_violation_report_is_counted_never_kept(site: Site) -> None:
    """Every page's policy names /ui/csp-report; a report posted there (no session needed, as
    a browser sends it) is answered 204 and counted in /metrics, its content dropped."""
    page = site.login("alice").get("/ui/search")
    assert "report-uri /ui/csp-report" in page.headers["content-security-policy"]

    def reported() -> int:
        text = site.browser().get("/metrics", headers={"X-API-Key": site.keys["alice"]}).text
        found = re.search(r"^memhub_csp_reports_total (\d+)", text, re.M)
        assert found, text
        return int(found.group(1))

    before = reported()
    body = '{"csp-report": {"blocked-uri": "inline", "script-sample": "SECRET-SAMPLE"}}'
    answer = site.browser().post(
        "/ui/csp-report", content=body, headers={"content-type": "application/csp-report"}
    )
    assert answer.status_code == 204 and answer.text == ""
    assert reported() == before + 1
    assert site.browser().get("/ui/csp-report").status_code == 405  # reports are posted

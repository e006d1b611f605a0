"""What a crafted URL or a plain member gets from the dashboard: a refusal, never a 500, and no
store-wide figure or count of other principals' items."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.http.dashboard_site import Site, dashboard_site
from tests.store.backends import Backend, rows, selected


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory, backend: Backend) -> Iterator[Site]:
    with dashboard_site(tmp_path_factory.mktemp("dash-refusals"), backend) as built:
        yield built


@pytest.mark.parametrize(
    "path",
    [
        "/ui/item/99999999999999999999",
        "/ui/item/1?history_before=²",
        "/ui/item/1?history_before=99999999999999999999999",
        "/ui/audit?before=99999999999999999999999",
        "/ui/audit?before=²",
        "/ui/vault/note?path=" + "a" * 5000,
        "/ui/vault?dir=" + "a" * 5000,
    ],
)
def test_crafted_numbers_and_paths_are_refused_not_failed(site: Site, path: str) -> None:
    response = site.login("alice").get(path)
    assert response.status_code < 500, (path, response.status_code)
    assert "Traceback" not in response.text and str(site.home) not in response.text


def test_store_wide_figures_are_for_admins(site: Site) -> None:
    admin = site.login("alice").get("/")
    member = site.login("bob").get("/")
    assert admin.status_code == member.status_code == 200
    assert "vectors indexed" in admin.text and "store size" in admin.text
    assert "vectors indexed" not in member.text and "store size" not in member.text


def test_search_never_counts_items_the_reader_may_not_see(site: Site) -> None:
    page = site.login("bob").get("/ui/search", params={"q": "alice private deploy pipeline"})
    assert page.status_code == 200
    assert "not visible to you" not in page.text


def test_a_claim_page_masks_secrets_and_pii_of_a_claim_stored_before_the_detectors(site: Site) -> None:
    """A public claim written before upsert refused such text (made here by editing its row)."""
    claim = int(str(site.ids["claim"]).split("_", 1)[1])
    secret, mail = "AKIAIOSFODNN7EXAMPLE", "taro@example.co.jp"
    before = rows(site.db, "SELECT body FROM items WHERE id = ?", [claim])[0][0]
    selected().execute(
        str(site.db),
        "UPDATE items SET body = ? WHERE id = ?",
        [f"本番のキーは{secret}です、メールは{mail}まで", claim],
    )
    try:
        page = site.login("alice").get(f"/ui/item/{claim}")
        assert page.status_code == 200
        assert secret not in page.text and mail not in page.text and "[REDACTED:" in page.text
    finally:
        selected().execute(str(site.db), "UPDATE items SET body = ? WHERE id = ?", [before, claim])

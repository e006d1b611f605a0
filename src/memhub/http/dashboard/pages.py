"""The dashboard's pages: each reads through the services as the logged-in principal."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
from markupsafe import Markup
from pydantic import BaseModel, ValidationError
from starlette.responses import RedirectResponse, Response

from memhub.core.errors import invalid
from memhub.http.dashboard import markdown
from memhub.services.assoc import models as assoc_models
from memhub.services.assoc import visualize as assoc_visualize
from memhub.services.dashboard import admin, details, finder
from memhub.services.dashboard.overview import OverviewCache, engine_state
from memhub.services.decisions import proposals
from memhub.services.decisions.config import DecisionsConfig
from memhub.services.runtime import Call
from memhub.services.vault import models as vault_models
from memhub.services.vault import reading as vault_reading
from memhub.store.base import Tx

if TYPE_CHECKING:
    from memhub.http.dashboard.app import Context, Dashboard

T = TypeVar("T")
MAX_DIGITS = 18  # an id the store can hold (SQLite integers are 64-bit)


def _event_id(text: str) -> int | None:
    """A `before` cursor from a query string: ASCII digits only (`²`.isdigit() is True)."""
    return int(text) if re.fullmatch(rf"[0-9]{{1,{MAX_DIGITS}}}", text) else None


M = TypeVar("M", bound=BaseModel)


def _vault_input(model: type[M], **values: Any) -> M:
    """A vault tool's input from the URL, refused as the tool refuses it (not a 500)."""
    try:
        return model(**values)
    except ValidationError as exc:
        raise invalid(f"not a vault path the tools accept ({exc.errors()[0]['msg']})") from None


def _path_id(c: Context, name: str) -> int:
    """An id from the URL's path, refused (not a 500) when it cannot name a row."""
    text = str(c.request.path_params[name])
    if not re.fullmatch(rf"[0-9]{{1,{MAX_DIGITS}}}", text):
        raise invalid(f"{name} must be a number of at most {MAX_DIGITS} digits")
    return int(text)


MAX_QUERY = 500
PICTURES = ("domain_graph", "timeline", "category_chart", "memory_map", "stats_dashboard")
HIDDEN = {
    "text_by_boundary": "keyword hits of a boundary class you may not see",
    "vector_by_boundary": "nearest neighbours of a boundary class you may not see",
}


def number(value: Any, digits: int = 4) -> str:
    """A score as people read it: 4 decimals, no trailing noise."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if not math.isfinite(value):
        return str(value)
    return f"{value:.{digits}f}"


def size(value: int | None) -> str:
    if value is None:
        return "n/a"
    amount = float(value)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if amount < 1024 or unit == "GiB":
            return f"{amount:.0f} {unit}" if unit == "B" else f"{amount:.1f} {unit}"
        amount /= 1024
    return f"{value} B"


def duration(seconds: float) -> str:
    minutes, secs = divmod(max(0, math.ceil(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    parts = [f"{n} {unit}" for n, unit in ((hours, "h"), (minutes, "min"), (secs, "s")) if n]
    return " ".join(parts) or "0 s"


class Caches:
    def __init__(self) -> None:
        self.overview = OverviewCache()


class Pages:
    def __init__(self, dash: Dashboard) -> None:
        self.dash = dash

    @staticmethod
    async def _read(c: Context, tool: str, fn: Callable[[Tx, Call], T]) -> T:
        """`fn` in a read transaction, audited like a read tool call (deferred)."""
        call = c.call(f"dashboard.{tool}", read_only=True)
        result = await call.read(lambda tx: fn(tx, call))
        await call.record("ok")
        return result

    async def overview(self, c: Context) -> Response:
        counts = await anyio.to_thread.run_sync(self.dash.caches.overview.counts, c.runtime, c.principal)
        return c.render("overview.html", counts=counts, engine=engine_state(c.runtime))

    async def search(self, c: Context) -> Response:
        query = c.request.query_params.get("q", "").strip()
        if len(query) > MAX_QUERY:
            raise invalid(f"the query is longer than {MAX_QUERY} characters")
        found = await finder.search_all(c.runtime, c.principal, query, c.dash.states) if query else None
        return c.render("search.html", query=query, found=found, groups=finder.GROUPS, hidden_labels=HIDDEN)

    async def item(self, c: Context) -> Response:
        item_id = _path_id(c, "item_id")
        before = c.request.query_params.get("history_before", "")
        older = _event_id(before)

        def read(tx: Tx, call: Call) -> tuple[details.Item, details.History]:
            return details.item(tx, c.principal, item_id), details.history(tx, c.principal, item_id, older)

        shown, history = await self._read(c, "item", read)
        return c.render("item.html", item=shown, public_id=details.public_id(shown.row), history=history)

    async def proposals(self, c: Context) -> Response:
        queue = await self._read(c, "proposals", details.proposal_queue)
        return c.render(
            "proposals.html",
            queue=queue,
            window=c.state_of(DecisionsConfig).review_window_s,
            done=c.request.query_params,
        )

    async def accept(self, c: Context) -> Response:
        name = c.request.path_params["name"]
        call = c.call("dashboard.accept_proposal")
        result = await proposals.accept(call, name)  # the tool's checks: admin, window, once
        return RedirectResponse(
            f"/ui/proposals?accepted={_safe(result.message or 'accepted')}", status_code=303
        )

    async def reject(self, c: Context) -> Response:
        name = c.request.path_params["name"]
        form = await c.request.form()
        reason = form.get("reason")
        call = c.call("dashboard.reject_proposal")
        await proposals.reject(call, name, reason if isinstance(reason, str) else "")
        return RedirectResponse(f"/ui/proposals?rejected={_safe(name)}", status_code=303)

    async def projects(self, c: Context) -> Response:
        rows = await self._read(c, "projects", lambda tx, call: details.projects(tx, c.principal))
        return c.render("projects.html", projects=rows)

    async def project(self, c: Context) -> Response:
        pid = _path_id(c, "project_id")
        project, topics = await self._read(
            c, "project", lambda tx, call: details.topics(tx, c.principal, pid)
        )
        return c.render("project.html", project=project, topics=topics)

    async def vault(self, c: Context) -> Response:
        folder = c.request.query_params.get("dir") or None
        call = c.call("dashboard.vault_ls", read_only=True)
        listed = await vault_reading.vault_ls(call, _vault_input(vault_models.LsInput, relative_dir=folder))
        return c.render(
            "vault.html", folder=folder or "", entries=listed.entries, parent=_parent(folder or "")
        )

    async def note(self, c: Context) -> Response:
        path = c.request.query_params.get("path", "")
        call = c.call("dashboard.vault_read", read_only=True)
        read = await vault_reading.vault_read(
            call, _vault_input(vault_models.ReadInput, path=path, full=True)
        )
        shown = Markup(markdown.render(read.text, _parent(path)))
        rel = str(call.detail.get("path", path))  # the note's path as the vault tools name it
        coverage = await self._read(
            c, "vault_coverage_shown", lambda tx, _: details.note_coverage(tx, c.principal, rel)
        )
        return c.render(
            "note.html",
            path=path,
            html=shown,
            truncated=read.truncated,
            parent=_parent(path),
            coverage=coverage,
        )

    async def picture(self, c: Context) -> Response:
        """A `visualize` rendering as an SVG image (the tool's own code and visibility)."""
        kind = c.request.path_params["kind"]
        if kind not in PICTURES:
            raise invalid(f"unknown picture {kind!r}")
        center = c.request.query_params.get("center")
        try:
            args = assoc_models.VisualizeInput.model_validate(
                {"type": kind, "format": "svg", **({"center_memory_id": center} if center else {})}
            )
        except ValidationError:
            raise invalid("center must be a memory id such as mem_12") from None
        call = c.call("dashboard.visualize", read_only=True)
        out = await assoc_visualize.visualize(call, args)
        await call.record("ok")
        return Response(out.content, media_type="image/svg+xml")

    # -- admin ------------------------------------------------------------------------------------

    async def admin(self, c: Context, created: tuple[str, str] | None = None) -> Response:
        people = await self._read(c, "admin", admin.people)
        projects = await self._read(c, "members", admin.members)
        return c.render("admin.html", people=people, projects=projects, created=created)

    async def create_key(self, c: Context) -> Response:
        form = await c.request.form()
        name = str(form.get("name") or "").strip()
        call = c.call("dashboard.apikey_create")
        key = await call.transact(lambda tx: admin.create_key(tx, call, name, form.get("admin") == "on"))
        return await self.admin(c, created=(name, key))  # shown once, in this answer only

    async def revoke_key(self, c: Context) -> Response:
        name = c.request.path_params["name"]
        call = c.call("dashboard.apikey_revoke")
        await call.transact(lambda tx: admin.revoke_key(tx, call, name))
        return RedirectResponse("/ui/admin", status_code=303)

    async def audit(self, c: Context, report: Any = None) -> Response:
        q = c.request.query_params
        before = q.get("before", "")
        call = c.call("dashboard.audit", read_only=True)
        filters = {
            "who": q.get("who", "")[:200],
            "tool": q.get("tool", "")[:200],
            "outcome": q.get("outcome", "")[:50],
        }
        page = await c.runtime.in_thread(
            lambda: admin.audit(c.runtime, call, before=_event_id(before), **filters)
        )
        await call.record("ok")
        return c.render("audit.html", page=page, filters=filters, report=report)

    async def verify(self, c: Context) -> Response:
        call = c.call("dashboard.audit_verify", read_only=True)
        report = await c.runtime.in_thread(lambda: admin.verify(c.runtime, call))
        await call.record("ok")
        return await self.audit(c, report)

    async def policies(self, c: Context) -> Response:
        rows = await self._read(c, "policies", admin.policies)
        return c.render("policies.html", policies=rows)

    async def topic(self, c: Context) -> Response:
        pid, tid = _path_id(c, "project_id"), _path_id(c, "topic_id")
        page = await self._read(c, "topic", lambda tx, call: details.topic(tx, c.principal, pid, tid))
        return c.render("topic.html", page=page)


def _parent(path: str) -> str:
    return path.rsplit("/", 1)[0] if "/" in path else ""


def _safe(text: str) -> str:
    from urllib.parse import quote

    return quote(text[:300], safe="")

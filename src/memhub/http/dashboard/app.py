"""The web dashboard: server-rendered pages at `/` and `/ui/…` on the listener serving `/mcp`.

`with_dashboard(api, …)` puts the dashboard in front of a listener's guarded API app: `/` and
`/ui…` go to the dashboard (itself behind the same guard for Host, Origin, body size and the
client IP's limits, with the guard's credential check left to the login form), everything
else to the API as before. What a page shows comes from the services (services/dashboard/),
through the caller's principal, so a person sees exactly what their key may see.

Security: a login form takes an API key or a JWT by POST (never in a URL) and checks it with
the API's own authenticator; the session lives in this process behind a signed, HttpOnly,
SameSite=Strict cookie (Secure under TLS); every POST needs the session's CSRF token; the guard
spends the client IP's read for every request, a page the principal's bucket of its class
(pages: read, forms: write, accepting a proposal: admin) and a form the IP's of its class;
refused logins are audited as `http.auth` like refused API calls; every
response carries a strict Content-Security-Policy (no inline script) and templates escape
everything (Jinja2 autoescape).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

import anyio
import jwt
from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memhub.auth.identity import key_hash
from memhub.auth.tokens import looks_like_jwt
from memhub.core.errors import ErrorKind, MemhubError
from memhub.core.models import GlobalRole, Principal
from memhub.http.dashboard import pages
from memhub.http.dashboard.sessions import COOKIE, Session, Sessions
from memhub.http.guard import GuardMiddleware, GuardPolicy
from memhub.http.metrics import Metrics
from memhub.services.ratelimit import Verdict
from memhub.services.runtime import Call, Runtime

S = TypeVar("S")
# a page tool's toolset, by its name: its calls get that toolset's state
TOOLSET_OF = {"dashboard.vault_": "vault", "dashboard.accept_proposal": "decisions",
              "dashboard.reject_proposal": "decisions", "dashboard.proposals": "decisions"}  # fmt: skip

log = logging.getLogger(__name__)
HERE = Path(__file__).parent
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "font-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; "
    "report-uri /ui/csp-report"
)
SECURITY_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"same-origin"),  # no-referrer would make form posts Origin: null
    (b"cache-control", b"no-store"),
]
STATUS = {
    ErrorKind.INVALID: 400,
    ErrorKind.NOT_FOUND: 404,
    ErrorKind.FORBIDDEN: 403,
    ErrorKind.CONFLICT: 409,
    ErrorKind.RATE_LIMITED: 429,
    ErrorKind.UNAVAILABLE: 503,
    ErrorKind.TIMEOUT: 504,
}


def is_dashboard_path(path: str) -> bool:
    return path == "/" or path == "/ui" or path.startswith("/ui/")


@dataclass
class Context:
    """What a page handler gets: the request, the runtime, the caller and its session."""

    request: Request
    runtime: Runtime
    principal: Principal
    session: Session
    admin: bool
    dash: Dashboard

    def render(self, template: str, status: int = 200, **values: Any) -> HTMLResponse:
        return self.dash.render(self.request, template, status, session=self.session, me=self, **values)

    def call(self, tool: str, **options: Any) -> Call:
        """A call of the page's tool with its toolset's state (`dashboard.vault_read`: vault's)."""
        toolset = next((t for prefix, t in TOOLSET_OF.items() if tool.startswith(prefix)), "")
        return Call(self.runtime, self.principal, tool, state=self.dash.states.get(toolset), **options)

    def state_of(self, kind: type[S]) -> S:
        """A toolset's state by its type (a page showing the decisions review window, say)."""
        return next(s for s in self.dash.states.values() if isinstance(s, kind))


Handler = Callable[[Context], Awaitable[Response]]


class Dashboard:
    def __init__(
        self,
        runtime: Runtime,
        policy: GuardPolicy,
        *,
        secure: bool = False,
        states: Mapping[str, object] | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self.runtime = runtime
        self.metrics = metrics or Metrics()  # where CSP violation reports are counted
        self.states = dict(states or {})  # toolset name -> its state (`Toolset.state`)
        self.policy = policy
        self.secure = secure
        self.sessions = Sessions()
        self.env = Environment(
            loader=FileSystemLoader(HERE / "templates"),
            autoescape=select_autoescape(default=True, default_for_string=True),
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.env.filters["num"] = pages.number
        self.env.filters["size"] = pages.size
        self.env.filters["duration"] = pages.duration
        self.caches = pages.Caches()

    # -- plumbing ------------------------------------------------------------------------------

    def render(self, request: Request, template: str, status: int = 200, **values: Any) -> HTMLResponse:
        session = values.pop("session", None)
        html = self.env.get_template(template).render(
            csrf=session.csrf if session is not None else "",
            auth_none=self.policy.authenticate is None,
            here=request.url.path,
            **values,
        )
        response = HTMLResponse(html, status_code=status)
        if session is not None:
            self._set_cookie(response, session)
        return response

    def _set_cookie(self, response: Response, session: Session) -> None:
        response.set_cookie(
            COOKIE,
            self.sessions.cookie(session),
            httponly=True,
            samesite="strict",
            secure=self.secure,
            path="/",
        )

    def _client(self, request: Request) -> str:
        return request.client.host if request.client else "unknown"

    async def _limited(self, request: Request, principal: str | None, tool_class: str) -> Verdict | None:
        """Spend one call of `tool_class` from the principal's bucket, and from the client IP's
        for a write or admin form (the guard in front has spent the IP's read already, as it
        does for every request that is not a tool call)."""
        refused: Verdict | None = None
        checks: list[tuple[Any, str]] = []
        if tool_class != "read":
            checks.append((self.policy.ip_limiter, f"ip:{self._client(request)}"))
        if principal is not None:
            checks.append((self.policy.principal_limiter, principal))
        for limiter, key in checks:
            if limiter is None:
                continue
            verdict = await limiter.take_async(key, tool_class)
            if not verdict.allowed and (refused is None or verdict.retry_after_s > refused.retry_after_s):
                refused = verdict
        return refused

    def _too_many(self, request: Request, verdict: Verdict, session: Session | None) -> HTMLResponse:
        wait = max(1, math.ceil(verdict.retry_after_s))
        response = self.render(
            request, "error.html", 429, session=session, me=None, title="Too many requests",
            message=f"rate limit reached ({verdict.limit} per minute); retry after {wait} s",
        )  # fmt: skip
        response.headers["Retry-After"] = str(wait)
        return response

    async def _principal(self, session: Session) -> Principal | None:
        """Who the session is, checked against the store (a revoked key or a deleted principal
        ends the session); `auth none`: the local user."""
        local = self.policy.local
        if self.policy.authenticate is None:
            if local is None:
                return None
            name, row = local.id, None
        else:
            if session.principal is None:
                return None
            name = session.principal

        def lookup() -> Any:
            with self.runtime.store.transaction(write=False) as tx:
                if session.key_hash is not None:
                    holder = tx.principal_by_key(session.key_hash)
                    if holder is None or holder.id != name:
                        return None
                    return holder
                return tx.get_principal(name)

        row = await anyio.to_thread.run_sync(lookup)
        if row is None:
            self.sessions.end(session)
            return None
        project = local.default_project if local is not None else None
        return Principal(id=row.id, role=GlobalRole(row.role), via="dashboard", default_project=project)

    def page(self, handler: Handler, *, tool_class: str = "read", admin: bool = False) -> Callable[..., Any]:
        """A page: session, login, CSRF (POST), rate limits, then `handler`; service errors
        become error pages in plain words."""

        async def endpoint(request: Request) -> Response:
            session = self.sessions.load(request.cookies.get(COOKIE))
            if session is None:
                session = self.sessions.start()
            principal = await self._principal(session)
            if principal is None:
                if request.method == "GET":
                    response: Response = RedirectResponse("/ui/login", status_code=303)
                    self._set_cookie(response, session)
                    return response
                return self._error(request, session, 401, "Not logged in", "log in first")
            if request.method == "POST":
                form = await request.form()
                token = form.get("csrf")
                if not session.check_csrf(token if isinstance(token, str) else None):
                    return self._error(
                        request, session, 403, "Refused", "this form has expired; reload the page"
                    )
            verdict = await self._limited(request, principal.id, tool_class)
            if verdict is not None:
                return self._too_many(request, verdict, session)
            is_admin = principal.role == GlobalRole.ADMIN
            if admin and not is_admin:
                return self._error(request, session, 403, "Admins only", "this page is for admins")
            context = Context(request, self.runtime, principal, session, is_admin, self)
            try:
                return await handler(context)
            except MemhubError as exc:
                status = STATUS.get(exc.kind, 500)
                message = exc.message if status != 500 else "the request failed"
                return self._error(request, session, status, "Cannot show this", message)

        return endpoint

    def _error(
        self, request: Request, session: Session, status: int, title: str, message: str
    ) -> HTMLResponse:
        return self.render(
            request, "error.html", status, session=session, me=None, title=title, message=message
        )

    # -- login ---------------------------------------------------------------------------------

    async def login_form(self, request: Request) -> Response:
        session = self.sessions.load(request.cookies.get(COOKIE)) or self.sessions.start()
        if self.policy.authenticate is None:
            return RedirectResponse("/", status_code=303)
        return self.render(request, "login.html", session=session, me=None, error=None)

    async def login(self, request: Request) -> Response:
        session = self.sessions.load(request.cookies.get(COOKIE))
        if session is None:
            return self.render(
                request, "login.html", 403, session=self.sessions.start(), me=None,
                error="the form had expired: try again",
            )  # fmt: skip
        form = await request.form()
        token, credential = form.get("csrf"), form.get("credential")
        if not session.check_csrf(token if isinstance(token, str) else None):
            return self.render(
                request, "login.html", 403, session=session, me=None, error="the form had expired"
            )
        authenticate = self.policy.authenticate
        if authenticate is None:
            return RedirectResponse("/", status_code=303)
        # the guard in front spent this request's read of the client IP (429 once it is empty)
        secret = credential.strip() if isinstance(credential, str) else ""
        headers: Mapping[str, str] = {"authorization": f"Bearer {secret}"} if secret else {}
        principal, reason = await anyio.to_thread.run_sync(authenticate, headers)
        if principal is None:  # this request already spent a read of the IP (the guard)
            if self.policy.audit is not None:
                detail = {"path": "/ui/login", "client": self._client(request), "reason": reason}
                await anyio.to_thread.run_sync(self.policy.audit, "unauthorized", detail)
            return self.render(request, "login.html", 401, session=session, me=None, error=reason)
        self.sessions.end(session)  # a new id after login (no session fixation)
        until = None
        if looks_like_jwt(secret):
            exp = jwt.decode(secret, options={"verify_signature": False}).get("exp")
            if isinstance(exp, int | float):
                until = time.monotonic() + (float(exp) - time.time())
        fresh = self.sessions.start(principal.id, None if looks_like_jwt(secret) else key_hash(secret), until)
        response = RedirectResponse("/", status_code=303)
        self._set_cookie(response, fresh)
        return response

    async def csp_report(self, request: Request) -> Response:
        """A browser's Content-Security-Policy violation report: counted (`/metrics`:
        `memhub_csp_reports_total`) and logged as a count; its content is read (the guard
        bounds the body) and dropped, never parsed, logged or kept. No session needed: a
        browser sends reports without one."""
        await request.body()
        self.metrics.csp_reports += 1
        log.warning(
            "a browser reported a Content-Security-Policy violation (%d since start)",
            self.metrics.csp_reports,
        )
        return Response(status_code=204)

    async def logout(self, context: Context) -> Response:
        self.sessions.end(context.session)
        response = RedirectResponse("/ui/login" if self.policy.authenticate else "/", status_code=303)
        response.delete_cookie(COOKIE, path="/")
        return response

    # -- the app -------------------------------------------------------------------------------

    def app(self) -> Starlette:
        handlers = pages.Pages(self)
        p = self.page
        routes = [
            Route("/", p(handlers.overview)),
            Route("/ui", p(handlers.overview)),
            Route("/ui/login", self.login_form, methods=["GET"]),
            Route("/ui/login", self.login, methods=["POST"]),
            Route("/ui/logout", p(self.logout, tool_class="write"), methods=["POST"]),
            Route("/ui/csp-report", self.csp_report, methods=["POST"]),
            Route("/ui/search", p(handlers.search)),
            Route("/ui/item/{item_id:int}", p(handlers.item)),
            Route("/ui/proposals", p(handlers.proposals, admin=True)),
            Route(
                "/ui/proposals/{name}/accept",
                p(handlers.accept, tool_class="admin", admin=True),
                methods=["POST"],
            ),
            Route(
                "/ui/proposals/{name}/reject",
                p(handlers.reject, tool_class="admin", admin=True),
                methods=["POST"],
            ),
            Route("/ui/projects", p(handlers.projects)),
            Route("/ui/projects/{project_id:int}", p(handlers.project)),
            Route("/ui/projects/{project_id:int}/topics/{topic_id:int}", p(handlers.topic)),
            Route("/ui/admin", p(handlers.admin, admin=True)),
            Route("/ui/admin/keys", p(handlers.create_key, tool_class="admin", admin=True), methods=["POST"]),
            Route(
                "/ui/admin/keys/{name}/revoke",
                p(handlers.revoke_key, tool_class="admin", admin=True),
                methods=["POST"],
            ),
            Route("/ui/audit", p(handlers.audit, admin=True)),
            Route("/ui/audit/verify", p(handlers.verify, tool_class="admin", admin=True), methods=["POST"]),
            Route("/ui/policies", p(handlers.policies, admin=True)),
            Route("/ui/picture/{kind}.svg", p(handlers.picture)),
            Route("/ui/vault", p(handlers.vault)),
            Route("/ui/vault/note", p(handlers.note)),
            Mount("/ui/static", app=StaticFiles(directory=HERE / "static"), name="static"),
        ]
        return Starlette(routes=routes)


class _Headers:
    """Adds the security headers to every dashboard response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *SECURITY_HEADERS]}
            await send(message)

        await self.app(scope, receive, with_headers)


class _Split:
    """`/` and `/ui…` to the dashboard, every other path to the API app."""

    def __init__(self, dashboard: ASGIApp, api: ASGIApp) -> None:
        self.dashboard, self.api = dashboard, api

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and is_dashboard_path(scope["path"]):
            await self.dashboard(scope, receive, send)
        else:
            await self.api(scope, receive, send)


def with_dashboard(
    api: ASGIApp,
    runtime: Runtime,
    policy: GuardPolicy,
    *,
    secure: bool = False,
    states: Mapping[str, object] | None = None,
    metrics: Metrics | None = None,
) -> ASGIApp:
    """`api` (a listener's guarded app) with the dashboard in front of it. The dashboard's own
    guard checks Host, Origin and body size like the API's; credentials are the login form's
    (`key_from_headers` is not consulted: a browser sends none)."""
    dashboard = Dashboard(runtime, policy, secure=secure, states=states, metrics=metrics)
    front = replace(policy, authenticate=None, local=None)
    guarded = GuardMiddleware(_Headers(dashboard.app()), front)
    return _Split(guarded, api)


__all__ = ["Dashboard", "is_dashboard_path", "with_dashboard"]

"""What every page shares: the login behind its cookie, the tenant it reads, the CSRF check of a change,
the deadline, and HTML rendered by Jinja2 with autoescape on (handoffs, transcripts and facts are hostile
text: nothing of theirs reaches a page unescaped).

A page is ``web.page(route, handler, scope=…)`` over ``async def handler(call) -> Response``. Without a
login a GET is sent to /login and anything else refused; a POST must carry the session's CSRF token.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote

import jinja2
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from memory import DatabaseLockedError, MemoryStoreError, SessionNotFoundError
from service.bodies import read_body
from service.calls import ROUTE_KEY, Service, service_of
from service.errors import ServiceError
from service.ratelimit import RateLimiter
from service.tenants import SCOPES, Scope, Tenant
from service.web.logins import COOKIE, Login, Logins, same_token
from service.web.settings import WebSettings

__all__ = ["FORM_BYTES", "Web", "WebCall", "WebError", "local_path"]

logger = logging.getLogger(__name__)

TEMPLATES = Path(__file__).parent / "templates"
FORM_BYTES = 256 * 1024


class WebError(ServiceError):
    """A page's refusal, shown as an HTML page with the status."""


@dataclass(slots=True)
class WebCall:
    request: Request
    login: Login
    tenant: Tenant
    service: Service
    web: Web
    form: dict[str, str] = field(default_factory=dict)

    def render(self, template: str, status: int = 200, **context: Any) -> HTMLResponse:
        return self.web.render(self.request, template, status=status, login=self.login, **context)

    @property
    def can_write(self) -> bool:
        return self.login.scope in ("write", "admin")


Handler = Callable[[WebCall], Awaitable[Response]]
Endpoint = Callable[[Request], Awaitable[Response]]


def local_path(target: str, default: str = "/") -> str:
    """``target`` when it is a path on this site (never ``//host`` or a scheme): no open redirect."""
    if target.startswith("/") and not target.startswith("//") and "\\" not in target and "\n" not in target:
        return target
    return default


def _fmt_usd(value: float | None) -> str:
    return "—" if value is None else f"${value:,.4f}"


def _fmt_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KB", "MB"):
        if size < 1024:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GB"


class Web:
    def __init__(self, settings: WebSettings) -> None:
        self.settings = settings
        self.logins = Logins(ttl_s=settings.session_ttl_s, max_sessions=settings.max_sessions)
        self.logins.add_one_time(settings.login_token)
        self.login_limiter = RateLimiter(settings.login_per_minute / 60, settings.login_per_minute)
        self.env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(TEMPLATES),
            autoescape=True,  # every template, whatever its name: no value goes out unescaped
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.env.filters["usd"] = _fmt_usd
        self.env.filters["size"] = _fmt_bytes
        self.env.filters["urlpart"] = lambda s: quote(str(s), safe="/")

    # -- rendering ----------------------------------------------------------------------------------

    def render(
        self, request: Request, template: str, *, status: int = 200, login: Login | None = None, **context: Any
    ) -> HTMLResponse:
        html = self.env.get_template(template).render(
            login=login,
            csrf=login.csrf if login else "",
            local=self.settings.local,
            path=request.url.path,
            **context,
        )
        return HTMLResponse(html, status_code=status)

    def error_page(self, request: Request, status: int, message: str, login: Login | None = None) -> HTMLResponse:
        return self.render(request, "error.html", status=status, login=login, status_code=status, message=message)

    # -- cookies ------------------------------------------------------------------------------------

    def set_cookie(self, request: Request, response: Response, name: str, value: str, max_age: int) -> None:
        response.set_cookie(
            name,
            value,
            max_age=max_age,
            path="/",
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
        )

    def login_of(self, request: Request) -> Login | None:
        return self.logins.get(request.cookies.get(COOKIE))

    async def live_login(self, svc: Service, request: Request) -> Login | None:
        """The request's login, when it still stands: a key login's key is checked again (revoked: ended)."""
        login = self.login_of(request)
        if login is None or login.via != "key":
            return login
        record = await svc.tenants.keys.verify(login.api_key)
        if record is None:
            self.logins.end_key(login.api_key)
            return None
        return login

    # -- forms --------------------------------------------------------------------------------------

    @staticmethod
    async def read_form(request: Request) -> dict[str, str]:
        """An ``application/x-www-form-urlencoded`` body (our forms send nothing else), under a cap."""
        kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind != "application/x-www-form-urlencoded":
            raise WebError("forms are sent as application/x-www-form-urlencoded", status=415)
        raw = await read_body(request, FORM_BYTES)
        try:
            pairs = parse_qsl(raw.decode("utf-8"), keep_blank_values=True)
        except (UnicodeDecodeError, ValueError):
            raise WebError("the form could not be read", status=400) from None
        return {k: v.replace("\x00", "") for k, v in pairs}

    # -- pages --------------------------------------------------------------------------------------

    def page(self, route: str, handler: Handler, *, scope: Scope = "read") -> Endpoint:
        """An authenticated page: login → scope → (CSRF for a change) → lease → handler, under a deadline."""

        async def run(request: Request) -> Response:
            request.scope[ROUTE_KEY] = route
            svc = service_of(request)
            change = request.method not in ("GET", "HEAD")
            login: Login | None = None
            try:
                login = await self.live_login(svc, request)
                if login is None:
                    if not change:
                        target = quote(request.url.path + (f"?{request.url.query}" if request.url.query else ""))
                        return RedirectResponse(f"/login?next={target}", status_code=303)
                    raise WebError("log in first", status=403)
                form: dict[str, str] = {}
                if change:
                    form = await self.read_form(request)
                    if not same_token(login.csrf, form.get("csrf")):
                        raise WebError(
                            "the form's security token is missing or stale: reload the page and try again",
                            status=403,
                        )
                if SCOPES.index(login.scope) < SCOPES.index(scope):
                    raise WebError(f"this login's scope is {login.scope!r}; this needs {scope!r}", status=403)
                started = time.perf_counter()
                async with asyncio.timeout(svc.settings.limits.request_timeout_s):
                    async with svc.tenants.lease(login.tenant) as tenant:
                        response = await handler(WebCall(request, login, tenant, svc, self, form))
                # The page's own time (reads and rendering), for the browser's devtools and bench/web_pages.py.
                response.headers["Server-Timing"] = f"app;dur={(time.perf_counter() - started) * 1000:.1f}"
                return response
            except TimeoutError:
                return self.error_page(request, 504, "the page took too long; try again", login)
            except ServiceError as exc:
                return self.error_page(request, exc.status, exc.message, login)
            except SessionNotFoundError as exc:
                return self.error_page(request, 404, f"no session or handoff with id {exc.session_id!r}", login)
            except DatabaseLockedError:
                return self.error_page(request, 503, "the memory is busy; try again in a moment", login)
            except MemoryStoreError as exc:
                logger.error("memory error on %s: %s", route, exc)
                return self.error_page(request, 500, "the memory store failed; the server log says why", login)
            except Exception:  # the top of a request: log it, answer without a traceback
                logger.exception("%s %s failed", request.method, route)
                return self.error_page(request, 500, "internal error; the server log says why", login)

        return run


def query(request: Request, name: str, default: str = "", limit: int = 500) -> str:
    """A query parameter, cut to ``limit`` characters, without NULs (a page never fails on a long one)."""
    value = request.query_params.get(name, default)
    return value.replace("\x00", "")[:limit]


def query_int(request: Request, name: str, default: int, lo: int, hi: int) -> int:
    try:
        value = int(request.query_params.get(name, default))
    except ValueError:
        return default
    return min(hi, max(lo, value))


def redirect(to: str, params: Mapping[str, str] | None = None) -> RedirectResponse:
    """After a change: back to a page (303, so a reload does not send the form again)."""
    target = to
    if params:
        target += "?" + "&".join(f"{k}={quote(v, safe='')}" for k, v in params.items())
    return RedirectResponse(target, status_code=303)

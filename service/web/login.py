"""Logging in and out: an API key (the service), the one-time link (``--local``), Telegram's Mini App.

Each ends in the same session cookie (HttpOnly, SameSite=Strict, Secure over HTTPS). The API-key form
carries its own CSRF token (a double-submit cookie), so no other site can log a browser into a tenant of
its choosing. Attempts are rate limited per client address.
"""

from __future__ import annotations

import secrets

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from service.calls import ROUTE_KEY, service_of
from service.errors import ServiceError
from service.ratelimit import RateLimiter
from service.web.core import Web, WebError, local_path
from service.web.initdata import InitDataError, check_init_data
from service.web.local import LOCAL_TENANT
from service.web.logins import COOKIE, PRE_COOKIE, Login, same_token

__all__ = ["LOGIN_ERRORS", "UNKNOWN_LOGIN_ERROR", "LoginRoutes", "login_error"]

_FORM_TTL_S = 3600

# What `/login?error=CODE` may say. The page shows only these fixed texts, never the parameter itself: a
# link to this site must not be able to put words of its choosing (a phishing "call this number") on it.
LOGIN_ERRORS = {
    "expired": "Your session has ended: log in again.",
    "invalid_key": "That API key is not valid (unknown or revoked).",
    "form_expired": "The login form expired: log in again.",
}
UNKNOWN_LOGIN_ERROR = "The login did not succeed: try again."


def login_error(code: str) -> str:
    """The fixed text for ``?error=code``: "" without one, a generic text for a code not in LOGIN_ERRORS."""
    if not code:
        return ""
    return LOGIN_ERRORS.get(code, UNKNOWN_LOGIN_ERROR)


class LoginRoutes:
    def __init__(self, web: Web) -> None:
        self.web = web

    def _client(self, request: Request) -> str:
        return request.client.host if request.client else "unknown"

    def _limited(self, request: Request) -> float:
        return self.web.login_limiter.take(self._client(request))

    def _logged_in(self, request: Request, login: Login, to: str) -> Response:
        response = RedirectResponse(local_path(to), status_code=303)
        self.web.set_cookie(request, response, COOKIE, login.token, int(self.web.settings.session_ttl_s))
        response.delete_cookie(PRE_COOKIE, path="/")
        return response

    async def login_page(self, request: Request) -> Response:
        request.scope[ROUTE_KEY] = "/login"
        web = self.web
        to = local_path(request.query_params.get("next", "/"))
        token = request.query_params.get("token", "")
        if web.settings.local and token:
            if not web.logins.spend_one_time(token):
                return web.error_page(
                    request, 403, "this login link was used already; restart `macupos serve --local` for a new one"
                )
            return self._logged_in(request, web.logins.create(LOCAL_TENANT, "admin", "local", who="owner"), to)
        if web.login_of(request) is not None:
            return RedirectResponse(to, status_code=303)
        form_token = secrets.token_urlsafe(24)
        response = web.render(
            request,
            "login.html",
            form_token=form_token,
            next=to,
            telegram=web.settings.telegram,
            error=login_error(request.query_params.get("error", "")),
        )
        web.set_cookie(request, response, PRE_COOKIE, form_token, _FORM_TTL_S)
        return response

    async def login_submit(self, request: Request) -> Response:
        """``api_key`` from the form: a live key of the service logs this browser in to its tenant."""
        request.scope[ROUTE_KEY] = "/login"
        web = self.web
        svc = service_of(request)
        try:
            if web.settings.local:
                raise WebError("this server logs in with the link printed at its start, not with a key", status=403)
            wait = self._limited(request)
            if wait > 0:
                raise WebError(f"too many login attempts; try again in {RateLimiter.retry_after(wait)} s", status=429)
            form = await web.read_form(request)
            if not same_token(request.cookies.get(PRE_COOKIE, ""), form.get("form_token")):
                raise WebError("the login form expired: reload the page and try again", status=403)
            record = await svc.tenants.keys.verify(form.get("api_key", "").strip())
            if record is None:
                form_token = secrets.token_urlsafe(24)
                response = web.render(
                    request,
                    "login.html",
                    status=401,
                    form_token=form_token,
                    next=local_path(form.get("next", "/")),
                    telegram=web.settings.telegram,
                    error=LOGIN_ERRORS["invalid_key"],
                )
                web.set_cookie(request, response, PRE_COOKIE, form_token, _FORM_TTL_S)
                return response
            login = web.logins.create(
                record.tenant, record.scope, "key", api_key=form["api_key"].strip(), who=f"key {record.key_id}"
            )
            return self._logged_in(request, login, form.get("next", "/"))
        except ServiceError as exc:
            return web.error_page(request, exc.status, exc.message)

    async def logout(self, request: Request) -> Response:
        request.scope[ROUTE_KEY] = "/logout"
        web = self.web
        try:
            form = await web.read_form(request)
        except ServiceError as exc:
            return web.error_page(request, exc.status, exc.message)
        login = web.login_of(request)
        if login is not None and not same_token(login.csrf, form.get("csrf")):
            return web.error_page(request, 403, "the form's security token is missing or stale", login)
        web.logins.end(request.cookies.get(COOKIE))
        response = RedirectResponse("/login", status_code=303)
        response.delete_cookie(COOKIE, path="/")
        return response

    async def mini_app(self, request: Request) -> Response:
        """The Mini App's entry: a page whose own script sends Telegram's initData to /tg/auth."""
        request.scope[ROUTE_KEY] = "/tg"
        return self.web.render(request, "tg.html", telegram=self.web.settings.telegram)

    async def mini_app_auth(self, request: Request) -> Response:
        """``init_data`` (Telegram's, as the client passed it) → the session cookie, or 403 with the reason."""
        request.scope[ROUTE_KEY] = "/tg/auth"
        web = self.web
        s = web.settings
        try:
            wait = self._limited(request)
            if wait > 0:
                return JSONResponse({"error": "too many login attempts; try again later"}, status_code=429)
            form = await web.read_form(request)
            user = check_init_data(
                form.get("init_data", ""), s.telegram_token, s.telegram_users, max_age_s=s.init_data_max_age_s
            )
        except InitDataError as exc:
            return JSONResponse({"error": exc.reason}, status_code=403)
        except ServiceError as exc:
            return JSONResponse({"error": exc.message}, status_code=exc.status)
        who = user.username or user.first_name or str(user.id)
        login = web.logins.create(LOCAL_TENANT, "admin", "telegram", who=f"telegram {who}")
        response = JSONResponse({"next": local_path(form.get("next", "/review"), "/review")})
        web.set_cookie(request, response, COOKIE, login.token, int(s.session_ttl_s))
        return response

"""Refused logins, recognised where each engine reports them and typed as :class:`LoginError`.

Claude Code marks the assistant message of a refused call ``error="authentication_failed"`` (a 401
``authentication_error``: "OAuth token has expired", "invalid x-api-key"); the Codex app-server reports
the HTTP status of the failed model call (401) or an ``unauthorized`` error kind. Both are read from the
engines' typed fields, never from their prose. The fixes are the ones ``macupos doctor`` prints.
"""

from __future__ import annotations

from relay.errors import LoginError

__all__ = ["CLAUDE_LOGIN_FIX", "CODEX_LOGIN_FIX", "claude_login_error", "codex_login_error", "is_codex_unauthorized"]

CLAUDE_LOGIN_FIX = (
    "run `claude` once and /login as the bot's user (or `claude setup-token` and set CLAUDE_CODE_OAUTH_TOKEN)"
)
CODEX_LOGIN_FIX = "run `codex login` as the bot's user (same CODEX_HOME), or set OPENAI_API_KEY"
_CLAUDE_AUTH_FAILED = "authentication_failed"
_MAX_DETAIL = 300


def _short(text: str) -> str:
    one = " ".join(text.split())
    return one if len(one) <= _MAX_DETAIL else one[: _MAX_DETAIL - 1] + "…"


def claude_login_error(error_kind: object, text: str, *, session_id: str = "") -> LoginError | None:
    """The LoginError of a Claude Code assistant message whose ``error`` field is ``error_kind``, else None."""
    if error_kind != _CLAUDE_AUTH_FAILED:
        return None
    return LoginError("claude", _short(text) or "authentication failed", fix=CLAUDE_LOGIN_FIX, session_id=session_id)


def is_codex_unauthorized(info: object) -> bool:
    """Whether a Codex ``codex_error_info`` says the model API refused the login (401 or ``unauthorized``)."""
    root = getattr(info, "root", info)
    if getattr(root, "value", None) == "unauthorized":
        return True
    # The variants that carry an HTTP status (http_connection_failed, response_stream_…) nest it one level down.
    for field in vars(root).values() if hasattr(root, "__dict__") else ():
        if getattr(field, "http_status_code", None) == 401:
            return True
    return getattr(root, "http_status_code", None) == 401


def codex_login_error(detail: str, *, thread_id: str = "") -> LoginError:
    """The LoginError of a Codex turn the model API refused (``thread_id``: the turn's thread)."""
    said = detail.split(", url: ", 1)[0]  # the CLI appends the endpoint, which the owner does not need
    return LoginError("codex", _short(said) or "unauthorized", fix=CODEX_LOGIN_FIX, session_id=thread_id)

"""Secrets never reach a log: a logging filter (and a one-line helper) that pass the final text through the
:class:`~memory.redact.redactor.Redactor`.

The filter sees each record once, after its arguments are merged (``record.getMessage()``), so a secret that
arrives as an argument, inside an exception's message or in a traceback's lines is caught too. Exact values
(the bot token, its URL-encoded form) are masked first, as ``<token>``, and so is the token's secret half
even when cut short (a message title that shows its first 60 characters): any run of its first 8 or more
characters. The redactor then takes every token format it knows and the owner's own secrets
(``MACUPOS_SECRETS``). Logs are not a hot path, but a redactor compiles its own-secret pattern when built:
one is built per secret list and reused.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable, Sequence
from urllib.parse import quote

from memory.redact.redactor import Redactor

__all__ = ["TOKEN_MASK", "RedactingFilter", "install", "redact_log_text", "token_literals"]

TOKEN_MASK = "<token>"
_MIN_LITERAL = 8  # a shorter "secret" would shred ordinary words


@functools.lru_cache(maxsize=8)
def _redactor(own_secrets: tuple[str, ...]) -> Redactor:
    return Redactor(own_secrets)


def redact_log_text(text: str, own_secrets: Sequence[str] = ()) -> str:
    """``text`` as it may be written to a log file: every secret the redactor knows replaced."""
    return _redactor(tuple(own_secrets))(text)


def token_literals(token: str) -> tuple[str, ...]:
    """The exact strings a bot token can appear as: whole, URL-encoded, and its secret half (after the colon)."""
    if not token:
        return ()
    found = {token, quote(token, safe=""), quote(token)}
    _, _, secret = token.partition(":")
    if len(secret) >= _MIN_LITERAL:
        found.add(secret)
    return tuple(sorted(found, key=lambda s: (-len(s), s)))  # longest first: the whole token before its half


class RedactingFilter(logging.Filter):
    """Rewrites every record it sees so that no secret survives formatting: the message (arguments merged),
    the exception text and the stack text. Never drops a record."""

    def __init__(self, own_secrets: Sequence[str] = ()) -> None:
        super().__init__()
        self._own: tuple[str, ...] = tuple(own_secrets)
        self._exact: tuple[str, ...] = ()
        self._cut: tuple[str, ...] = ()  # masked by any run of their first _MIN_LITERAL or more characters

    def update(self, *, own_secrets: Sequence[str] | None = None, literals: Iterable[str] = ()) -> None:
        """Replace the owner's secret list (``MACUPOS_SECRETS``) when given; add exact values to mask (kept)."""
        if own_secrets is not None:
            self._own = tuple(own_secrets)
        exact = {*self._exact, *literals}
        self._exact = tuple(sorted((s for s in exact if len(s) >= _MIN_LITERAL), key=lambda s: (-len(s), s)))

    def mask_token(self, token: str) -> None:
        """Mask a bot token from now on: whole, URL-encoded, and its secret half, whole or cut short."""
        self.update(literals=token_literals(token))
        secret = token.partition(":")[2]
        if len(secret) >= _MIN_LITERAL and secret not in self._cut:
            self._cut = (*self._cut, secret)

    def clean(self, text: str) -> str:
        for literal in self._exact:
            if literal in text:
                text = text.replace(literal, TOKEN_MASK)
        for secret in self._cut:
            text = _mask_runs(text, secret)
        return redact_log_text(text, self._own)

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except (TypeError, ValueError):  # arguments that do not fit the format: logging reports it itself
            message = f"{record.msg!r} % {record.args!r}"
        record.msg, record.args = self.clean(message), None
        if record.exc_info and record.exc_info[1] is not None and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.clean(record.exc_text)
        record.exc_info = None  # the formatter would format the traceback again, unredacted
        if record.stack_info:
            record.stack_info = self.clean(record.stack_info)
        return True


def _mask_runs(text: str, secret: str) -> str:
    """``text`` with every run of ``secret``'s leading characters (at least _MIN_LITERAL of them) masked."""
    head = secret[:_MIN_LITERAL]
    if head not in text:
        return text
    out: list[str] = []
    start = 0
    while (found := text.find(head, start)) != -1:
        end, n = found + len(head), len(head)
        while end < len(text) and n < len(secret) and text[end] == secret[n]:
            end, n = end + 1, n + 1
        out += [text[start:found], TOKEN_MASK]
        start = end
    out.append(text[start:])
    return "".join(out)


def install(flt: RedactingFilter, logger: logging.Logger | None = None) -> RedactingFilter:
    """Put ``flt`` on every handler of ``logger`` (the root logger by default): a handler's filters see the
    records of every logger that propagates to it, a logger's own filters do not."""
    for handler in (logger or logging.getLogger()).handlers:
        if flt not in handler.filters:
            handler.addFilter(flt)
    return flt

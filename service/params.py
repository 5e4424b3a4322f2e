"""Query parameters, checked: a bad one is a 400 naming it, never a 500 or a silent default."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TypeVar

from starlette.requests import Request

from memory import parse_iso
from service.errors import BadRequest

__all__ = ["instant_param", "int_param", "parse_instant", "positive_float_param", "text_param"]

MAX_TEXT = 4000
_N = TypeVar("_N", int, float)


def text_param(request: Request, name: str, default: str = "", *, required: bool = False) -> str:
    value = request.query_params.get(name)
    if value is None or (required and not value.strip()):
        if required:
            raise BadRequest(f"the query parameter {name!r} is required")
        return default
    if len(value) > MAX_TEXT:
        raise BadRequest(f"{name} is longer than {MAX_TEXT} characters")
    if "\x00" in value:
        raise BadRequest(f"{name} holds a NUL character")
    return value


def _given(request: Request, name: str) -> str | None:
    """The parameter's text; None when it is absent or empty (both mean "not given")."""
    raw = request.query_params.get(name)
    return None if raw is None or raw == "" else raw


def _number(
    request: Request, name: str, convert: Callable[[str], _N], ok: Callable[[_N], bool], rule: str
) -> _N | None:
    """The parameter as a number, None when not given; a 400 ``{name} must be {rule}`` when it is no number or
    not ``ok``."""
    raw = _given(request, name)
    if raw is None:
        return None
    try:
        value = convert(raw)
    except ValueError:
        raise BadRequest(f"{name} must be {rule}") from None
    if not ok(value):
        raise BadRequest(f"{name} must be {rule}")
    return value


def int_param(request: Request, name: str, default: int, lo: int, hi: int) -> int:
    value = _number(request, name, int, lambda v: lo <= v <= hi, f"a whole number from {lo} to {hi}")
    return default if value is None else value


def positive_float_param(request: Request, name: str) -> float | None:
    return _number(request, name, float, lambda v: v > 0, "a positive number")  # NaN fails v > 0 too


def instant_param(request: Request, name: str) -> datetime | None:
    raw = _given(request, name)
    return None if raw is None else parse_instant(raw, name)


def parse_instant(raw: str, name: str) -> datetime:
    """An ISO-8601 time ("Z" allowed; a naive one is UTC); BadRequest naming ``name`` otherwise."""
    try:
        return parse_iso(raw)
    except ValueError:
        raise BadRequest(f"{name} is not an ISO-8601 time: {raw[:60]!r}") from None

"""Query parameters, checked: a bad one is a 400 naming it, never a 500 or a silent default."""

from __future__ import annotations

import math
from datetime import datetime

from starlette.requests import Request

from memory import parse_iso
from service.errors import BadRequest

__all__ = ["instant_param", "int_param", "parse_instant", "positive_float_param", "text_param"]

MAX_TEXT = 4000


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


def int_param(request: Request, name: str, default: int, lo: int, hi: int) -> int:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise BadRequest(f"{name} must be a whole number from {lo} to {hi}") from None
    if not lo <= value <= hi:
        raise BadRequest(f"{name} must be a whole number from {lo} to {hi}")
    return value


def positive_float_param(request: Request, name: str) -> float | None:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return None
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not value > 0:  # NaN fails this too
        raise BadRequest(f"{name} must be a positive number")
    return value


def instant_param(request: Request, name: str) -> datetime | None:
    raw = request.query_params.get(name)
    return None if raw is None or raw == "" else parse_instant(raw, name)


def parse_instant(raw: str, name: str) -> datetime:
    """An ISO-8601 time ("Z" allowed; a naive one is UTC); BadRequest naming ``name`` otherwise."""
    try:
        return parse_iso(raw)
    except ValueError:
        raise BadRequest(f"{name} is not an ISO-8601 time: {raw[:60]!r}") from None

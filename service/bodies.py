"""Request bodies read under a cap: plain or gzip (``Content-Encoding: gzip``), inflated a piece at a time.

The cap holds after inflating, so a gzip bomb is refused (413) once its output passes the cap, having
cost at most the cap in memory or disk; a body longer than the cap is refused without being read when
its Content-Length says so.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request

from service.errors import BadRequest, PayloadTooLarge, UnsupportedMediaType

__all__ = ["body_chunks", "json_object", "read_body", "read_json"]

_GZIP = 16 + zlib.MAX_WBITS  # a gzip header and trailer, not a raw or zlib stream


def _too_large(limit: int) -> PayloadTooLarge:
    return PayloadTooLarge(f"the body is larger than {limit} bytes (after gunzip)", limit=limit)


async def body_chunks(request: Request, limit: int) -> AsyncIterator[bytes]:
    """The body's bytes, gunzipped when the client says so; PayloadTooLarge once more than ``limit`` came."""
    encoding = request.headers.get("content-encoding", "identity").strip().lower()
    if encoding not in {"identity", "gzip", "x-gzip"}:
        raise UnsupportedMediaType(f"Content-Encoding {encoding!r} is not supported; send gzip or nothing")
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _too_large(limit)
    total = 0
    if encoding == "identity":
        async for chunk in request.stream():
            total += len(chunk)
            if total > limit:
                raise _too_large(limit)
            if chunk:
                yield chunk
        return
    inflater = zlib.decompressobj(_GZIP)
    seen_input = received = 0
    try:
        async for chunk in request.stream():
            received += len(chunk)
            if received > limit:
                raise _too_large(limit)
            data = chunk
            while data:
                seen_input += 1
                out = inflater.decompress(data, limit - total + 1)
                total += len(out)
                if total > limit:
                    raise _too_large(limit)
                if out:
                    yield out
                if inflater.eof:  # a member ended: another may follow (concatenated gzip files)
                    data = inflater.unused_data
                    if data:
                        inflater = zlib.decompressobj(_GZIP)
                else:
                    data = inflater.unconsumed_tail
    except zlib.error as exc:
        raise BadRequest(f"the gzip body is malformed: {exc}") from None
    if seen_input and not inflater.eof:
        raise BadRequest("the gzip body is cut short")
    if not seen_input:
        raise BadRequest("Content-Encoding: gzip with an empty body")


async def read_body(request: Request, limit: int) -> bytes:
    parts = [chunk async for chunk in body_chunks(request, limit)]
    return b"".join(parts)


async def read_json(request: Request, limit: int) -> dict[str, Any]:
    return json_object(await read_body(request, limit))


def json_object(raw: bytes) -> dict[str, Any]:
    """A JSON object body; BadRequest naming what is wrong."""
    try:
        value = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BadRequest(f"the body is not JSON: {exc}") from None
    except RecursionError:
        raise BadRequest("the body is not JSON: nested too deeply") from None
    if not isinstance(value, dict):
        raise BadRequest("the body must be a JSON object")
    return value

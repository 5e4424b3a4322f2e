"""The service's pure parts: spool names, token buckets, the metrics text, the log key mask."""

from __future__ import annotations

import asyncio
import io
import logging
import socket
from pathlib import Path

import pytest

from service.errors import BadRequest
from service.keys import mask_keys
from service.metrics import Metrics
from service.ratelimit import RateLimiter
from service.server import KeyMask, bind
from service.spool import spool_path

SPOOL = Path("/spool")


def test_a_name_always_maps_to_the_same_spool_file_and_two_names_never_share_one() -> None:
    a = spool_path(SPOOL, "projects/-srv-app/abc.jsonl")
    assert a == spool_path(SPOOL, "projects/-srv-app/abc.jsonl")
    assert a.name == "abc.jsonl" and a.parent.parent == SPOOL / "transcripts"
    assert spool_path(SPOOL, "notes v1.jsonl") != spool_path(SPOOL, "notes_v1.jsonl")
    assert spool_path(SPOOL, "a/x.jsonl") != spool_path(SPOOL, "b/x.jsonl")


def test_a_spool_name_keeps_what_the_memory_reads_from_a_path() -> None:
    sub = spool_path(SPOOL, "p/3f2a/subagents/agent-a1.jsonl")
    assert sub.parts[-3:] == ("3f2a", "subagents", "agent-a1.jsonl")
    assert spool_path(SPOOL, "sessions/2025/rollout-2025-x.jsonl").name == "rollout-2025-x.jsonl"


@pytest.mark.parametrize(
    "name", ["../../../etc/passwd", "..\\..\\x", "/abs/olute.jsonl", ".hidden", "a/../../b", "ü ñ.jsonl", "x" * 900]
)
def test_no_name_leaves_the_spool(name: str) -> None:
    path = spool_path(SPOOL, name)
    assert path.is_relative_to(SPOOL / "transcripts")
    assert ".." not in path.parts and not path.name.startswith(".")
    assert all(len(part) <= 120 for part in path.parts)


@pytest.mark.parametrize("name", ["", "..", "../..", "/", "a\x00b", "x" * 1025])
def test_names_with_no_file_are_refused(name: str) -> None:
    with pytest.raises(BadRequest):
        spool_path(SPOOL, name)


def test_a_bucket_lets_a_burst_through_then_the_rate() -> None:
    now = [0.0]
    limiter = RateLimiter(2.0, 3, clock=lambda: now[0])
    assert [limiter.take("k") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert limiter.take("k") == pytest.approx(0.5)
    assert limiter.take("other") == 0.0
    now[0] += 0.5
    assert limiter.take("k") == 0.0
    assert RateLimiter.retry_after(0.01) == "1" and RateLimiter.retry_after(2.2) == "3"
    assert RateLimiter(0, 1).take("k") == 0.0


def test_buckets_are_bounded() -> None:
    limiter = RateLimiter(1.0, 1, max_names=10)
    for i in range(100):
        limiter.take(f"addr-{i}")
    assert len(limiter._buckets) == 10


def test_metrics_are_prometheus_text_with_cumulative_buckets() -> None:
    m = Metrics()
    m.observe("/v1/get", "GET", 200, 0.002)
    m.observe("/v1/get", "GET", 200, 0.2)
    m.error("/v1/get", 'odd"code')
    m.gauge("macupos_tenants_open", "open tenants", lambda: 3.0)
    text = m.render()
    assert 'macupos_http_requests_total{route="/v1/get",method="GET",status="200"} 2' in text
    assert 'macupos_http_request_duration_seconds_bucket{route="/v1/get",method="GET",le="0.001"} 0' in text
    assert 'macupos_http_request_duration_seconds_bucket{route="/v1/get",method="GET",le="0.0025"} 1' in text
    assert 'macupos_http_request_duration_seconds_bucket{route="/v1/get",method="GET",le="+Inf"} 2' in text
    assert 'macupos_http_request_duration_seconds_count{route="/v1/get",method="GET"} 2' in text
    assert 'code="odd\\"code"' in text
    assert "macupos_tenants_open 3" in text
    for line in text.splitlines():
        assert line.startswith("#") or line.rsplit(" ", 1)[1].replace(".", "", 1).replace("e-", "").isdigit()


def test_keys_are_masked_in_log_records() -> None:
    key = "mpk_0123456789ab_" + "A" * 43
    assert mask_keys(f"got {key}!") == "got mpk_<masked>!"
    assert mask_keys("mpk_cut-short-key") == "mpk_<masked>"
    # A logger of its own with its own handler: what other tests leave on the root logger cannot mask first.
    logger = logging.getLogger("tests.service.mask")
    logger.propagate, logger.level = False, logging.INFO
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.addFilter(KeyMask())
    logger.addHandler(handler)
    try:
        logger.info("header was %s", key)
        try:
            raise ValueError(key)
        except ValueError:
            logger.exception("failed")
    finally:
        logger.removeHandler(handler)
        logger.propagate = True
    text = out.getvalue()
    assert key not in text and text.count("mpk_<masked>") == 2  # the message, and the traceback's last line
    assert "raise ValueError(key)" in text  # the traceback itself is kept


async def _nodelay_of_accepted(sock: socket.socket) -> int:
    seen: list[int] = []
    done = asyncio.Event()

    async def handle(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append(writer.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        writer.close()
        done.set()

    server = await asyncio.start_server(handle, sock=sock)
    async with server:
        _, writer = await asyncio.open_connection(*sock.getsockname()[:2])
        await asyncio.wait_for(done.wait(), timeout=10)
        writer.close()
    return seen[0]


async def test_the_listening_socket_makes_connections_that_send_at_once() -> None:
    # asyncio sets TCP_NODELAY only on sockets whose protocol says TCP; without it a response's header and
    # body writes wait on the client's delayed ACK (40 ms each).
    assert await _nodelay_of_accepted(bind("127.0.0.1", 0)) != 0
    plain = socket.socket(socket.AF_INET, socket.SOCK_STREAM)  # protocol 0, as uvicorn's bind_socket makes it
    plain.bind(("127.0.0.1", 0))
    assert await _nodelay_of_accepted(plain) == 0

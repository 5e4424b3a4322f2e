"""`macupos doctor`'s memory-service check (MACUPOS_MEMORY_URL): reachable, the key known, its scope, the
outbox. The key is never printed: not in a detail, not in a fix."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from bot.doctor_check import Check
from memory import MemorySettings
from memory.remote import KEY_FIX, Outbox, RemoteMemoryError, ServiceClient, ServiceUnreachableError, Timeouts

__all__ = ["memory_service"]

NAME = "memory service"
_START_FIX = "start it (`macupos serve`, docs/service.md) or fix MACUPOS_MEMORY_URL (or [memory] url)"


def _loopback(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _plain_http_warning(url: str, detail: str) -> Check | None:
    if urlsplit(url).scheme == "http" and not _loopback(url):
        return Check(
            NAME,
            True,
            f"{detail}; plain http to another machine: the key and transcripts travel unencrypted",
            "serve it behind TLS (deploy/Caddyfile, docs/service.md) and use https://",
            warning=True,
        )
    return None


def _outbox_warning(memory: MemorySettings, detail: str) -> Check | None:
    waiting = len(Outbox(memory.outbox_dir).entries())
    if waiting:
        return Check(
            NAME,
            True,
            f"{detail}; {waiting} upload(s) wait in {memory.outbox_dir}",
            "macupos memory sync",
            warning=True,
        )
    return None


async def memory_service(memory: MemorySettings, *, network: bool, timeout_s: float) -> Check:
    """The service's check; ``network=False`` (``--quick``) looks at the settings and the outbox only."""
    url = memory.memory_url
    if not network:
        detail = f"{url}, key set (not contacted: --quick)"
        return _plain_http_warning(url, detail) or _outbox_warning(memory, detail) or Check(NAME, True, detail)
    client = ServiceClient(url, memory.api_key, Timeouts(connect=timeout_s, read=timeout_s, upload=timeout_s))
    try:
        try:
            await client.healthz(timeout_s)
        except ServiceUnreachableError as exc:
            return Check(NAME, False, str(exc), _START_FIX)
        except RemoteMemoryError as exc:
            return Check(NAME, False, str(exc), "point MACUPOS_MEMORY_URL at the server `macupos serve` runs")
        try:
            stats = (await client.request("GET", "/v1/stats")).json()
        except RemoteMemoryError as exc:
            if exc.status == 401:
                return Check(NAME, False, f"{url} answers, but the key is unknown or revoked", KEY_FIX)
            return Check(NAME, False, str(exc), _START_FIX)
        # A write key passes the scope check and is then refused for the empty script (400); a read key 403.
        scope = await client.request("POST", "/v1/script", json_body={}, ok=(400, 403))
        tenant = stats.get("tenant", "?")
        if scope.status_code == 403:
            return Check(
                NAME,
                False,
                f"{url}, tenant {tenant}: the key may only read; uploads (memory ingest, the SessionEnd hook) "
                "are refused",
                f"create a write key: macupos serve keys create --tenant {tenant} --scope write",
            )
    except RemoteMemoryError as exc:
        return Check(NAME, False, str(exc), _START_FIX)
    finally:
        await client.aclose()
    handoffs = stats.get("handoffs", 0)
    detail = f"{url}, tenant {tenant}, write key, {handoffs} handoff(s)"
    return _plain_http_warning(url, detail) or _outbox_warning(memory, detail) or Check(NAME, True, detail)

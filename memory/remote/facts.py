"""`RemoteFacts`: the :class:`~memory.facts.api.FactsApi` methods the callers use, over the memory service.

Scripts run on the service (``POST /v1/script``: all or nothing there too); the injection tier comes from
``GET /v1/facts/tier``; the snapshot from the export. The event log, replay and rebuild are the service's
own files: asked for here, they say so in one line.
"""

from __future__ import annotations

import io
import re
import tarfile
from collections.abc import Mapping
from datetime import datetime

from memory.facts.api import LoadReport
from memory.facts.model import FactsError
from memory.facts.tcl import ScriptResult
from memory.remote.http import RemoteMemoryError, RemoteUnsupportedError, ServiceClient, Timeouts
from memory.settings import MemorySettings

__all__ = ["RemoteFacts", "tcl_word"]

_PLAIN = re.compile(r"[A-Za-z0-9_.:/@+=-]+")
_ESCAPES = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def tcl_word(text: str) -> str:
    """``text`` as one Tcl word that substitutes to exactly ``text`` (every special character escaped)."""
    if not text:
        return "{}"
    if _PLAIN.fullmatch(text):
        return text
    return "".join(_ESCAPES.get(c, "\\" + c if c in ' ;"$[]{}\\#' else c) for c in text)


class RemoteFacts:
    def __init__(self, client: ServiceClient) -> None:
        self.client = client

    @classmethod
    async def open(cls, settings: MemorySettings, *, timeouts: Timeouts | None = None) -> RemoteFacts:
        return cls(ServiceClient(settings.memory_url, settings.api_key, timeouts or Timeouts()))

    async def close(self, *, snapshot: bool = True) -> None:
        del snapshot  # the service writes its own
        await self.client.aclose()

    async def run_script(self, text: str, *, as_of: datetime | None = None, provenance: str = "") -> ScriptResult:
        """The script's result; a script error is a failed result (as locally), not an exception. The service
        records the key as the provenance."""
        del provenance
        try:
            output = await self.client.call(self.client.sdk.script(text, as_of=as_of))
        except RemoteMemoryError as exc:
            if exc.status != 422:
                raise
            line = exc.extra.get("line", 0)
            return ScriptResult(None, "", exc.detail or "the script failed", int(line) if isinstance(line, int) else 0)
        return ScriptResult(None, output, None, 0)

    async def remember(
        self,
        mid: str,
        subject: str,
        ctype: str,
        fields: Mapping[str, str],
        *,
        provenance: str = "",
        now: datetime | None = None,
    ) -> str:
        """One memory, by a `remember` script; FactsError when the service refuses it (an existing id)."""
        del provenance
        words = ["remember", mid, subject, ctype, *(w for kv in fields.items() for w in kv)]
        result = await self.run_script(" ".join(tcl_word(w) for w in words), as_of=now)
        if not result.ok:
            raise FactsError(result.error or "the service refused the memory")
        return mid

    async def tiered_injection(self, now: datetime | None = None) -> list[str]:
        return await self.client.call(self.client.sdk.facts_tier(as_of=now))

    async def world(self) -> dict[str, int]:
        return (await self.client.call(self.client.sdk.stats())).facts

    async def export_snapshot(self) -> str:
        archive_bytes = await self.client.call(self.client.sdk.export())  # under the upload timeout
        try:
            with tarfile.open(fileobj=io.BytesIO(archive_bytes), mode="r:gz") as archive:
                member = archive.extractfile("facts/snapshot.tcl")
                return member.read().decode("utf-8") if member is not None else ""
        except (tarfile.TarError, KeyError, EOFError, OSError) as exc:
            raise RemoteMemoryError(f"memory service: the export holds no readable facts snapshot ({exc})") from exc

    async def load_snapshot(
        self, text: str, *, provenance: str = "snapshot load", now: datetime | None = None
    ) -> LoadReport:
        del text, provenance, now
        raise RemoteUnsupportedError("memory facts load", "run its remember lines with `macupos memory script --file`")

    async def rebuild(self) -> int:
        raise RemoteUnsupportedError("memory rebuild", "the service replays its own facts log")

    async def replay_new(self) -> int:
        raise RemoteUnsupportedError("replaying the facts log", "the service keeps the facts")

"""`GET /v1/export`: the tenant's memory as a gzip tar, the layout `memory import` and the facts tools read.

    handoffs/YYYY/MM/DD/<session>.md   every handoff (eywa-mcp compatible)
    facts/snapshot.tcl                 the facts as replayable remember/link lines
    facts/events/<origin>.jsonl        the append-only facts event log

The archive is written to the tenant's spool first (a thread does the compressing) and streamed from
the open file (already unlinked, so nothing stays behind).
"""

from __future__ import annotations

import asyncio
import io
import os
import secrets
import tarfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import BinaryIO

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from service.calls import Call, endpoint

__all__ = ["export_route"]


def _add(tar: tarfile.TarFile, name: str, data: bytes, mtime: float) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = int(mtime)
    info.mode = 0o600
    tar.addfile(info, io.BytesIO(data))


def _write(out: Path, handoffs: list[tuple[str, str]], snapshot: str, events_dir: Path) -> None:
    now = time.time()
    with tarfile.open(out, "w:gz", compresslevel=6) as tar:
        for rel, markdown in handoffs:
            _add(tar, f"handoffs/{rel}", markdown.encode("utf-8", "surrogatepass"), now)
        _add(tar, "facts/snapshot.tcl", snapshot.encode("utf-8"), now)
        if events_dir.is_dir():
            for f in sorted(events_dir.glob("*.jsonl")):
                # Read whole: the log only grows, and what was read is a consistent prefix of it.
                _add(tar, f"facts/events/{f.name}", f.read_bytes(), f.stat().st_mtime)


@endpoint("/v1/export")
async def export_route(request: Request, call: Call) -> Response:
    eywa = await call.tenant.eywa()
    facts = await call.tenant.facts()
    handoffs = [(rel.as_posix(), markdown) async for rel, markdown in eywa.handoff_files()]
    snapshot = await facts.export_snapshot()
    out = call.tenant.spool_dir / "tmp" / f"export-{secrets.token_hex(8)}.tar.gz"
    await asyncio.to_thread(out.parent.mkdir, mode=0o700, parents=True, exist_ok=True)
    try:
        await asyncio.to_thread(_write, out, handoffs, snapshot, facts.events_dir)
    except BaseException:
        out.unlink(missing_ok=True)
        raise
    # Opened, then unlinked: the archive is streamed from the open file and leaves nothing behind, even
    # when the client goes away halfway.
    fh = await asyncio.to_thread(out.open, "rb")
    out.unlink()
    size = os.fstat(fh.fileno()).st_size
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    return StreamingResponse(
        _chunks(fh),
        media_type="application/gzip",
        headers={
            "Content-Length": str(size),
            "Content-Disposition": f'attachment; filename="macupos-{call.tenant.name}-{stamp}.tar.gz"',
        },
    )


async def _chunks(fh: BinaryIO) -> AsyncIterator[bytes]:
    try:
        while chunk := await asyncio.to_thread(fh.read, 1 << 20):
            yield chunk
    finally:
        fh.close()

"""The write routes of a tenant's memory: transcript and handoff uploads, forget, fact scripts."""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shutil
from pathlib import Path, PurePosixPath
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from memory import Eywa
from memory.handoffs import from_markdown
from memory.redact import Redactor
from service.bodies import body_chunks, read_body, read_json
from service.calls import Call, endpoint
from service.errors import BadRequest, Conflict, ScriptFailed, Unprocessable
from service.ingest_budget import declared_bytes, ingest_budget
from service.params import parse_instant, text_param
from service.spool import name_parts, safe_part, spool_path
from service.spool_redact import LineRedactor, redact_line
from service.tenants import Tenant
from service.webhooks import Webhooks, events, webhooks_of

__all__ = ["forget_route", "forget_session", "handoff_upload_route", "script_route", "transcript_upload_route"]

_FLUSH = 1 << 20


async def _spool_body(
    request: Request, spool: Path, limit: int, redactor: Redactor, *, document: bool = False
) -> tuple[Path, int]:
    """The body (gunzipped), redacted line by line, in a temporary file of the spool; (its path, the size
    received). No raw byte is written, not even to the temporary file (service/spool_redact.py).

    ``document``: the body is one JSON document (a `.json` loglines export, pretty-printed over many
    lines), redacted whole once received, as the memory reads it: line by line, a secret escaped in JSON
    (``https:\\/\\/…``) would not be seen."""
    tmp_dir = spool / "tmp"
    await asyncio.to_thread(tmp_dir.mkdir, mode=0o700, parents=True, exist_ok=True)
    tmp = tmp_dir / f"{secrets.token_hex(8)}.part"
    fh = await asyncio.to_thread(tmp.open, "wb")
    lines = LineRedactor(redactor, fh.write)
    whole = bytearray()  # a document's bytes, until its end (within the body cap)

    def put(data: bytes, last: bool = False) -> None:  # redacting is CPU work: on the thread, with the write
        if document:
            whole.extend(data)
            if last:
                fh.write(redact_line(redactor, whole))
            return
        lines.feed(data)
        if last:
            lines.finish()

    size = 0
    try:
        buf = bytearray()
        async for chunk in body_chunks(request, limit):
            buf += chunk
            size += len(chunk)
            if len(buf) >= _FLUSH:
                await asyncio.to_thread(put, bytes(buf))
                buf.clear()
        await asyncio.to_thread(put, bytes(buf), True)
    except BaseException:
        fh.close()
        tmp.unlink(missing_ok=True)
        raise
    await asyncio.to_thread(fh.close)
    return tmp, size


def _install(tmp: Path, target: Path) -> Path | None:
    """Put the upload in place; the file it replaces is kept beside it until the upload proves readable."""
    target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    previous = target.with_name(f".{target.name}.prev")
    try:
        os.replace(target, previous)
    except FileNotFoundError:  # the first upload of this name
        os.replace(tmp, target)
        return None
    os.replace(tmp, target)
    return previous


async def _live(eywa: Eywa, ids: list[str]) -> list[str]:
    return [sid for sid in sorted(ids) if not await eywa.is_forgotten(sid)]


@endpoint("/v1/transcripts", scope="write", upload=True)
async def transcript_upload_route(request: Request, call: Call) -> Response:
    """One Claude Code JSONL or Codex rollout, ingested; the same or a grown file again is idempotent."""
    name = text_param(request, "name", required=True)
    budget = ingest_budget(request)
    budget.check(declared_bytes(request))  # 503 before the body is read when its declared size cannot fit
    spool = call.tenant.spool_dir
    eywa = await call.tenant.eywa()
    target = spool_path(spool, name, eywa.redactor)  # a token in the name stays out of paths, rows and logs
    limit = call.service.settings.limits.transcript_bytes
    document = target.name.endswith(".json")  # a loglines export: one JSON document
    tmp, size = await _spool_body(request, spool, limit, eywa.redactor, document=document)
    if size == 0:
        tmp.unlink(missing_ok=True)
        raise BadRequest("the body is empty: send the transcript file")
    # One ingest of this tenant at a time, the file put meanwhile; then the server-wide budget (503 past it).
    async with call.tenant.ingest_lock, budget.hold(size, discard=tmp):
        try:
            previous = await asyncio.to_thread(_install, tmp, target)
        finally:
            tmp.unlink(missing_ok=True)
        work = asyncio.ensure_future(call.service.ingests.ingest(eywa.settings, target, call.service.settings.use_llm))
        try:
            report = await asyncio.shield(work)
        except BaseException as exc:
            if isinstance(exc, asyncio.CancelledError):  # past the deadline: the ingest still ends, under this lock
                with contextlib.suppress(Exception):
                    await work
            ingested = work.done() and not work.cancelled() and work.exception() is None
            if previous is not None and not ingested:  # failed: the last good upload of this name stays the file
                await asyncio.to_thread(os.replace, previous, target)
            elif previous is not None:  # done after the deadline: the new file is the one read
                previous.unlink(missing_ok=True)
            raise
        sessions = await _live(eywa, list(report.counted))
        problems = sum(report.lines_skipped.values())
        refused: str | None = None
        if report.unreadable:
            refused = report.unreadable[0][1]
        elif not sessions and problems and not report.files_unchanged:
            first = report.problems[0]
            refused = f"not a transcript: no session could be read (line {first.line_no}: {first.reason})"
        if previous is not None:
            if refused is not None:  # the last good upload of this name stays the file
                await asyncio.to_thread(os.replace, previous, target)
            else:
                previous.unlink(missing_ok=True)
        if refused is None and not sessions:  # all it held is forgotten (or kept out): no copy stays
            await asyncio.to_thread(_remove_spooled, spool, [target.resolve()])
    if refused is not None:
        raise Unprocessable(refused)
    hooks = webhooks_of(request.app)
    await events.ingested(hooks, call.tenant.name, eywa, sessions, report.counted, report.handoffs_extracted)
    counted: dict[str, int] = {"new": 0, "updated": 0, "unchanged": 0}
    for sid in sessions:
        counted[report.counted[sid]] += 1
    body: dict[str, Any] = {
        "sessions": sessions,
        "problems": problems,
        "first_problems": [{"line": p.line_no, "reason": p.reason} for p in report.problems[:20]],
        "lines_skipped": dict(sorted(report.lines_skipped.items())),
        "counts": counted,
        "handoffs_extracted": report.handoffs_extracted,
        "bytes": size,
    }
    return JSONResponse(body)


def _handoff_relpath(name: str) -> PurePosixPath | None:
    """The client's name for a handoff file, kept as far as the memory reads it (`YYYY/MM/DD/<session>.md`:
    the date folders, digits only, and the file name, made safe)."""
    if not name:
        return None
    parts = name_parts(name)
    folders = [p for p in parts[-4:-1] if p.isdigit()]
    rel = PurePosixPath(*folders, safe_part(parts[-1]))
    return rel if rel.suffix == ".md" else rel.with_name(rel.name + ".md")


@endpoint("/v1/handoffs", scope="write")
async def handoff_upload_route(request: Request, call: Call) -> Response:
    """One eywa-format handoff markdown (as `memory import` reads); it replaces the stored handoff."""
    raw = await read_body(request, call.service.settings.limits.handoff_bytes)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise BadRequest("the handoff is not UTF-8 text") from None
    rel = _handoff_relpath(text_param(request, "name"))
    handoff = from_markdown(text, path=Path(rel) if rel else None)  # HandoffFormatError: 400 naming why
    folder = call.tenant.spool_dir / "handoffs" / secrets.token_hex(8)
    path = folder / (rel or PurePosixPath(safe_part(handoff.session_id) + ".md"))

    def write() -> None:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")

    eywa = await call.tenant.eywa()
    try:
        await asyncio.to_thread(write)
        async with call.tenant.ingest_lock:
            report = await eywa.import_dir(folder)
    finally:
        await asyncio.to_thread(shutil.rmtree, folder, True)
    if report.rejected:
        why = report.rejected[0][1].replace(str(folder), "").replace(str(path), "")
        if "forgotten" in why:
            raise Conflict(f"session {handoff.session_id!r} was forgotten; it stays out")
        raise BadRequest(f"not imported: {why}")
    if report.imported:
        await events.handoff_uploaded(webhooks_of(request.app), call.tenant.name, eywa, handoff.session_id)
    return JSONResponse({"session_id": handoff.session_id, "imported": report.imported})


def _remove_spooled(spool: Path, files: list[Path]) -> None:
    root = (spool / "transcripts").resolve()
    for f in files:
        with contextlib.suppress(OSError):
            f.unlink()
        folder = f.parent
        while folder != root and folder.is_relative_to(root):
            try:
                folder.rmdir()
            except OSError:
                break
            folder = folder.parent


@endpoint("/v1/sessions/{id}", scope="write")
async def forget_route(request: Request, call: Call) -> Response:
    """Forget a session and its subagents; later uploads and imports leave them out. Every spooled transcript
    that held them (under any name it was uploaded with) goes too once every session it held is forgotten."""
    hooks = webhooks_of(request.app)
    forgotten = await forget_session(call.tenant, request.path_params["id"], hooks=hooks, by=f"key {call.key.key_id}")
    return JSONResponse({"forgotten": forgotten})


async def forget_session(tenant: Tenant, session_id: str, *, hooks: Webhooks | None = None, by: str = "") -> list[str]:
    """What ``DELETE /v1/sessions/{id}`` and the web pages' Forget do: the ids forgotten (told to the tenant's
    ``session.forgotten`` webhooks, ``hooks``, once done), ``by`` whom (the page's login; '' for the API)."""
    eywa = await tenant.eywa()
    root = (tenant.spool_dir / "transcripts").resolve()
    async with tenant.ingest_lock:
        view = await eywa.show(session_id, transcript=False)  # SessionNotFoundError: 404
        ids = [session_id, *view.subagents]
        paths: set[Path] = set()
        for sid in ids:  # their source files only, not their (possibly megabytes of) markdown
            row = await eywa.session_row(sid)
            if row is not None and row.source_path:
                paths.add(Path(row.source_path).resolve())
        removed = await eywa.forget(session_id, by=by)
        # The session row names one file; the same session uploaded under another name is in another.
        paths |= await eywa.sources_holding({*ids, *removed}, under=root)
        gone: list[Path] = []
        for p in sorted(paths):
            if not p.is_relative_to(root):
                continue
            src = await eywa.source(p)
            if src is None or not await _live(eywa, list(src.session_ids)):
                gone.append(p)
        await asyncio.to_thread(_remove_spooled, tenant.spool_dir, gone)
    await events.forgotten(hooks, tenant.name, session_id, removed)
    return removed


@endpoint("/v1/script", scope="write")
async def script_route(request: Request, call: Call) -> Response:
    """`{"script": "…", "as_of"?: ISO}` → `{"output": "…"}`: a facts script, all or nothing."""
    body = await read_json(request, call.service.settings.limits.json_bytes)
    script = body.get("script")
    if not isinstance(script, str) or not script.strip():
        raise BadRequest('the body must be {"script": "<Tcl>"} with a script')
    as_of = parse_instant(str(body["as_of"]), "as_of") if body.get("as_of") is not None else None
    facts = await call.tenant.facts()
    result = await facts.run_script(script, as_of=as_of, provenance=f"api key {call.key.key_id}")
    if not result.ok:
        raise ScriptFailed(result.error or "the script failed", line=result.line)
    return JSONResponse({"output": result.text})

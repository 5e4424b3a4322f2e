"""The extraction step of ingest: each pending session becomes a handoff, stored, mirrored and indexed.

It runs after a run's transcript files are all stored, with bounded concurrency, so a failed or slow
extraction never blocks indexing of the transcript text; a session killed mid-extraction stays `pending` for
the next run. Subagents and private projects' sessions get the deterministic handoff only; past the daily
model budget (memory.spend) every session does.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from memory.errors import ExtractionError, MemoryStoreError
from memory.handoffs.format import redacted, to_markdown
from memory.handoffs.model_written import extract_handoff
from memory.index import postings as index
from memory.index.idf import Vocabulary, idf_table
from memory.models import Handoff, SessionKind, Transcript
from memory.redact.privacy import Privacy, load_privacy
from memory.redact.redactor import Redactor
from memory.settings import MemorySettings
from memory.sources.discover import discover, parse_source
from memory.spend import Spend, record_spend, spent_today
from memory.storage import rows as store
from memory.storage.database import Database
from memory.storage.mirror import write_handoff

if TYPE_CHECKING:  # the report is ingest's; ingest runs this step (a type-only import, no cycle at run time)
    from memory.ingest import IngestReport

__all__ = ["extract_pending"]

logger = logging.getLogger(__name__)
_NO_PRIVACY = Privacy()


async def extract_pending(
    db: Database,
    settings: MemorySettings,
    report: IngestReport,
    *,
    use_llm: bool | None = None,
    redactor: Redactor | None = None,
    session_ids: Sequence[str] | None = None,
) -> None:
    """Extract handoffs for pending sessions (or the given ones) with bounded concurrency."""
    redactor = redactor or Redactor(settings.own_secrets)
    wanted = list(session_ids) if session_ids is not None else await store.sessions_needing_extraction(db.conn)
    if not wanted:
        return
    llm = settings.llm_enabled if use_llm is None else use_llm
    gate = asyncio.Semaphore(settings.extract_concurrency)
    privacy = load_privacy(settings)
    vocab = Vocabulary()

    async def one(session_id: str) -> None:
        async with gate:
            try:
                h = await _extract_one(
                    db,
                    settings,
                    session_id,
                    use_llm=llm,
                    redactor=redactor,
                    privacy=privacy,
                    report=report,
                    vocab=vocab,
                )
            except (ExtractionError, OSError) as exc:
                logger.warning("handoff extraction failed for %s: %s", session_id, exc)
                report.extract_failed += 1
                async with db.write() as conn:
                    await store.set_extract_state(conn, session_id, "failed")
                return
            except MemoryStoreError as exc:  # e.g. the database stayed locked: stays pending for the next run
                logger.warning("handoff of %s not stored: %s", session_id, exc)
                report.extract_failed += 1
                return
            except Exception:  # an extractor bug one session triggers: that session fails, the others go on
                logger.exception("handoff extraction crashed for %s", session_id)
                report.extract_failed += 1
                async with db.write() as conn:
                    await store.set_extract_state(conn, session_id, "failed")
                return
            if h is not None:
                report.handoffs_extracted += 1
                report.handoffs_llm += h.source == "llm"

    await asyncio.gather(*(one(sid) for sid in wanted))


async def _within_budget(db: Database, settings: MemorySettings) -> bool:
    budget = settings.memory_daily_budget_usd
    return budget is None or await spent_today(db.conn, settings.timezone) < budget


async def _extract_one(
    db: Database,
    settings: MemorySettings,
    session_id: str,
    *,
    use_llm: bool,
    redactor: Redactor,
    privacy: Privacy = _NO_PRIVACY,
    report: IngestReport | None = None,
    vocab: Vocabulary | None = None,
) -> Handoff | None:
    row = await store.get_session(db.conn, session_id)
    if row is None:
        return None
    # Subagent runs get the deterministic handoff only: they never ground a session on their own, and an LLM
    # call per 30-second ping would cost more than it tells. A private project's session is never sent out.
    use_llm = use_llm and row.kind is not SessionKind.SUBAGENT and not privacy.covers(row.cwd)
    if use_llm and not await _within_budget(db, settings):
        use_llm = False
        if report is not None:
            report.budget_capped.append(session_id)
    # The markdown's words first: without the model nothing else needs the markdown (as large as the file),
    # so it goes before the file is parsed again and the two are never held together.
    idf = await idf_table(db.conn, row.markdown, vocab)
    markdown = row.markdown if use_llm else ""
    row = replace(row, markdown="")
    t = await asyncio.to_thread(_reparse_for_extraction, row, redactor, settings.tool_output_limit)
    if t is None:
        # The source file is gone: extract from what the database holds (header only).
        t = Transcript(
            session_id=row.session_id,
            kind=row.kind,
            source_path=row.source_path,
            parent_id=row.parent_id,
            cwd=row.cwd,
            git_branch=row.git_branch,
            title=row.title,
            model=row.model,
            started_at=row.started_at,
            ended_at=row.ended_at,
        )
    spent: list[Spend] = []
    h = await extract_handoff(
        t,
        markdown,
        use_llm=use_llm,
        model=settings.llm_model,
        env=settings.claude_env,
        timeout_s=settings.llm_timeout_s,
        idf=idf,
        on_spend=spent.append,
    )
    if spent:  # paid for whether or not the answer was used: in the ledger before anything else can fail
        async with db.write() as conn:
            for spend in spent:
                await record_spend(conn, row.session_id, spend)
    h.session_id, h.kind, h.parent_id = row.session_id, row.kind, row.parent_id
    if not h.date:
        h.date = row.started_at
    if not h.duration_min:
        h.duration_min = row.duration_min
    h = redacted(h, redactor.redact_obj)  # the stored fields too, not only the markdown
    markdown = redactor(to_markdown(h))
    before = await store.get_handoff(db.conn, h.session_id)
    write_handoff(settings.handoffs_dir, h.session_id, h.date, markdown, old_date=before.date if before else None)
    async with db.write() as conn:
        old = await store.get_handoff(conn, h.session_id)
        review, reviewed = (old.review, (old.reviewed_by, old.reviewed_at)) if old else ("pending", store.NOBODY)
        ts = await store.put_handoff(conn, h, markdown=markdown, review=review, reviewed=reviewed)
        # A linked session (a subagent, or a Codex rollout a Claude session caused) never grounds on its own.
        await index.index_handoff(
            conn,
            session_id=h.session_id,
            ts=ts,
            projects=h.projects,
            keywords=h.keywords,
            substance=h.substance,
            kind=SessionKind.SUBAGENT.value if h.parent_id else h.kind.value,
        )
        await store.set_extract_state(conn, h.session_id, "done")
    logger.info("extracted %s (%s)", h.session_id, h.source)
    return h


def _reparse_for_extraction(row: store.SessionRow, redactor: Redactor, limit: int) -> Transcript | None:
    # Parsing again costs one more read of the file but keeps memory flat on large ingests.
    path = Path(row.source_path)
    if not path.is_file():
        return None
    found = discover([path], claude_projects_dir=path.parent, codex_sessions_dir=path.parent)
    for src in found.files:
        try:
            parsed = parse_source(src, redactor, limit)
        except OSError:
            return None
        for t in parsed:
            if t.session_id == row.session_id:
                return t
    return None

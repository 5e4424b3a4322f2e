"""What a Claude Code session leaves in memory: its transcripts, its subagents' files and the Codex rollouts
it caused, ingested when it ends, and the handoff that comes of them. A private project's session
(memory.redact.privacy) leaves nothing."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from pathlib import Path

from memory import Memory, MemoryStoreError
from memory.redact import load_privacy
from relay.events import HandoffReady

__all__ = ["ingest_session", "rollout_session_id", "session_files"]

logger = logging.getLogger(__name__)


def session_files(claude_config_dir: Path, session_ids: Iterable[str], rollouts: Iterable[Path]) -> list[Path]:
    """The transcripts of these sessions (a resumed one may have several ids), their subagent files, and
    the rollouts that still exist."""
    root = claude_config_dir / "projects"
    found: list[Path] = []
    for sid in session_ids:
        found += sorted(root.glob(f"*/{sid}.jsonl"))
        found += sorted(root.glob(f"*/{sid}/subagents/*.jsonl"))
    return found + [p for p in rollouts if p.is_file()]


async def ingest_session(
    eywa: Memory, paths: list[Path], session_id: str, *, project_dir: Path | None = None
) -> HandoffReady | None:
    """Ingest ``paths``; the session's handoff when there is one. A memory error is logged, never raised:
    the run itself is over and done. Nothing of a session in a private project's ``project_dir`` is ingested
    (whether it was private when the session started or became so since)."""
    logger.debug("ingesting session %s from %s", session_id, paths)
    if not paths or not session_id:
        return None
    if load_privacy(eywa.settings).covers(project_dir):
        logger.info("session %s is in a private project: not ingested", session_id)
        return None
    try:
        report = await eywa.ingest(paths)
        view = await eywa.show(session_id)
    except MemoryStoreError as exc:
        logger.warning("could not ingest session %s: %s", session_id, exc)
        return None
    if view.handoff is None:
        return None
    capped = session_id in report.budget_capped
    return HandoffReady(session_id, view.handoff.headline, view.handoff.markdown, budget_capped=capped)


def rollout_session_id(path: Path) -> str:
    """Memory's id for a rollout: ``codex-<session_meta.payload.id>`` (the file name's uuid as a fallback)."""
    try:
        with path.open(encoding="utf-8") as fh:
            first = json.loads(fh.readline() or "{}")
    except (OSError, json.JSONDecodeError, UnicodeDecodeError):
        first = {}
    payload = first.get("payload") if isinstance(first, dict) else None
    raw = payload.get("id") if isinstance(payload, dict) else None
    if not raw:
        raw = "-".join(path.stem.split("-")[-5:])
    return f"codex-{raw}"

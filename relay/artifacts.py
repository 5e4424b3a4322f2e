"""Stage artifacts of an RPA run: ``$MACUPOS_HOME/runs/<run-id>/NN-<stage>[-rK].md``, one per stage.

Each file starts with a small front-matter header (engine, model, duration, tokens, cost, thread or
session id) so a person on a phone and a script can both read it; files are written atomically (a
temporary file renamed into place), so a reader never sees half a stage.
"""

from __future__ import annotations

import asyncio
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from memory.storage import write_atomic
from relay.errors import ArtifactError

__all__ = ["ArtifactHeader", "artifact_name", "new_run_id", "read_header", "store_artifact", "write_artifact"]

_SAFE = re.compile(r"[^a-z0-9-]+")
_FRONT = re.compile(r"\A---\n(.*?)\n---\n", re.DOTALL)


def new_run_id() -> str:
    """Sortable and unique enough for one owner: ``20250102-153012-a1b2c3``."""
    return f"{datetime.now(UTC):%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"


def artifact_name(index: int, stage: str, round_: int | None = None) -> str:
    """``03-audit-r1.md``: NN is the order in the run; rounds of a repeated stage get ``-rK``."""
    slug = _SAFE.sub("-", stage.lower()).strip("-") or "stage"
    suffix = f"-r{round_}" if round_ is not None else ""
    return f"{index:02d}-{slug}{suffix}.md"


@dataclass(frozen=True, slots=True)
class ArtifactHeader:
    run_id: str
    stage: str
    round: int
    engine: str  # claude | codex | relay (the report)
    model: str
    duration_s: float
    tokens: int
    cost_usd: float | None
    thread_id: str  # Codex thread or Claude session id
    ok: bool = True

    def lines(self) -> list[str]:
        cost = "unknown" if self.cost_usd is None else f"{self.cost_usd:.6f}"
        return [
            f"run: {self.run_id}",
            f"stage: {self.stage}",
            f"round: {self.round}",
            f"engine: {self.engine}",
            f"model: {self.model or 'default'}",
            f"duration_s: {self.duration_s:.3f}",
            f"tokens: {self.tokens}",
            f"cost_usd: {cost}",
            f"thread: {self.thread_id or '-'}",
            f"ok: {'true' if self.ok else 'false'}",
        ]


def write_artifact(run_dir: Path, name: str, header: ArtifactHeader, body: str) -> Path:
    """Write one stage file atomically; returns its path. Blocking: call through ``asyncio.to_thread``."""
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / name
    text = "---\n" + "\n".join(header.lines()) + "\n---\n\n" + body.rstrip() + "\n"
    write_atomic(path, text)
    return path


def read_header(path: Path) -> Mapping[str, str]:
    """The front-matter fields of an artifact as strings ({} when the file has none)."""
    match = _FRONT.match(path.read_text(encoding="utf-8"))
    if match is None:
        return {}
    fields: dict[str, str] = {}
    for line in match.group(1).splitlines():
        key, sep, value = line.partition(": ")
        if sep:
            fields[key.strip()] = value.strip()
    return fields


async def store_artifact(run_dir: Path, name: str, header: ArtifactHeader, body: str) -> Path:
    """:func:`write_artifact` off the event loop; a file system that refuses it is an ArtifactError."""
    try:
        return await asyncio.to_thread(write_artifact, run_dir, name, header, body)
    except OSError as exc:  # a full disk, a file where the runs folder should be
        raise ArtifactError(run_dir, exc.strerror or str(exc)) from exc

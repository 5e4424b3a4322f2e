"""Fixtures for memory tests: a private data home and copies of the transcript fixtures."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Sequence
from pathlib import Path

import pytest

from memory.facade import Eywa
from memory.settings import MemorySettings

# Public Claude Code sessions, kept in the repository (each folder's PROVENANCE.md says whose, under which licence).
TRANSCRIPTS = Path(__file__).resolve().parents[1] / "fixtures" / "transcripts"


@pytest.fixture
def settings(tmp_path: Path) -> MemorySettings:
    return MemorySettings(
        home=tmp_path / "home",
        claude_config_dir=tmp_path / "claude",
        codex_home=tmp_path / "codex",
        llm_enabled=False,
    )


@pytest.fixture
def transcripts(tmp_path: Path) -> Path:
    """A writable copy of tests/fixtures/transcripts."""
    dest = tmp_path / "transcripts"
    shutil.copytree(TRANSCRIPTS, dest)
    return dest


def offline_settings(home: Path) -> MemorySettings:
    """A memory in ``home`` (Claude's and Codex's folders inside it), its LLM off."""
    return MemorySettings(home=home, claude_config_dir=home / "claude", codex_home=home / "codex", llm_enabled=False)


def ingested_home(root: Path, names: Sequence[str], *, extra: dict[str, bytes] | None = None) -> Path:
    """``root/home``: a memory that has ingested (without an LLM) the named fixture transcripts, copied to
    ``root/src`` beside ``extra`` files (name: bytes). For module-scoped fixtures, outside any event loop."""
    src = root / "src"
    for name in names:
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(TRANSCRIPTS / name, src / name)
    for name, data in (extra or {}).items():
        (src / name).write_bytes(data)

    async def ingest() -> None:
        async with await Eywa.open(offline_settings(root / "home")) as eywa:
            await eywa.ingest([src], use_llm=False)

    asyncio.run(ingest())
    return root / "home"

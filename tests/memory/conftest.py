"""Fixtures for memory tests: a private data home and copies of the transcript fixtures."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

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

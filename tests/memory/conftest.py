"""Fixtures for memory tests: a private data home and copies of the shared transcript fixtures."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from memory.settings import MemorySettings

# The shared data sits beside the repository (here and in CI): <repo>/../shared/data.
SHARED = Path(__file__).resolve().parents[3] / "shared" / "data"
TRANSCRIPTS = SHARED / "transcripts"


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
    """A writable copy of ../shared/data/transcripts."""
    dest = tmp_path / "transcripts"
    shutil.copytree(TRANSCRIPTS, dest)
    return dest

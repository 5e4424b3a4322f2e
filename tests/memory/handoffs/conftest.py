"""Fixtures for the handoff tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from memory.facade import Eywa
from memory.settings import MemorySettings


@pytest.fixture
async def eywa(settings: MemorySettings, transcripts: Path) -> AsyncIterator[Eywa]:
    """The test's memory (``settings``) once it has ingested the claude_archive_mcp transcripts without an LLM:
    their handoffs wait for review, newest first."""
    async with await Eywa.open(settings) as memory:
        await memory.ingest([transcripts / "claude_archive_mcp"], use_llm=False)
        yield memory

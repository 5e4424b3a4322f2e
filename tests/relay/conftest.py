"""Fixtures for the relay: the OpenAI Responses API double and a private CODEX_HOME pointed at it."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from tests.doubles.openai import OpenAIDouble, codex_env, write_codex_config


@pytest.fixture
async def openai_double() -> AsyncIterator[OpenAIDouble]:
    """A started Responses API double (empty script: every turn answers "ok"); stopped after the test."""
    async with OpenAIDouble() as double:
        yield double


@pytest.fixture
def codex_home(openai_double: OpenAIDouble, tmp_path: Path) -> dict[str, str]:
    """Environment for the Codex CLI: a fresh ``CODEX_HOME`` whose config.toml sends every model call to
    ``openai_double`` (custom provider, no retries, analytics and features off, approvals never).
    """
    home = tmp_path / "home"
    home.mkdir()
    write_codex_config(home / ".codex", openai_double.base_url)
    return codex_env(home / ".codex", home)


@pytest.fixture
def codex_processes(codex_home: dict[str, str]) -> Callable[[], list[int]]:
    """Lists the live processes whose environment carries this test's ``CODEX_HOME`` (Linux /proc)."""
    needle = f"CODEX_HOME={codex_home['CODEX_HOME']}".encode()

    def scan() -> list[int]:
        found: list[int] = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                if needle in (entry / "environ").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
            except OSError:
                continue
        return found

    return scan

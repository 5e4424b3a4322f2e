"""Fixtures for the relay: the OpenAI Responses API double and a private CODEX_HOME pointed at it."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from memory.facade import Eywa
from memory.settings import MemorySettings
from relay.codex import CodexEngine
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


def processes_with(name: str, value: str) -> Callable[[], list[int]]:
    """A scan of the live processes whose environment carries ``name=value`` (Linux /proc). The tests' own,
    not relay.process's: a scan that missed processes would hide the ones the relay failed to kill."""
    needle = f"{name}={value}".encode()

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


@pytest.fixture
def codex_processes(codex_home: dict[str, str]) -> Callable[[], list[int]]:
    """Lists the live processes whose environment carries this test's ``CODEX_HOME``."""
    return processes_with("CODEX_HOME", codex_home["CODEX_HOME"])


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """An empty project folder (modules that need another one define their own)."""
    folder = tmp_path / "project"
    folder.mkdir()
    return folder


@pytest.fixture
async def engine(codex_home: dict[str, str]) -> AsyncIterator[CodexEngine]:
    """A Codex app server on the test's CODEX_HOME (the OpenAI double's), closed after the test."""
    async with CodexEngine(codex_home, None) as engine:
        yield engine


@pytest.fixture
def env(claude_cli_env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """The claude CLI's environment against the Anthropic double, with a memory home of the test's own."""
    # No retries: a scripted 500 must fail the run at once instead of backing off.
    return {**claude_cli_env, "CLAUDE_CODE_MAX_RETRIES": "0", "MACUPOS_HOME": str(tmp_path / "mhome")}


@pytest.fixture
async def eywa(env: dict[str, str], tmp_path: Path) -> AsyncIterator[Eywa]:
    settings = MemorySettings(
        home=Path(env["MACUPOS_HOME"]),
        claude_config_dir=Path(env["CLAUDE_CONFIG_DIR"]),
        codex_home=tmp_path / "codex",
        llm_enabled=False,
    )
    async with await Eywa.open(settings) as e:
        yield e

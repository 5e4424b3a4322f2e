"""Fixtures shared by every test package: the service doubles and the environment that points real clients at them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.doubles.anthropic import AnthropicDouble, cli_env


@pytest.fixture
async def anthropic_double() -> AsyncIterator[AnthropicDouble]:
    """A started Messages API double (empty script: every turn answers "ok"); stopped after the test."""
    async with AnthropicDouble() as double:
        yield double


@pytest.fixture
def claude_home(tmp_path: Path) -> Path:
    """A private HOME for the Claude Code CLI, so nothing touches the real ~/.claude."""
    home = tmp_path / "claude-home"
    home.mkdir()
    return home


@pytest.fixture
def claude_cli_env(anthropic_double: AnthropicDouble, claude_home: Path) -> dict[str, str]:
    """Environment for ``ClaudeAgentOptions(env=...)``: the bundled CLI talks only to ``anthropic_double``."""
    return cli_env(anthropic_double.base_url, str(claude_home))

"""A memory service (the real app under uvicorn, tests/service/conftest.py) and a client pointed at it:
the client's settings, its environment for a real `macupos` subprocess, and that subprocess."""

from __future__ import annotations

import os
import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import replace
from pathlib import Path

from memory.settings import MemorySettings
from tests.cli_env import REPO, arun_macupos
from tests.service.conftest import Server, running_service

__all__ = ["REPO", "blackhole", "client_env", "client_settings", "closed_port", "macupos", "remote_service"]


def client_settings(tmp_path: Path, url: str = "", key: str = "") -> MemorySettings:
    home = tmp_path / "client"
    return MemorySettings(
        home=home,
        claude_config_dir=home / "claude",
        codex_home=home / "codex",
        llm_enabled=False,
        memory_url=url,
        api_key=key,
    )


@asynccontextmanager
async def remote_service(tmp_path: Path, tenant: str = "alice") -> AsyncIterator[tuple[Server, MemorySettings]]:
    """A running service with a write key for ``tenant``, and a client's settings using it."""
    async with running_service(tmp_path / "server") as srv:
        key = await srv.add_key(tenant)
        yield srv, client_settings(tmp_path, srv.url, key)


def pointed(settings: MemorySettings, url: str) -> MemorySettings:
    return replace(settings, memory_url=url)


def client_env(settings: MemorySettings) -> dict[str, str]:
    """The environment of a `macupos` run with these settings (nothing of this machine's own)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MACUPOS_", "CLAUDE_", "ANTHROPIC_", "CODEX_"))}
    env |= {
        "HOME": str(settings.home.parent),
        "MACUPOS_HOME": str(settings.home),
        "CLAUDE_CONFIG_DIR": str(settings.claude_config_dir),
        "CODEX_HOME": str(settings.codex_home),
        "MACUPOS_MEMORY_LLM": "0",
    }
    if settings.memory_url:
        env |= {"MACUPOS_MEMORY_URL": settings.memory_url, "MACUPOS_API_KEY": settings.api_key}
    return env


async def macupos(env: dict[str, str], *args: str, stdin: bytes = b"", timeout_s: float = 120) -> tuple[int, str, str]:
    """`python -m macupos ARGS` as a real process (this loop keeps serving meanwhile); (status, out, err)."""
    return await arun_macupos(env, *args, stdin=stdin, timeout_s=timeout_s)


@contextmanager
def closed_port() -> Iterator[str]:
    """A 127.0.0.1 URL where nothing listens (the port stays reserved, so no other test takes it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


@contextmanager
def blackhole() -> Iterator[str]:
    """A 127.0.0.1 URL whose socket listens but never accepts or answers: connections hang."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"

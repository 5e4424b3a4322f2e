"""The environment a test gives a `macupos` process it starts: none of this machine's settings, its own folders."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["REPO", "cli_env"]

REPO = Path(__file__).resolve().parents[1]
# Whatever the person running the tests has set must not reach the process under test.
_THEIRS = ("MACUPOS_", "CLAUDE_", "ANTHROPIC_", "CODEX_", "TELEGRAM_")


def cli_env(macupos_home: Path, *, home: Path | None = None, **extra: str) -> dict[str, str]:
    """This process's environment without :data:`_THEIRS`, plus ``MACUPOS_HOME``, the memory's LLM off, the
    repository importable and, with ``home``, that ``HOME`` and ``claude``/``codex`` folders in it; then ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_THEIRS)}
    env |= {"MACUPOS_HOME": str(macupos_home), "MACUPOS_MEMORY_LLM": "0", "PYTHONPATH": str(REPO)}
    if home is not None:
        env |= {"HOME": str(home), "CLAUDE_CONFIG_DIR": str(home / "claude"), "CODEX_HOME": str(home / "codex")}
    return env | extra

"""`macupos memory hook EVENT` run as Claude Code runs it, for the tests that check what a hook does."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

__all__ = ["REPO", "run_hook"]

REPO = Path(__file__).resolve().parents[2]


def run_hook(event: str, payload: dict[str, Any], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The hook in a process of its own: the payload on stdin, stdout and stderr captured, bounded."""
    return subprocess.run(
        [sys.executable, "-m", "bot.cli", "memory", "hook", event],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=60,
        check=False,
    )

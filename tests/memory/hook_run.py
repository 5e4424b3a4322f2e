"""`macupos memory hook EVENT` run as Claude Code runs it, for the tests that check what a hook does."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from tests.cli_env import REPO

__all__ = ["run_hook"]


def run_hook(event: str, payload: dict[str, Any], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The hook in a process of its own: the payload on stdin, stdout and stderr captured, bounded."""
    return subprocess.run(
        [sys.executable, "-m", "macupos", "memory", "hook", event],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=60,
        check=False,
    )

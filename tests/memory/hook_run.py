"""`macupos memory hook EVENT` run as Claude Code runs it, for the tests that check what a hook does."""

from __future__ import annotations

import json
import subprocess
from typing import Any

from tests.cli_env import run_macupos

__all__ = ["run_hook"]


def run_hook(event: str, payload: dict[str, Any], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The hook in a process of its own: the payload on stdin, stdout and stderr captured, bounded."""
    return run_macupos(env, "memory", "hook", event, stdin=json.dumps(payload), timeout=60)

"""`python -m bot.cli …`: the way in that Claude Code hooks and MCP entries written before the `macupos`
command's root moved to macupos/ still run. It hands over to that root by name: the bot depends on no
composition root (tests/test_project_rules.py), and the root lives above it."""

from __future__ import annotations

import runpy

if __name__ == "__main__":
    runpy.run_module("macupos", run_name="__main__", alter_sys=True)

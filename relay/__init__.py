"""Agent sessions: Claude Code with Codex as a subagent (arrives with the relay issue)."""

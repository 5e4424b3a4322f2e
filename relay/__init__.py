"""Agent sessions: Claude Code with Codex as a subagent, Research → Plan → Audit, approvals, the cost ledger."""

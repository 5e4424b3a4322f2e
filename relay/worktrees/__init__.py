"""Git worktrees for agent sessions: one branch per session, each in its own worktree, merged or thrown away.

This package's surface is everything importers use (``from relay.worktrees import …``); the modules behind it
hold one concept each, and their docstrings say why each is built the way it is:

* ``git``: the bounded git runner (timeout, no prompt, editor or pager, the caller's environment without the
  variables that aim git at another repository) and WorktreeError.
* ``tree``: branch names, where worktrees live (``<repo>/.macupos/worktrees/<branch>``), ensure, list, discard.
* ``changes``: what a branch's work changed, uncommitted work included, without touching the agent's index.
* ``merge``: merging into base with conflicts found before anything is touched, push, and the resolve
  instruction for an agent.

Every function is synchronous (the bot runs them in a worker thread) and takes the environment git runs in
(``env=``): the relay never reads os.environ.
"""

from __future__ import annotations

from relay.worktrees.changes import DiffStat, FileChange, diff_stat, has_uncommitted, patch, unmerged_commits
from relay.worktrees.git import TIMEOUT_S, Git, WorktreeError
from relay.worktrees.merge import (
    FALLBACK_EMAIL,
    FALLBACK_NAME,
    PUSH_TIMEOUT_S,
    MergeResult,
    conflicts_by_trial,
    merge,
    push,
    remote_of,
    resolve_instruction,
)
from relay.worktrees.tree import (
    MAX_BRANCH_LEN,
    WORKTREES,
    Worktree,
    WorktreeInfo,
    current_branch,
    discard,
    ensure_worktree,
    list_worktrees,
    prepare_spare,
    valid_branch_name,
    worktree_path,
)

__all__ = [
    "FALLBACK_EMAIL",
    "FALLBACK_NAME",
    "MAX_BRANCH_LEN",
    "PUSH_TIMEOUT_S",
    "TIMEOUT_S",
    "WORKTREES",
    "DiffStat",
    "FileChange",
    "MergeResult",
    "Worktree",
    "WorktreeError",
    "WorktreeInfo",
    "current_branch",
    "diff_stat",
    "discard",
    "ensure_worktree",
    "has_uncommitted",
    "list_worktrees",
    "merge",
    "patch",
    "prepare_spare",
    "push",
    "remote_of",
    "resolve_instruction",
    "unmerged_commits",
    "valid_branch_name",
    "worktree_path",
]

# tests/relay/test_worktrees.py drives the git runner and the git < 2.38 conflict finder directly, by these names.
_Git = Git
_conflicts_by_trial = conflicts_by_trial

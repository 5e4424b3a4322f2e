"""What a branch's work changed, read without touching the agent's worktree: stats, patch, counts.

Why: the agent's index is never touched. The stats and the patch of a branch's work include what the agent did
not commit (agents often don't), snapshotted through a temporary index seeded from a copy of the worktree's own
(its stat data spares re-hashing unchanged files). The snapshot writes blobs (loose objects, which gc collects)
and changes no ref, index or file. The patch is plain text (binary files show as "differ"): it is for reading on
a phone, not for ``git apply``.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from relay.worktrees.git import Git, WorktreeError, ref
from relay.worktrees.tree import check_name, has_branch, porcelain_status, probe_worktree, worktree_path

__all__ = ["DiffStat", "FileChange", "diff_stat", "has_uncommitted", "patch", "unmerged_commits"]


@dataclass(frozen=True)
class FileChange:
    path: str
    added: int  # 0/0 for a binary file
    removed: int


@dataclass(frozen=True)
class DiffStat:
    files: tuple[FileChange, ...]
    added: int
    removed: int


def _snapshot(git: Git, repo: Path, branch: str, base: str) -> tuple[str, str]:
    """(merge-base with base, tree of the branch's work): the worktree's files as ``git add -A`` would stage
    them, through a temporary index; the branch's tip when it has no worktree."""
    path = worktree_path(repo, branch)
    check_name(base, "base branch")
    probe = probe_worktree(git, path)
    if probe is None:
        if not has_branch(git, repo, branch):
            raise WorktreeError(f"there is no branch {branch}", branch=branch)
        tip, tree = ref(branch), f"{ref(branch)}^{{tree}}"
    else:
        with tempfile.TemporaryDirectory(prefix="macupos-index-") as tmp:
            index = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
            try:  # copy2 keeps the index's mtime, so git's racy-entry check stays right
                shutil.copy2(probe.index_file, index["GIT_INDEX_FILE"])
            except FileNotFoundError:
                git(path, "read-tree", "HEAD", extra=index, branch=branch)
            git(path, "add", "-A", extra=index, branch=branch)
            tree = git(path, "write-tree", extra=index, branch=branch).out.strip()
        tip = git(path, "rev-parse", "--verify", "HEAD", branch=branch).out.strip()
    run = git(repo, "merge-base", ref(base), tip, ok=(0, 1), branch=branch)
    if run.rc != 0:
        raise WorktreeError(f"{branch} and {base} share no history", branch=branch)
    return run.out.strip(), tree


def diff_stat(repo: Path, branch: str, base: str, *, env: Mapping[str, str]) -> DiffStat:
    """Lines added and removed per file by the branch's whole work (commits, uncommitted and untracked files)
    since its merge-base with base."""
    git = Git(env)
    start, tree = _snapshot(git, repo, branch, base)
    out = git(repo, "diff", "--numstat", "-z", "--no-renames", "--no-ext-diff", "--no-textconv", start, tree).out
    files = []
    for record in filter(None, out.split("\0")):
        added, removed, name = record.split("\t", 2)
        files.append(FileChange(name, int(added) if added != "-" else 0, int(removed) if removed != "-" else 0))
    return DiffStat(tuple(files), sum(f.added for f in files), sum(f.removed for f in files))


def patch(repo: Path, branch: str, base: str, *, env: Mapping[str, str]) -> str:
    """The plain-text patch of the branch's whole work (same scope as diff_stat; binary files as "differ")."""
    git = Git(env)
    start, tree = _snapshot(git, repo, branch, base)
    flags = ("--no-color", "--no-ext-diff", "--no-renames", "--src-prefix=a/", "--dst-prefix=b/")
    return git(repo, "diff", *flags, start, tree, branch=branch).out


def unmerged_commits(repo: Path, branch: str, base: str, *, env: Mapping[str, str]) -> int:
    """How many commits on branch base does not have."""
    check_name(branch)
    check_name(base, "base branch")
    return int(Git(env)(repo, "rev-list", "--count", f"{ref(base)}..{ref(branch)}", branch=branch).out)


def has_uncommitted(repo: Path, branch: str, *, env: Mapping[str, str]) -> bool:
    """Whether branch's worktree has changes not committed (untracked files included); False without one."""
    git, path = Git(env), worktree_path(repo, branch)
    return probe_worktree(git, path) is not None and bool(porcelain_status(git, path))

"""A spare worktree, checked out ahead of time, so that a new branch's session does not wait for a checkout of
the whole tree (on a repository of 10,000 files that is 0.3-0.6 s of disk writes, most of the time a new
``@branch`` takes before its first model request).

The spare is ``<repo>/.macupos/worktrees/.spare`` (no branch can have that name: a component may not start with
"."), detached at the base's HEAD. Taking it is ``git worktree move`` (a rename) and ``git checkout -b``, which
writes only the files the base changed since the spare was made. It is made again in the background after a
new branch took it (relay callers: bot.lane_router), so it costs one more checkout's worth of disk per project.
A spare that is missing, dirty or cannot move is simply not used: the branch is checked out as before.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from pathlib import Path

from relay.worktrees.git import PARALLEL, Git, WorktreeError

__all__ = ["SPARE", "admin_lock", "make_spare", "take_spare"]

SPARE = ".spare"
_locks: dict[Path, threading.RLock] = {}
_guard = threading.Lock()


def admin_lock(repo: Path) -> threading.RLock:
    """One change at a time to a repository's worktree records (add, move, prune, remove), in this process.

    Why: ``git worktree prune`` run while another thread's ``git worktree add`` is half done deletes the new
    worktree's record, and the add fails ("could not open .git/worktrees/<name>/gitdir"): the spare made in the
    background raced a new branch's checkout that way. Reentrant: taking the spare happens inside a checkout."""
    with _guard:
        return _locks.setdefault(repo.resolve(), threading.RLock())


def _top(git: Git, path: Path) -> str | None:
    """The spare's HEAD commit, when ``path`` is a clean worktree's top; else None."""
    if not path.is_dir():
        return None
    run = git(path, "rev-parse", "--show-toplevel", "HEAD", check=False)
    lines = run.out.splitlines()
    if run.rc != 0 or len(lines) != 2 or Path(lines[0]) != path.resolve():
        return None
    if git(path, "--no-optional-locks", "status", "--porcelain", check=False).out.strip():
        return None  # someone used it: not a spare any more
    return lines[1]


def make_spare(repo: Path, spare: Path, commit: str, *, env: Mapping[str, str]) -> bool:
    """Make (or bring up to ``commit``) the spare worktree at ``spare``; False when it cannot be made."""
    git = Git(env)
    with admin_lock(repo):
        head = _top(git, spare)
        try:
            if head is None:
                if spare.exists():
                    return False  # something else is there: leave it
                git(repo, "worktree", "prune")
                git(repo, "worktree", "add", "--quiet", "--detach", str(spare), commit, config=PARALLEL)
            elif head != commit:
                git(spare, "checkout", "--quiet", "--detach", commit, config=PARALLEL)
        except WorktreeError:
            return False
        return True


def take_spare(repo: Path, spare: Path, path: Path, branch: str, commit: str, *, env: Mapping[str, str]) -> bool:
    """Turn the spare into ``branch``'s worktree at ``path``, a new branch at ``commit``; False (nothing changed)
    when there is no usable spare."""
    git = Git(env)
    with admin_lock(repo):
        if _top(git, spare) is None:
            return False
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            git(repo, "worktree", "move", str(spare), str(path), branch=branch)
        except (WorktreeError, OSError):
            return False
        git(path, "checkout", "--quiet", "-b", branch, commit, branch=branch, config=PARALLEL)
        return True

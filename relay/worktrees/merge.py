"""Bringing a branch's work home: merge into base, find conflicts first, push base, ask an agent to resolve.

Why: merges never half-happen in the owner's checkout. The main checkout must be on base and clean; conflicts are
found with ``git merge-tree --write-tree`` (an in-memory merge, git >= 2.38) before anything is touched, and git
itself aborts, untouched, when a merge would overwrite untracked files (older git, such as Ubuntu 22.04's 2.34,
gets a trial merge in a throw-away worktree instead). The commit that saves the agent's uncommitted work skips
hooks (``--no-verify``): it records the work as it is, and a refusing hook would strand it. When neither git
config nor the environment names who commits, a fallback identity does, so a merge never stops for want of one.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from relay.worktrees.git import PARALLEL, Git, WorktreeError, ref, tail
from relay.worktrees.tree import (
    check_name,
    current_branch,
    has_branch,
    porcelain_status,
    probe_worktree,
    worktree_path,
)

__all__ = [
    "FALLBACK_EMAIL",
    "FALLBACK_NAME",
    "PUSH_TIMEOUT_S",
    "MergeResult",
    "conflicts_by_trial",
    "merge",
    "push",
    "remote_of",
    "resolve_instruction",
]

PUSH_TIMEOUT_S = 120.0
FALLBACK_NAME = "Macupos"
FALLBACK_EMAIL = "macupos@localhost"

_UNMERGED = frozenset({"DD", "AU", "UD", "UA", "DU", "AA", "UU"})


@dataclass(frozen=True)
class MergeResult:
    # "up-to-date": base already had all of branch's work; nothing changed.
    outcome: Literal["fast-forward", "merge-commit", "conflict", "up-to-date"]
    files: tuple[str, ...]  # conflicted files, or the files the merge changed in base
    commit: str  # base's HEAD after the call (unchanged on conflict)


def _identity(git: Git, repo: Path) -> dict[str, str]:
    """Author/committer variables for the parts of the identity neither git config nor the environment gives."""
    found = git(repo, "config", "--get-regexp", r"^user\.(name|email)$", ok=(0, 1)).out
    have = {line.split(" ", 1)[0] for line in found.splitlines()}
    extra: dict[str, str] = {}
    if "user.name" not in have:
        extra.update(GIT_AUTHOR_NAME=FALLBACK_NAME, GIT_COMMITTER_NAME=FALLBACK_NAME)
    if "user.email" not in have:
        extra.update(GIT_AUTHOR_EMAIL=FALLBACK_EMAIL, GIT_COMMITTER_EMAIL=FALLBACK_EMAIL)
    return {k: v for k, v in extra.items() if k not in git.env}


def _run_merge(git: Git, repo: Path, branch: str, args: Sequence[str], identity: Mapping[str, str]) -> None:
    run = git(repo, "merge", "--quiet", *args, check=False, extra=identity, branch=branch)
    if run.rc == 0:
        return
    text = run.err + run.out
    if "untracked working tree files would be" in text:
        names = [line[1:] for line in text.splitlines() if line.startswith("\t")]
        raise WorktreeError(
            f"merging {branch} would overwrite untracked files in the main checkout: {', '.join(names)}; "
            "move them away and merge again",
            branch=branch,
            detail=tail(text),
            files=names,
        )
    if git(repo, "rev-parse", "--quiet", "--verify", "MERGE_HEAD", ok=(0, 1)).rc == 0:
        git(repo, "merge", "--abort", check=False)
    raise WorktreeError(f"git merge of {branch} failed: {tail(text)}", branch=branch, detail=tail(text))


def _conflicts(git: Git, repo: Path, branch: str, base: str) -> tuple[str, ...] | None:
    """The files merging branch into base would conflict in (None: a clean merge), found in memory."""
    args = ("merge-tree", "--write-tree", "--name-only", "--no-messages", "-z", ref(base), ref(branch))
    run = git(repo, *args, check=False, branch=branch)
    if run.rc == 0:
        return None
    if run.rc == 1:
        names = run.out.split("\0")[1:]
        return tuple(dict.fromkeys(names[: names.index("")] if "" in names else names))
    if "write-tree" in run.err:  # git < 2.38
        return conflicts_by_trial(git, repo, branch, base)
    raise WorktreeError(f"git merge-tree failed: {tail(run.err)}", branch=branch, detail=tail(run.err))


def conflicts_by_trial(git: Git, repo: Path, branch: str, base: str) -> tuple[str, ...] | None:
    """_conflicts for git < 2.38: a trial merge in a throw-away detached worktree."""
    with tempfile.TemporaryDirectory(prefix="macupos-merge-") as tmp:
        trial = Path(tmp) / "trial"
        git(repo, "worktree", "add", "--quiet", "--detach", str(trial), ref(base), branch=branch, config=PARALLEL)
        try:
            run = git(trial, "merge", "--no-commit", "--no-ff", ref(branch), check=False, extra=_identity(git, repo))
            if run.rc == 0:
                return None
            out = git(trial, "diff", "--name-only", "-z", "--diff-filter=U").out
            if not out:
                raise WorktreeError(f"trial merge of {branch} failed: {tail(run.err)}", branch=branch)
            return tuple(filter(None, out.split("\0")))
        finally:
            git(repo, "worktree", "remove", "--force", str(trial), check=False)
            git(repo, "worktree", "prune", check=False)


def merge(repo: Path, branch: str, base: str, *, env: Mapping[str, str]) -> MergeResult:
    """Merge the branch's whole work into base in the main checkout, which must be on base and clean. Work the
    worktree has not committed is committed on the branch first. On conflict nothing in the main checkout
    changes. The branch and its worktree stay; discard them after."""
    git, path = Git(env), worktree_path(repo, branch)
    check_name(base, "base branch")
    main = current_branch(repo, env=env)
    if main != base:
        raise WorktreeError(f"the main checkout is on {main}, not {base}: switch it to {base} first", branch=branch)
    dirty = [name for _, name in porcelain_status(git, repo, "--untracked-files=no")]
    if dirty:
        shown = ", ".join(dirty[:5])
        raise WorktreeError(
            f"the main checkout has uncommitted changes ({shown}): commit or stash them first", files=dirty
        )
    if branch == base or not has_branch(git, repo, branch):
        raise WorktreeError(f"there is no session branch {branch} to merge", branch=branch)
    identity = _identity(git, repo)
    probe = probe_worktree(git, path)
    if probe is not None:
        if probe.head != ref(branch):
            raise WorktreeError(f"{branch}'s worktree is not on {branch} (a rebase in progress?)", branch=branch)
        changes = porcelain_status(git, path)
        unresolved = [name for xy, name in changes if xy in _UNMERGED]
        if unresolved:
            raise WorktreeError(
                f"{branch}'s worktree has unresolved conflicts in {', '.join(unresolved)}",
                branch=branch,
                files=unresolved,
            )
        if changes:
            git(path, "add", "-A", branch=branch)
            message = f"Work of @{branch} (uncommitted when merged)"
            git(path, "commit", "--quiet", "--no-verify", "-m", message, extra=identity, branch=branch)
    before = git(repo, "rev-parse", "--verify", "HEAD").out.strip()
    ancestor = ("merge-base", "--is-ancestor")
    if git(repo, *ancestor, ref(branch), ref(base), ok=(0, 1)).rc == 0:
        return MergeResult("up-to-date", (), before)
    outcome: Literal["fast-forward", "merge-commit"] = "fast-forward"
    if git(repo, *ancestor, ref(base), ref(branch), ok=(0, 1)).rc == 0:
        _run_merge(git, repo, branch, ["--ff-only", ref(branch)], identity)
    else:
        conflicts = _conflicts(git, repo, branch, base)
        if conflicts is not None:
            return MergeResult("conflict", conflicts, before)
        args = ["--no-ff", "--no-edit", "-m", f"Merge branch '{branch}'", ref(branch)]
        _run_merge(git, repo, branch, args, identity)
        outcome = "merge-commit"
    after = git(repo, "rev-parse", "--verify", "HEAD").out.strip()
    changed = git(repo, "diff", "--name-only", "-z", "--no-renames", before, after).out
    return MergeResult(outcome, tuple(filter(None, changed.split("\0"))), after)


def remote_of(repo: Path, base: str, *, env: Mapping[str, str]) -> str | None:
    """The remote to push base to: its upstream's remote, else "origin", else the only remote, else None."""
    git = Git(env)
    configured = git(repo, "config", "--get", f"branch.{base}.remote", ok=(0, 1)).out.strip()
    if configured and configured != ".":
        return configured
    remotes = git(repo, "remote").out.split()
    if "origin" in remotes:
        return "origin"
    return remotes[0] if len(remotes) == 1 else None


def push(repo: Path, base: str, *, env: Mapping[str, str]) -> str:
    """``git push <remote> <base>`` to remote_of(repo, base); returns a one-line summary."""
    check_name(base, "base branch")
    remote = remote_of(repo, base, env=env)
    if remote is None:
        raise WorktreeError(f"{repo} has no remote to push {base} to")
    spec = f"{ref(base)}:{ref(base)}"
    run = Git(env)(repo, "push", "--porcelain", remote, spec, check=False, timeout=PUSH_TIMEOUT_S)
    lines = [line.split("\t") for line in run.out.splitlines() if line.count("\t") == 2]
    flag, summary = (lines[0][0], lines[0][2]) if lines else ("", "")
    if run.rc != 0:
        detail = tail(run.err or run.out)
        raise WorktreeError(f"push of {base} to {remote} failed: {summary or detail}", detail=detail)
    if flag == "=":
        return f"{base} is already up to date on {remote}"
    return f"pushed {base} to {remote} ({'new branch' if flag == '*' else summary})"


def resolve_instruction(branch: str, base: str, files: Sequence[str]) -> str:
    """What to tell an agent session in branch's worktree so it merges base in and resolves the conflicts."""
    listed = "\n".join(f"- {name}" for name in files)
    return (
        f"Merging {branch} into {base} conflicts in these files:\n{listed}\n\n"
        f"Here, in {branch}'s worktree, run `git merge {base}` and resolve the conflicts. For each file keep the "
        f"intent of both sides — what this branch set out to do and what changed on {base} meanwhile — rather "
        "than taking one side wholesale, and leave no conflict markers. If the project has tests, run them and "
        "fix what the merge broke. Then `git add` the files and conclude with `git commit --no-edit`. "
        f"Do not rebase, reset or force-push, and do not change {base} itself."
    )

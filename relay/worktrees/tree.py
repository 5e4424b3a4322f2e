"""Where worktrees live and what they are named: made, reused, listed and thrown away.

Why it is built this way:

* Where: ``<repo>/.macupos/worktrees/<branch>``. A worktree's path maps to its project by string prefix alone,
  so memory files a session whose cwd is under ``<P>/.macupos/worktrees/`` under project P, and a private
  project's path prefix covers its worktrees with no extra rule. ``.macupos/.gitignore`` holds ``*``, so the
  main checkout's ``git status`` never sees the worktrees (and tools that honour .gitignore skip them).
* Speed: ensure_worktree is on the message → first model request path. Reusing a worktree costs one git call;
  creating one is ``git worktree add`` (the checkout itself, with parallel checkout on every core) plus a few
  ref look-ups; nothing else walks the tree. Writing the files is the cost: it is bound by the disk.
* Names are checked in pure Python (git's check-ref-format rules) before any path is built from them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from relay.worktrees.git import PARALLEL, Git, WorktreeError, ref
from relay.worktrees.spare import SPARE, admin_lock, make_spare, take_spare

__all__ = [
    "MAX_BRANCH_LEN",
    "WORKTREES",
    "Probe",
    "Worktree",
    "WorktreeInfo",
    "check_name",
    "current_branch",
    "discard",
    "ensure_ignored",
    "ensure_worktree",
    "has_branch",
    "list_worktrees",
    "main_branch",
    "porcelain_status",
    "prepare_spare",
    "probe_worktree",
    "valid_branch_name",
    "worktree_path",
]

WORKTREES = Path(".macupos") / "worktrees"
MAX_BRANCH_LEN = 100

_FORBIDDEN = frozenset(" ~^:?*[\\\x7f")


@dataclass(frozen=True)
class Worktree:
    repo: Path
    branch: str
    path: Path
    base: str
    created: bool  # False: an existing worktree was reused


@dataclass(frozen=True)
class WorktreeInfo:
    path: Path
    branch: str | None  # None: detached HEAD (a rebase in progress, …)
    head: str  # commit id
    prunable: bool  # its folder was deleted by hand


class Probe(NamedTuple):
    head: str  # "refs/heads/<branch>", or "HEAD" when detached
    index_file: Path


def valid_branch_name(name: str) -> bool:
    """Git's check-ref-format rules for a branch name (pure Python), a length cap, and never "@" or "HEAD"."""
    if not name or len(name) > MAX_BRANCH_LEN or name in ("@", "HEAD"):
        return False
    if name.startswith(("-", "/")) or name.endswith(("/", ".", ".lock")):
        return False
    if ".." in name or "//" in name or "@{" in name or any(c < " " or c in _FORBIDDEN for c in name):
        return False
    return not any(part.startswith(".") or part.endswith(".lock") for part in name.split("/"))


def check_name(name: str, what: str = "branch") -> None:
    if not valid_branch_name(name):
        raise WorktreeError(f"{name!r} is not a valid {what} name", branch=name)


def has_branch(git: Git, repo: Path, branch: str) -> bool:
    return git(repo, "show-ref", "--verify", "--quiet", ref(branch), ok=(0, 1)).rc == 0


def main_branch(git: Git, repo: Path) -> str | None:
    """The main checkout's branch; None when its HEAD is detached."""
    run = git(repo, "symbolic-ref", "--quiet", "HEAD", ok=(0, 1))
    head = run.out.strip()
    return head.removeprefix("refs/heads/") if run.rc == 0 and head.startswith("refs/heads/") else None


def current_branch(repo: Path, *, env: Mapping[str, str]) -> str:
    """The branch the main checkout is on (WorktreeError when detached or not a git repository)."""
    branch = main_branch(Git(env), repo)
    if branch is None:
        raise WorktreeError(f"the checkout at {repo} is not on a branch (detached HEAD)")
    return branch


def worktree_path(repo: Path, branch: str) -> Path:
    """Where ``branch``'s worktree lives: ``<repo>/.macupos/worktrees/<branch>`` (``a/b`` → nested folders)."""
    check_name(branch)
    return repo / WORKTREES / branch


def probe_worktree(git: Git, path: Path) -> Probe | None:
    """HEAD and index of the worktree whose top is ``path``; None when ``path`` is not a worktree's top."""
    if not path.is_dir():
        return None
    run = git(path, "rev-parse", "--show-toplevel", "--git-path", "index", "--symbolic-full-name", "HEAD", check=False)
    lines = run.out.splitlines()
    if run.rc != 0 or len(lines) != 3 or Path(lines[0]) != path.resolve():
        return None
    return Probe(lines[2], path / lines[1])


def porcelain_status(git: Git, cwd: Path, *flags: str) -> list[tuple[str, str]]:
    """(XY, path) of each ``git status --porcelain -z`` record (a rename's old path is skipped)."""
    records, found = iter(git(cwd, "--no-optional-locks", "status", "--porcelain", "-z", *flags).out.split("\0")), []
    for record in records:
        if record:
            found.append((record[:2], record[3:]))
            if record[0] in "RC":
                next(records, None)
    return found


def ensure_ignored(repo: Path) -> None:
    """``<repo>/.macupos/.gitignore`` holding ``*`` (an existing one is left as it is)."""
    folder = repo / WORKTREES.parts[0]
    folder.mkdir(exist_ok=True)
    try:
        fd = os.open(folder / ".gitignore", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    except FileExistsError:
        return
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write("*\n")


def ensure_worktree(repo: Path, branch: str, base: str | None = None, *, env: Mapping[str, str]) -> Worktree:
    """``branch``'s worktree, reused when it exists, else added (from the existing branch, or a new branch at
    base's HEAD; base defaults to the main checkout's branch). A worktree left detached (a rebase in progress)
    is reused as it is."""
    git, path = Git(env), worktree_path(repo, branch)
    if base is not None:
        check_name(base, "base branch")
    probe = probe_worktree(git, path)
    if probe is not None:
        if probe.head not in (ref(branch), "HEAD"):
            other = probe.head.removeprefix("refs/heads/")
            raise WorktreeError(f"{path} has {other} checked out, not {branch}", branch=branch)
        ensure_ignored(repo)
        return Worktree(repo, branch, path, base or current_branch(repo, env=env), created=False)
    main = main_branch(git, repo)
    base = base or main
    if base is None:
        raise WorktreeError(f"the checkout at {repo} is not on a branch: name a base for {branch}", branch=branch)
    if branch == main:
        raise WorktreeError(f"{branch} is the main checkout's own branch; a session needs a branch of its own")
    if path.is_dir() and any(path.iterdir()):
        raise WorktreeError(f"{path} exists and is not {branch}'s worktree; move it away first", branch=branch)
    ensure_ignored(repo)
    with admin_lock(repo):
        return _add_worktree(git, repo, branch, base, path)


def _add_worktree(git: Git, repo: Path, branch: str, base: str, path: Path) -> Worktree:
    """``branch``'s new worktree at ``path`` (holding the repository's admin lock)."""
    git(repo, "worktree", "prune")  # forgets worktrees whose folder was deleted by hand
    if has_branch(git, repo, branch):
        git(repo, "worktree", "add", "--quiet", str(path), branch, branch=branch, config=PARALLEL)
        return Worktree(repo, branch, path, base, created=True)
    start = git(repo, "rev-parse", "--verify", "--quiet", f"{ref(base)}^{{commit}}", ok=(0, 1))
    if start.rc != 0:
        if not git(repo, "for-each-ref", "--count=1", "refs/heads/").out.strip():
            raise WorktreeError(f"{repo} has no commits yet: make a first commit to branch from", branch=branch)
        raise WorktreeError(f"there is no branch {base} to start {branch} from", branch=branch)
    if take_spare(
        repo, repo / WORKTREES / SPARE, path, branch, start.out.strip(), env=git.env
    ):  # checked out ahead of time: a rename, no checkout
        return Worktree(repo, branch, path, base, created=True)
    add = ("worktree", "add", "--quiet", "-b", branch, str(path), start.out.strip())
    git(repo, *add, branch=branch, config=PARALLEL)
    return Worktree(repo, branch, path, base, created=True)


def prepare_spare(repo: Path, base: str, *, env: Mapping[str, str]) -> bool:
    """Check out a spare worktree at ``base``'s HEAD ahead of time, so the next new branch takes it at the cost of a
    rename (relay.worktrees.spare); False when it cannot be made."""
    start = Git(env)(repo, "rev-parse", "--verify", "--quiet", f"{ref(base)}^{{commit}}", ok=(0, 1))
    if start.rc != 0:
        return False
    ensure_ignored(repo)
    return make_spare(repo, repo / WORKTREES / SPARE, start.out.strip(), env=env)


def discard(repo: Path, branch: str, *, env: Mapping[str, str]) -> None:
    """Throw away branch and its worktree, merged or not (also when the folder was deleted by hand)."""
    git, path = Git(env), worktree_path(repo, branch)
    if main_branch(git, repo) == branch:
        raise WorktreeError(f"{branch} is the main checkout's branch; it cannot be discarded", branch=branch)
    with admin_lock(repo):
        git(repo, "worktree", "prune")
        if probe_worktree(git, path) is not None:
            git(repo, "worktree", "remove", "--force", str(path), branch=branch)
    if has_branch(git, repo, branch):
        git(repo, "branch", "--quiet", "-D", branch, branch=branch)
    root = repo / WORKTREES
    for folder in path.parents:  # the empty folders a nested name (a/b) left
        if folder == root or root not in folder.parents:
            break
        try:
            folder.rmdir()
        except OSError:
            break


def list_worktrees(repo: Path, *, env: Mapping[str, str]) -> list[WorktreeInfo]:
    """The worktrees under ``<repo>/.macupos/worktrees``, from ``git worktree list --porcelain``."""
    root = (repo / WORKTREES).resolve()
    found: list[WorktreeInfo] = []
    fields: dict[str, str] = {}
    for field in Git(env)(repo, "worktree", "list", "--porcelain", "-z").out.split("\0"):
        if field:
            key, _, value = field.partition(" ")
            fields[key] = value
            continue
        top = Path(fields.get("worktree", "/"))
        if "worktree" in fields and root in top.resolve().parents and top.name != SPARE:
            branch = fields["branch"].removeprefix("refs/heads/") if "branch" in fields else None
            found.append(WorktreeInfo(Path(fields["worktree"]), branch, fields.get("HEAD", ""), "prunable" in fields))
        fields = {}
    return found

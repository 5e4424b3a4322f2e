"""Git worktrees for agent sessions: one branch per session, each in its own worktree, merged or thrown away.

Why it is built this way:

* Where: ``<repo>/.macupos/worktrees/<branch>``. A worktree's path maps to its project by string prefix alone,
  so memory files a session whose cwd is under ``<P>/.macupos/worktrees/`` under project P, and a private
  project's path prefix covers its worktrees with no extra rule. ``.macupos/.gitignore`` holds ``*``, so the
  main checkout's ``git status`` never sees the worktrees (and tools that honour .gitignore skip them).
* Speed: ensure_worktree is on the message → first model request path. Reusing a worktree costs one git call;
  creating one is ``git worktree add`` (the checkout itself, with parallel checkout on every core) plus a few
  ref look-ups; nothing else walks the tree. Writing the files is the cost: it is bound by the disk.
* The agent's index is never touched: the stats and the patch of a branch's work include what the agent did not
  commit (agents often don't), snapshotted through a temporary index seeded from a copy of the worktree's own
  (its stat data spares re-hashing unchanged files). The snapshot writes blobs (loose objects, which gc
  collects) and changes no ref, index or file. The patch is plain text (binary files show as "differ"): it is
  for reading on a phone, not for ``git apply``.
* Merges never half-happen in the owner's checkout: the main checkout must be on base and clean; conflicts are
  found with ``git merge-tree --write-tree`` (an in-memory merge, git >= 2.38) before anything is touched, and
  git itself aborts, untouched, when a merge would overwrite untracked files (older git, such as Ubuntu 22.04's
  2.34, gets a trial merge in a throw-away worktree instead). The commit that saves the agent's uncommitted
  work skips hooks (``--no-verify``): it records the work as it is, and a refusing hook would strand it.
* Sync and bounded: each call is a subprocess with a timeout, no terminal (its own session, so ssh cannot prompt
  either), no editor and no pager; the bot runs these functions in a worker thread.
* Every function that runs git takes the environment git runs in (``env=``, the bot's ``RelaySettings.env``):
  the relay never reads os.environ. Variables that would aim git at another repository are dropped from it.
* Names are local branch names and are always passed to git as ``refs/heads/<name>`` where git takes a
  revision, so a tag of the same name cannot be picked instead.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, NamedTuple

from relay.errors import RelayError

__all__ = [
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
    "push",
    "remote_of",
    "resolve_instruction",
    "unmerged_commits",
    "valid_branch_name",
    "worktree_path",
]

WORKTREES = Path(".macupos") / "worktrees"
TIMEOUT_S = 60.0
PUSH_TIMEOUT_S = 120.0
MAX_BRANCH_LEN = 100
FALLBACK_NAME = "Macupos"
FALLBACK_EMAIL = "macupos@localhost"

# Parallel checkout, one worker per core: creating a worktree is mostly writing its files (2x faster on 2 cores).
_PARALLEL = ("checkout.workers=0",)
_FORBIDDEN = frozenset(" ~^:?*[\\\x7f")
# Inherited from a git hook or a shell inside a repository, these would point every call at the wrong repo.
_REPO_ENV = frozenset(
    {"GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_COMMON_DIR", "GIT_PREFIX"}
    | {"GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_NAMESPACE"}
)


class WorktreeError(RelayError):
    """A worktree operation was refused or git failed; ``detail`` is git's stderr tail, ``files`` the paths at
    issue (dirty files, untracked files in a merge's way)."""

    def __init__(self, message: str, *, branch: str = "", detail: str = "", files: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.branch = branch
        self.detail = detail
        self.files = tuple(files)


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


@dataclass(frozen=True)
class MergeResult:
    # "up-to-date": base already had all of branch's work; nothing changed.
    outcome: Literal["fast-forward", "merge-commit", "conflict", "up-to-date"]
    files: tuple[str, ...]  # conflicted files, or the files the merge changed in base
    commit: str  # base's HEAD after the call (unchanged on conflict)


class _Run(NamedTuple):
    rc: int
    out: str
    err: str


class _Probe(NamedTuple):
    head: str  # "refs/heads/<branch>", or "HEAD" when detached
    index_file: Path


def _tail(text: str, lines: int = 6) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])[-800:]


class _Git:
    """git run in the caller's environment (the relay never reads os.environ: the edge passes it), without
    the variables that would aim it at another repository, with no prompt, editor or pager, in the C locale
    (its messages are parsed), and killed with its process group past a timeout."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = {k: v for k, v in env.items() if k not in _REPO_ENV}
        self.env.update(GIT_TERMINAL_PROMPT="0", LC_ALL="C", GIT_EDITOR="true", GIT_MERGE_AUTOEDIT="no")
        self.env.update(GIT_PAGER="cat")

    def __call__(
        self,
        cwd: Path,
        *args: str,
        ok: tuple[int, ...] = (0,),
        check: bool = True,
        extra: Mapping[str, str] | None = None,
        timeout: float = TIMEOUT_S,
        branch: str = "",
        config: Sequence[str] = (),
    ) -> _Run:
        """``git -C cwd [-c config]… args``; WorktreeError unless it exits with a code in ``ok`` (or not check)."""
        try:
            proc = subprocess.Popen(
                ["git", "-C", str(cwd), *(a for item in config for a in ("-c", item)), *args],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env={**self.env, **(extra or {})},
                start_new_session=True,  # no controlling terminal: ssh cannot prompt either
                encoding="utf-8",
                errors="surrogateescape",
            )
        except OSError as exc:
            raise WorktreeError(f"cannot run git: {exc}", branch=branch) from exc
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise WorktreeError(f"git {args[0]} took over {timeout:g} s and was stopped", branch=branch) from None
        if check and proc.returncode not in ok:
            detail = _tail(err or out)
            if "not a git repository" in detail:
                raise WorktreeError(f"{cwd} is not a git repository", branch=branch, detail=detail)
            raise WorktreeError(f"git {args[0]} failed: {detail}", branch=branch, detail=detail)
        return _Run(proc.returncode, out, err)


def _ref(branch: str) -> str:
    return f"refs/heads/{branch}"


def valid_branch_name(name: str) -> bool:
    """Git's check-ref-format rules for a branch name (pure Python), a length cap, and never "@" or "HEAD"."""
    if not name or len(name) > MAX_BRANCH_LEN or name in ("@", "HEAD"):
        return False
    if name.startswith(("-", "/")) or name.endswith(("/", ".", ".lock")):
        return False
    if ".." in name or "//" in name or "@{" in name or any(c < " " or c in _FORBIDDEN for c in name):
        return False
    return not any(part.startswith(".") or part.endswith(".lock") for part in name.split("/"))


def _check_name(name: str, what: str = "branch") -> None:
    if not valid_branch_name(name):
        raise WorktreeError(f"{name!r} is not a valid {what} name", branch=name)


def _has_branch(git: _Git, repo: Path, branch: str) -> bool:
    return git(repo, "show-ref", "--verify", "--quiet", _ref(branch), ok=(0, 1)).rc == 0


def _main_branch(git: _Git, repo: Path) -> str | None:
    """The main checkout's branch; None when its HEAD is detached."""
    run = git(repo, "symbolic-ref", "--quiet", "HEAD", ok=(0, 1))
    ref = run.out.strip()
    return ref.removeprefix("refs/heads/") if run.rc == 0 and ref.startswith("refs/heads/") else None


def current_branch(repo: Path, *, env: Mapping[str, str]) -> str:
    """The branch the main checkout is on (WorktreeError when detached or not a git repository)."""
    branch = _main_branch(_Git(env), repo)
    if branch is None:
        raise WorktreeError(f"the checkout at {repo} is not on a branch (detached HEAD)")
    return branch


def worktree_path(repo: Path, branch: str) -> Path:
    """Where ``branch``'s worktree lives: ``<repo>/.macupos/worktrees/<branch>`` (``a/b`` → nested folders)."""
    _check_name(branch)
    return repo / WORKTREES / branch


def _probe(git: _Git, path: Path) -> _Probe | None:
    """HEAD and index of the worktree whose top is ``path``; None when ``path`` is not a worktree's top."""
    if not path.is_dir():
        return None
    run = git(path, "rev-parse", "--show-toplevel", "--git-path", "index", "--symbolic-full-name", "HEAD", check=False)
    lines = run.out.splitlines()
    if run.rc != 0 or len(lines) != 3 or Path(lines[0]) != path.resolve():
        return None
    return _Probe(lines[2], path / lines[1])


def _status(git: _Git, cwd: Path, *flags: str) -> list[tuple[str, str]]:
    """(XY, path) of each ``git status --porcelain -z`` record (a rename's old path is skipped)."""
    records, found = iter(git(cwd, "--no-optional-locks", "status", "--porcelain", "-z", *flags).out.split("\0")), []
    for record in records:
        if record:
            found.append((record[:2], record[3:]))
            if record[0] in "RC":
                next(records, None)
    return found


def _ensure_ignored(repo: Path) -> None:
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
    git, path = _Git(env), worktree_path(repo, branch)
    if base is not None:
        _check_name(base, "base branch")
    probe = _probe(git, path)
    if probe is not None:
        if probe.head not in (_ref(branch), "HEAD"):
            other = probe.head.removeprefix("refs/heads/")
            raise WorktreeError(f"{path} has {other} checked out, not {branch}", branch=branch)
        _ensure_ignored(repo)
        return Worktree(repo, branch, path, base or current_branch(repo, env=env), created=False)
    main = _main_branch(git, repo)
    base = base or main
    if base is None:
        raise WorktreeError(f"the checkout at {repo} is not on a branch: name a base for {branch}", branch=branch)
    if branch == main:
        raise WorktreeError(f"{branch} is the main checkout's own branch; a session needs a branch of its own")
    if path.is_dir() and any(path.iterdir()):
        raise WorktreeError(f"{path} exists and is not {branch}'s worktree; move it away first", branch=branch)
    _ensure_ignored(repo)
    git(repo, "worktree", "prune")  # forgets worktrees whose folder was deleted by hand
    if _has_branch(git, repo, branch):
        git(repo, "worktree", "add", "--quiet", str(path), branch, branch=branch, config=_PARALLEL)
        return Worktree(repo, branch, path, base, created=True)
    start = git(repo, "rev-parse", "--verify", "--quiet", f"{_ref(base)}^{{commit}}", ok=(0, 1))
    if start.rc != 0:
        if not git(repo, "for-each-ref", "--count=1", "refs/heads/").out.strip():
            raise WorktreeError(f"{repo} has no commits yet: make a first commit to branch from", branch=branch)
        raise WorktreeError(f"there is no branch {base} to start {branch} from", branch=branch)
    add = ("worktree", "add", "--quiet", "-b", branch, str(path), start.out.strip())
    git(repo, *add, branch=branch, config=_PARALLEL)
    return Worktree(repo, branch, path, base, created=True)


def _snapshot(git: _Git, repo: Path, branch: str, base: str) -> tuple[str, str]:
    """(merge-base with base, tree of the branch's work): the worktree's files as ``git add -A`` would stage
    them, through a temporary index; the branch's tip when it has no worktree."""
    path = worktree_path(repo, branch)
    _check_name(base, "base branch")
    probe = _probe(git, path)
    if probe is None:
        if not _has_branch(git, repo, branch):
            raise WorktreeError(f"there is no branch {branch}", branch=branch)
        tip, tree = _ref(branch), f"{_ref(branch)}^{{tree}}"
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
    run = git(repo, "merge-base", _ref(base), tip, ok=(0, 1), branch=branch)
    if run.rc != 0:
        raise WorktreeError(f"{branch} and {base} share no history", branch=branch)
    return run.out.strip(), tree


def diff_stat(repo: Path, branch: str, base: str, *, env: Mapping[str, str]) -> DiffStat:
    """Lines added and removed per file by the branch's whole work (commits, uncommitted and untracked files)
    since its merge-base with base."""
    git = _Git(env)
    start, tree = _snapshot(git, repo, branch, base)
    out = git(repo, "diff", "--numstat", "-z", "--no-renames", "--no-ext-diff", "--no-textconv", start, tree).out
    files = []
    for record in filter(None, out.split("\0")):
        added, removed, name = record.split("\t", 2)
        files.append(FileChange(name, int(added) if added != "-" else 0, int(removed) if removed != "-" else 0))
    return DiffStat(tuple(files), sum(f.added for f in files), sum(f.removed for f in files))


def patch(repo: Path, branch: str, base: str, *, env: Mapping[str, str]) -> str:
    """The plain-text patch of the branch's whole work (same scope as diff_stat; binary files as "differ")."""
    git = _Git(env)
    start, tree = _snapshot(git, repo, branch, base)
    flags = ("--no-color", "--no-ext-diff", "--no-renames", "--src-prefix=a/", "--dst-prefix=b/")
    return git(repo, "diff", *flags, start, tree, branch=branch).out


def unmerged_commits(repo: Path, branch: str, base: str, *, env: Mapping[str, str]) -> int:
    """How many commits on branch base does not have."""
    _check_name(branch)
    _check_name(base, "base branch")
    return int(_Git(env)(repo, "rev-list", "--count", f"{_ref(base)}..{_ref(branch)}", branch=branch).out)


def has_uncommitted(repo: Path, branch: str, *, env: Mapping[str, str]) -> bool:
    """Whether branch's worktree has changes not committed (untracked files included); False without one."""
    git, path = _Git(env), worktree_path(repo, branch)
    return _probe(git, path) is not None and bool(_status(git, path))


def remote_of(repo: Path, base: str, *, env: Mapping[str, str]) -> str | None:
    """The remote to push base to: its upstream's remote, else "origin", else the only remote, else None."""
    git = _Git(env)
    configured = git(repo, "config", "--get", f"branch.{base}.remote", ok=(0, 1)).out.strip()
    if configured and configured != ".":
        return configured
    remotes = git(repo, "remote").out.split()
    if "origin" in remotes:
        return "origin"
    return remotes[0] if len(remotes) == 1 else None


def _identity(git: _Git, repo: Path) -> dict[str, str]:
    """Author/committer variables for the parts of the identity neither git config nor the environment gives."""
    found = git(repo, "config", "--get-regexp", r"^user\.(name|email)$", ok=(0, 1)).out
    have = {line.split(" ", 1)[0] for line in found.splitlines()}
    extra: dict[str, str] = {}
    if "user.name" not in have:
        extra.update(GIT_AUTHOR_NAME=FALLBACK_NAME, GIT_COMMITTER_NAME=FALLBACK_NAME)
    if "user.email" not in have:
        extra.update(GIT_AUTHOR_EMAIL=FALLBACK_EMAIL, GIT_COMMITTER_EMAIL=FALLBACK_EMAIL)
    return {k: v for k, v in extra.items() if k not in git.env}


def _run_merge(git: _Git, repo: Path, branch: str, args: Sequence[str], identity: Mapping[str, str]) -> None:
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
            detail=_tail(text),
            files=names,
        )
    if git(repo, "rev-parse", "--quiet", "--verify", "MERGE_HEAD", ok=(0, 1)).rc == 0:
        git(repo, "merge", "--abort", check=False)
    raise WorktreeError(f"git merge of {branch} failed: {_tail(text)}", branch=branch, detail=_tail(text))


def _conflicts(git: _Git, repo: Path, branch: str, base: str) -> tuple[str, ...] | None:
    """The files merging branch into base would conflict in (None: a clean merge), found in memory."""
    args = ("merge-tree", "--write-tree", "--name-only", "--no-messages", "-z", _ref(base), _ref(branch))
    run = git(repo, *args, check=False, branch=branch)
    if run.rc == 0:
        return None
    if run.rc == 1:
        names = run.out.split("\0")[1:]
        return tuple(dict.fromkeys(names[: names.index("")] if "" in names else names))
    if "write-tree" in run.err:  # git < 2.38
        return _conflicts_by_trial(git, repo, branch, base)
    raise WorktreeError(f"git merge-tree failed: {_tail(run.err)}", branch=branch, detail=_tail(run.err))


def _conflicts_by_trial(git: _Git, repo: Path, branch: str, base: str) -> tuple[str, ...] | None:
    """_conflicts for git < 2.38: a trial merge in a throw-away detached worktree."""
    with tempfile.TemporaryDirectory(prefix="macupos-merge-") as tmp:
        trial = Path(tmp) / "trial"
        git(repo, "worktree", "add", "--quiet", "--detach", str(trial), _ref(base), branch=branch, config=_PARALLEL)
        try:
            run = git(trial, "merge", "--no-commit", "--no-ff", _ref(branch), check=False, extra=_identity(git, repo))
            if run.rc == 0:
                return None
            out = git(trial, "diff", "--name-only", "-z", "--diff-filter=U").out
            if not out:
                raise WorktreeError(f"trial merge of {branch} failed: {_tail(run.err)}", branch=branch)
            return tuple(filter(None, out.split("\0")))
        finally:
            git(repo, "worktree", "remove", "--force", str(trial), check=False)
            git(repo, "worktree", "prune", check=False)


_UNMERGED = frozenset({"DD", "AU", "UD", "UA", "DU", "AA", "UU"})


def merge(repo: Path, branch: str, base: str, *, env: Mapping[str, str]) -> MergeResult:
    """Merge the branch's whole work into base in the main checkout, which must be on base and clean. Work the
    worktree has not committed is committed on the branch first. On conflict nothing in the main checkout
    changes. The branch and its worktree stay; discard them after."""
    git, path = _Git(env), worktree_path(repo, branch)
    _check_name(base, "base branch")
    main = current_branch(repo, env=env)
    if main != base:
        raise WorktreeError(f"the main checkout is on {main}, not {base}: switch it to {base} first", branch=branch)
    dirty = [name for _, name in _status(git, repo, "--untracked-files=no")]
    if dirty:
        shown = ", ".join(dirty[:5])
        raise WorktreeError(
            f"the main checkout has uncommitted changes ({shown}): commit or stash them first", files=dirty
        )
    if branch == base or not _has_branch(git, repo, branch):
        raise WorktreeError(f"there is no session branch {branch} to merge", branch=branch)
    identity = _identity(git, repo)
    probe = _probe(git, path)
    if probe is not None:
        if probe.head != _ref(branch):
            raise WorktreeError(f"{branch}'s worktree is not on {branch} (a rebase in progress?)", branch=branch)
        changes = _status(git, path)
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
    if git(repo, *ancestor, _ref(branch), _ref(base), ok=(0, 1)).rc == 0:
        return MergeResult("up-to-date", (), before)
    outcome: Literal["fast-forward", "merge-commit"] = "fast-forward"
    if git(repo, *ancestor, _ref(base), _ref(branch), ok=(0, 1)).rc == 0:
        _run_merge(git, repo, branch, ["--ff-only", _ref(branch)], identity)
    else:
        conflicts = _conflicts(git, repo, branch, base)
        if conflicts is not None:
            return MergeResult("conflict", conflicts, before)
        args = ["--no-ff", "--no-edit", "-m", f"Merge branch '{branch}'", _ref(branch)]
        _run_merge(git, repo, branch, args, identity)
        outcome = "merge-commit"
    after = git(repo, "rev-parse", "--verify", "HEAD").out.strip()
    changed = git(repo, "diff", "--name-only", "-z", "--no-renames", before, after).out
    return MergeResult(outcome, tuple(filter(None, changed.split("\0"))), after)


def discard(repo: Path, branch: str, *, env: Mapping[str, str]) -> None:
    """Throw away branch and its worktree, merged or not (also when the folder was deleted by hand)."""
    git, path = _Git(env), worktree_path(repo, branch)
    if _main_branch(git, repo) == branch:
        raise WorktreeError(f"{branch} is the main checkout's branch; it cannot be discarded", branch=branch)
    git(repo, "worktree", "prune")
    if _probe(git, path) is not None:
        git(repo, "worktree", "remove", "--force", str(path), branch=branch)
    if _has_branch(git, repo, branch):
        git(repo, "branch", "--quiet", "-D", branch, branch=branch)
    root = repo / WORKTREES
    for folder in path.parents:  # the empty folders a nested name (a/b) left
        if folder == root or root not in folder.parents:
            break
        try:
            folder.rmdir()
        except OSError:
            break


def push(repo: Path, base: str, *, env: Mapping[str, str]) -> str:
    """``git push <remote> <base>`` to remote_of(repo, base); returns a one-line summary."""
    _check_name(base, "base branch")
    remote = remote_of(repo, base, env=env)
    if remote is None:
        raise WorktreeError(f"{repo} has no remote to push {base} to")
    spec = f"{_ref(base)}:{_ref(base)}"
    run = _Git(env)(repo, "push", "--porcelain", remote, spec, check=False, timeout=PUSH_TIMEOUT_S)
    lines = [line.split("\t") for line in run.out.splitlines() if line.count("\t") == 2]
    flag, summary = (lines[0][0], lines[0][2]) if lines else ("", "")
    if run.rc != 0:
        detail = _tail(run.err or run.out)
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


def list_worktrees(repo: Path, *, env: Mapping[str, str]) -> list[WorktreeInfo]:
    """The worktrees under ``<repo>/.macupos/worktrees``, from ``git worktree list --porcelain``."""
    root = (repo / WORKTREES).resolve()
    found: list[WorktreeInfo] = []
    fields: dict[str, str] = {}
    for field in _Git(env)(repo, "worktree", "list", "--porcelain", "-z").out.split("\0"):
        if field:
            key, _, value = field.partition(" ")
            fields[key] = value
            continue
        if "worktree" in fields and root in Path(fields["worktree"]).resolve().parents:
            branch = fields["branch"].removeprefix("refs/heads/") if "branch" in fields else None
            found.append(WorktreeInfo(Path(fields["worktree"]), branch, fields.get("HEAD", ""), "prunable" in fields))
        fields = {}
    return found

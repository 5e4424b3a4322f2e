"""Optional git sync of the facts folder: commit local events, merge the remote's, push; never prompt, never hang.

A folder is synced only when it is the top level of its own git repository, has a remote, and holds
nothing but the facts layout; a folder that looks like a code repository is refused. Event logs are
one file per origin and replay is idempotent, so a merge cannot conflict in meaning: ``events/*.jsonl``
merge as a union of lines, and the regenerated snapshot is never merged line by line (our side is
kept, then the engine rewrites it after replaying what the pull brought).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import subprocess
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import NamedTuple

from memory.errors import MemoryStoreError, SyncConflictError, SyncError, SyncRefusedError, SyncTimeoutError
from memory.facts.synclayout import (
    EVENTS,
    SNAPSHOT,
    ensure_lines,
    few,
    foreign_local,
    foreign_tracked,
    looks_like_code,
    repair_lines,
    repair_tail,
)

__all__ = [
    "GitSync",
    "SyncConflictError",
    "SyncError",
    "SyncOutcome",
    "SyncRefusedError",
    "SyncState",
    "SyncStatus",
    "SyncTimeoutError",
]

logger = logging.getLogger(__name__)

_IGNORE_LINES = (".lock", "*.lock", ".origin", "backups/", "*.bak", "*.bak-*", "*.tmp", ".DS_Store")
_ATTRIBUTE_LINES = (
    "events/*.jsonl merge=union",
    f"{SNAPSHOT} -merge",
    ".gitignore merge=union",
    ".gitattributes merge=union",
)
# The whole facts layout: anything else at the top means the folder is not (only) ours.
_REGENERATED = frozenset({SNAPSHOT})
_KILL_WAIT_S = 5.0
# `env` adds to the inherited environment, so the library itself never reads os.environ.
_ENV = ("env", "GIT_TERMINAL_PROMPT=0", "GIT_MERGE_AUTOEDIT=no", "GIT_EDITOR=true", "LC_ALL=C")
# Unattended: no editor, no hooks (a hook may prompt or run code), no signing (a passphrase would prompt).
_CONFIG = ("-c", "core.editor=true", "-c", "core.hooksPath=/dev/null", "-c", "commit.gpgsign=false")
_IDENTITY_NAME, _IDENTITY_EMAIL = ("-c", "user.name=macupos"), ("-c", "user.email=macupos@localhost")


class SyncState(StrEnum):
    READY = "ready"
    MISSING = "missing"
    NOT_A_REPO = "not-a-repo"
    NO_REMOTE = "no-remote"
    DETACHED = "detached-head"
    REFUSED = "refused"


@dataclass(frozen=True, slots=True)
class SyncStatus:
    folder: Path
    state: SyncState
    reason: str
    remote: str | None = None
    branch: str | None = None
    remote_branch: str | None = None
    has_upstream: bool = False

    @property
    def eligible(self) -> bool:
        return self.state is SyncState.READY


@dataclass(frozen=True, slots=True)
class SyncOutcome:
    """What one sync step did; all False when the folder is not eligible (see ``status.reason``)."""

    status: SyncStatus
    committed: bool = False
    pulled: bool = False
    pushed: bool = False
    repaired: tuple[str, ...] = ()


class _Result(NamedTuple):
    returncode: int
    stdout: str
    stderr: str


class GitSync:
    """Syncs one facts folder with its git remote; one instance per folder, steps never overlap."""

    def __init__(
        self,
        folder: Path,
        *,
        push_every_s: float = 600,
        pull_every_s: float = 1800,
        git: str = "git",
        on_pulled: Callable[[], Awaitable[object]] | None = None,
        timeout_s: float = 60,
    ) -> None:
        self._folder = Path(folder)
        self._push_every_s = push_every_s
        self._pull_every_s = pull_every_s
        self._git_bin = git
        self._on_pulled = on_pulled
        self._timeout_s = timeout_s
        self._identity: tuple[str, ...] = ()
        self._lock = asyncio.Lock()

    # -- eligibility -------------------------------------------------------------------------------

    def check(self) -> SyncStatus:
        """Say whether the folder can be synced, and why not; raises SyncError only when git itself fails."""
        folder = self._folder
        if not folder.is_dir():
            return SyncStatus(folder, SyncState.MISSING, f"{folder} does not exist")
        try:
            foreign = foreign_local(folder)
        except OSError as exc:
            raise SyncError(f"cannot list {folder}", stderr=str(exc)) from exc
        if foreign:
            return SyncStatus(folder, SyncState.REFUSED, looks_like_code(foreign))
        top = self._git_blocking("rev-parse", "--show-toplevel", ok=(0, 128))
        if top.returncode:
            return SyncStatus(folder, SyncState.NOT_A_REPO, f"{folder} is not a git repository (run `git init` there)")
        if Path(top.stdout.strip()).resolve() != folder.resolve():
            reason = f"the repository root {top.stdout.strip()} is above the facts folder, not the folder itself"
            return SyncStatus(folder, SyncState.REFUSED, reason)
        head = self._git_blocking("symbolic-ref", "--quiet", "--short", "HEAD", ok=(0, 1))
        if head.returncode:
            return SyncStatus(folder, SyncState.DETACHED, "HEAD is detached; check out a branch")
        branch = head.stdout.strip()
        remotes = self._git_blocking("remote").stdout.split()
        if not remotes:
            return SyncStatus(folder, SyncState.NO_REMOTE, "the repository has no remote (git remote add origin URL)")
        configured = self._config(f"branch.{branch}.remote")
        remote = configured if configured in remotes else ("origin" if "origin" in remotes else sorted(remotes)[0])
        merge_ref = self._config(f"branch.{branch}.merge") if configured == remote else None
        remote_branch = merge_ref.removeprefix("refs/heads/") if merge_ref else branch
        # A fixed identity only where none is configured: the owner's own stays on their commits.
        name, email = self._config("user.name"), self._config("user.email")
        self._identity = (() if name else _IDENTITY_NAME) + (() if email else _IDENTITY_EMAIL)
        reason = f"syncs branch {branch} with {remote}/{remote_branch}"
        return SyncStatus(folder, SyncState.READY, reason, remote, branch, remote_branch, merge_ref is not None)

    def _config(self, key: str) -> str | None:
        # Without our own -c identity, or we would read it back as the owner's.
        value = self._git_blocking("config", "--get", key, ok=(0, 1), own_identity=False).stdout.strip()
        return value or None

    # -- the three steps ---------------------------------------------------------------------------

    async def push_once(self) -> SyncOutcome:
        """Commit local changes and push them; if the remote moved on, merge it first and push again."""
        return await self._step(pull=False, push=True)

    async def pull_once(self) -> SyncOutcome:
        """Commit local changes (a merge needs a clean tree) and merge the remote's; does not push."""
        return await self._step(pull=True, push=False)

    async def sync_once(self) -> SyncOutcome:
        """Commit local changes, merge the remote's, push the result."""
        return await self._step(pull=True, push=True)

    async def run(self, stop: asyncio.Event) -> None:
        """Sync at start, then push every push_every_s and pull (a full sync) every pull_every_s until stop is set."""
        loop = asyncio.get_running_loop()
        next_pull = loop.time()
        next_push = next_pull + self._push_every_s
        while not stop.is_set():
            now = loop.time()
            if now >= next_pull:
                keep_going = await self._guarded(self.sync_once)
                next_pull, next_push = now + self._pull_every_s, now + self._push_every_s
            elif now >= next_push:
                keep_going = await self._guarded(self.push_once)
                next_push = now + self._push_every_s
            else:
                keep_going = True
            if not keep_going:
                return
            delay = max(0.0, min(next_pull, next_push) - loop.time())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=delay)

    async def _guarded(self, step: Callable[[], Awaitable[SyncOutcome]]) -> bool:
        """Run one step for the loop: a failure is logged and retried next time; a refusal ends the loop."""
        try:
            outcome = await step()
        except SyncRefusedError as exc:
            logger.error("facts sync stopped: %s", exc)
            return False
        except MemoryStoreError as exc:  # SyncError, or the engine's replay failing: retry at the next tick
            logger.warning("facts sync failed: %s", exc)
            return True
        if not outcome.status.eligible:
            logger.debug("facts sync skipped: %s", outcome.status.reason)
        return True

    # -- pieces ------------------------------------------------------------------------------------

    async def _step(self, *, pull: bool, push: bool) -> SyncOutcome:
        async with self._lock:
            status = await self._status()
            if not status.eligible:
                return SyncOutcome(status)
            repaired = await self._prepare()
            committed = await self._commit()
            pulled = pushed = False
            if pull:
                pulled, more = await self._pull(status)
                repaired += more
            if push:
                result = await self._push(status)
                if result is None:  # the remote moved on since we last fetched: merge it, then push once more
                    again, more = await self._pull(status)
                    pulled, repaired = pulled or again, repaired + more
                    result = await self._push(status)
                if result is None:
                    raise SyncError(f"{status.remote} kept moving while we pushed; the next sync retries")
                pushed = result
            return SyncOutcome(status, committed, pulled, pushed, repaired)

    async def _status(self) -> SyncStatus:
        status = await asyncio.to_thread(self.check)
        if status.state is SyncState.REFUSED:
            raise SyncRefusedError(self._folder, status.reason)
        return status

    async def _prepare(self) -> tuple[str, ...]:
        """Write the ignore and attribute files, drop a merge a killed sync left behind, cut torn event lines."""
        await asyncio.to_thread(ensure_lines, self._folder / ".gitignore", _IGNORE_LINES)
        await asyncio.to_thread(ensure_lines, self._folder / ".gitattributes", _ATTRIBUTE_LINES)
        if (await self._git("rev-parse", "--quiet", "--verify", "MERGE_HEAD", ok=(0, 1))).returncode == 0:
            await self._git("merge", "--abort")
        events = self._folder / EVENTS
        logs = sorted(events.glob("*.jsonl")) if events.is_dir() else []
        return tuple([f"{EVENTS}/{p.name}" for p in logs if await asyncio.to_thread(repair_tail, p)])

    async def _commit(self, message: str = "facts: sync") -> bool:
        await self._git("add", "--all")
        if (await self._git("diff", "--cached", "--quiet", ok=(0, 1))).returncode == 0:
            return False
        await self._git("commit", "--quiet", "--no-verify", "-m", message)
        return True

    async def _head(self) -> str | None:
        head = await self._git("rev-parse", "--quiet", "--verify", "HEAD^{commit}", ok=(0, 1))
        return head.stdout.strip() if head.returncode == 0 else None

    async def _pull(self, status: SyncStatus) -> tuple[bool, tuple[str, ...]]:
        """Fetch and merge the remote branch; returns whether anything new came and which logs were repaired."""
        remote, remote_branch = str(status.remote), str(status.remote_branch)
        await self._git("fetch", "--quiet", "--no-tags", remote)
        ref = f"refs/remotes/{remote}/{remote_branch}"
        found = await self._git("rev-parse", "--quiet", "--verify", f"{ref}^{{commit}}", ok=(0, 1))
        if found.returncode:
            return False, ()  # the remote is still empty: nothing to merge
        before = await self._head()
        if before and (await self._git("merge-base", "--is-ancestor", ref, "HEAD", ok=(0, 1))).returncode == 0:
            return False, ()
        await self._check_remote_tree(ref)
        message = f"facts: merge {remote}/{remote_branch}"
        merge = ("merge", "--quiet", "--no-edit", "--allow-unrelated-histories", "-m", message, ref)
        merged = await self._git(*merge, ok=range(256))
        if merged.returncode:
            await self._settle_conflicts(merged)
        repaired = await self._repair_merged(before)
        if self._on_pulled is not None:
            await self._on_pulled()
        # The repairs, and the snapshot the engine may have rewritten, go out with this sync, not the next.
        await self._commit("facts: after merge")
        return True, repaired

    async def _check_remote_tree(self, ref: str) -> None:
        """Refuse to merge a remote that is not a facts repository (a code repo, or one tracking .origin)."""
        listing = await self._git("ls-tree", "-r", "--name-only", "-z", ref)
        bad = foreign_tracked(p for p in listing.stdout.split("\0") if p)
        if bad:
            raise SyncRefusedError(self._folder, f"the remote {ref} is not a facts repository: it tracks {few(bad)}")

    async def _settle_conflicts(self, merged: _Result) -> None:
        """Keep our side of a regenerated file (the engine rewrites it); any other conflict aborts the merge."""
        listing = await self._git("diff", "--name-only", "--diff-filter=U", "-z")
        paths = [p for p in listing.stdout.split("\0") if p]
        if not paths or not set(paths) <= _REGENERATED:
            if (await self._git("rev-parse", "--quiet", "--verify", "MERGE_HEAD", ok=(0, 1))).returncode == 0:
                await self._git("merge", "--abort")
            if paths:
                raise SyncConflictError(paths, merged.stderr + merged.stdout)
            raise SyncError("git merge failed", returncode=merged.returncode, stderr=merged.stderr + merged.stdout)
        for path in paths:
            if (self._folder / path).exists():
                await self._git("add", "--", path)
            else:
                await self._git("rm", "--quiet", "--cached", "--", path)
        await self._git("commit", "--quiet", "--no-verify", "--no-edit", "--cleanup=strip")

    async def _repair_merged(self, before: str | None) -> tuple[str, ...]:
        """Drop torn or corrupt lines from the event logs the merge changed."""
        if before is None:
            changed = await self._git("ls-tree", "-r", "--name-only", "-z", "HEAD", "--", EVENTS)
        else:
            changed = await self._git("diff", "--name-only", "-z", before, "HEAD", "--", EVENTS)
        repaired: list[str] = []
        for path in sorted(p for p in changed.stdout.split("\0") if p.endswith(".jsonl")):
            file = self._folder / path
            if file.is_file() and await asyncio.to_thread(repair_lines, file):
                repaired.append(path)
        return tuple(repaired)

    async def _push(self, status: SyncStatus) -> bool | None:
        """Push HEAD; False when there was nothing to push, None when the remote has commits we lack."""
        head = await self._head()
        if head is None:
            return False
        ref = f"refs/remotes/{status.remote}/{status.remote_branch}"
        tracking = await self._git("rev-parse", "--quiet", "--verify", ref, ok=(0, 1))
        if tracking.returncode == 0 and tracking.stdout.strip() == head:
            return False
        upstream = () if status.has_upstream else ("--set-upstream",)
        target = f"HEAD:refs/heads/{status.remote_branch}"
        pushed = await self._git("push", "--porcelain", *upstream, str(status.remote), target, ok=range(256))
        if pushed.returncode == 0:
            return True
        if any(line.startswith("!") and "rejected" in line for line in pushed.stdout.splitlines()):
            return None
        raise SyncError("git push failed", returncode=pushed.returncode, stderr=pushed.stderr + pushed.stdout)

    # -- running git -------------------------------------------------------------------------------

    def _argv(self, args: Sequence[str], own_identity: bool = True) -> list[str]:
        identity = self._identity if own_identity else ()
        return [*_ENV, self._git_bin, "-C", str(self._folder), *_CONFIG, *identity, *args]

    async def _git(self, *args: str, ok: Iterable[int] = (0,)) -> _Result:
        argv, shown = self._argv(args), (self._git_bin, *args)
        try:
            # A session of its own: no terminal to prompt on, and one signal kills git with its helpers.
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as exc:
            raise SyncError("cannot start git", command=shown, stderr=str(exc)) from exc
        try:
            out, err = await asyncio.wait_for(proc.communicate(), timeout=self._timeout_s)
        except TimeoutError:
            _kill_group(proc.pid)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(proc.wait(), timeout=_KILL_WAIT_S)
            self._drop_index_lock()
            raise SyncTimeoutError(shown, self._timeout_s) from None
        except asyncio.CancelledError:
            _kill_group(proc.pid)
            raise
        return _checked(shown, int(proc.returncode or 0), out, err, ok)

    def _git_blocking(self, *args: str, ok: Iterable[int] = (0,), own_identity: bool = True) -> _Result:
        argv, shown = self._argv(args, own_identity), (self._git_bin, *args)
        try:
            proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
            )
        except OSError as exc:
            raise SyncError("cannot start git", command=shown, stderr=str(exc)) from exc
        with proc:
            try:
                out, err = proc.communicate(timeout=self._timeout_s)
            except subprocess.TimeoutExpired:
                _kill_group(proc.pid)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=_KILL_WAIT_S)
                self._drop_index_lock()
                raise SyncTimeoutError(shown, self._timeout_s) from None
        return _checked(shown, proc.returncode, out, err, ok)

    def _drop_index_lock(self) -> None:
        # The git we killed cannot remove its own lock; left there, it would fail every later sync.
        with contextlib.suppress(OSError):
            (self._folder / ".git" / "index.lock").unlink(missing_ok=True)


def _checked(shown: Sequence[str], returncode: int, out: bytes, err: bytes, ok: Iterable[int]) -> _Result:
    result = _Result(returncode, out.decode(errors="replace"), err.decode(errors="replace"))
    if returncode not in ok:
        raise SyncError(f"{' '.join(shown)} failed", command=shown, returncode=returncode, stderr=result.stderr)
    return result


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)

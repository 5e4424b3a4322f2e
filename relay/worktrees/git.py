"""The one way this package runs git: bounded, in the caller's environment, never prompting.

Why: the bot runs these calls in a worker thread, so each must end. Each call is a subprocess with a timeout
(its process group killed past it), no terminal (its own session, so ssh cannot prompt either), no editor and no
pager. The relay never reads os.environ: every function that runs git takes the environment it runs in (``env=``,
the bot's ``RelaySettings.env``), and the variables that would aim git at another repository are dropped from it.
Names are local branch names and are always passed to git as ``refs/heads/<name>`` (``ref``) where git takes a
revision, so a tag of the same name cannot be picked instead.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

from relay.errors import RelayError

__all__ = ["PARALLEL", "TIMEOUT_S", "Git", "WorktreeError", "ref", "tail"]

TIMEOUT_S = 60.0

# Parallel checkout, one worker per core: creating a worktree is mostly writing its files (2x faster on 2 cores).
PARALLEL = ("checkout.workers=0",)
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


class _Run(NamedTuple):
    rc: int
    out: str
    err: str


def tail(text: str, lines: int = 6) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])[-800:]


class Git:
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
            detail = tail(err or out)
            if "not a git repository" in detail:
                raise WorktreeError(f"{cwd} is not a git repository", branch=branch, detail=detail)
            raise WorktreeError(f"git {args[0]} failed: {detail}", branch=branch, detail=detail)
        return _Run(proc.returncode, out, err)


def ref(branch: str) -> str:
    return f"refs/heads/{branch}"

"""The environment a test gives a `macupos` process it starts (none of this machine's settings, its own
folders), and the one way the tests start that process: :func:`run_macupos` (blocking) and
:func:`arun_macupos` (in the test's event loop, which keeps serving the doubles meanwhile)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

__all__ = ["CLI", "MACUPOS", "REPO", "arun_macupos", "cli_env", "run_macupos"]

REPO = Path(__file__).resolve().parents[1]
# The command as `python -m macupos` (this interpreter, this checkout) and as the installed console script.
CLI: tuple[str, ...] = (sys.executable, "-m", "macupos")
MACUPOS = Path(sys.executable).parent / "macupos"
# Whatever the person running the tests has set must not reach the process under test.
_THEIRS = ("MACUPOS_", "CLAUDE_", "ANTHROPIC_", "CODEX_", "TELEGRAM_")


def cli_env(macupos_home: Path, *, home: Path | None = None, **extra: str) -> dict[str, str]:
    """This process's environment without :data:`_THEIRS`, plus ``MACUPOS_HOME``, the memory's LLM off, the
    repository importable and, with ``home``, that ``HOME`` and ``claude``/``codex`` folders in it; then ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_THEIRS)}
    env |= {"MACUPOS_HOME": str(macupos_home), "MACUPOS_MEMORY_LLM": "0", "PYTHONPATH": str(REPO)}
    if home is not None:
        env |= {"HOME": str(home), "CLAUDE_CONFIG_DIR": str(home / "claude"), "CODEX_HOME": str(home / "codex")}
    return env | extra


def run_macupos(
    env: Mapping[str, str],
    *args: str,
    stdin: str | None = None,
    timeout: float = 120,
    cwd: Path = REPO,
    preexec: Callable[[], None] | None = None,
    command: Sequence[str] = CLI,
) -> subprocess.CompletedProcess[str]:
    """``macupos ARGS`` as a real process with ``env``, text in and out, bounded by ``timeout`` (a hung
    command fails the test with TimeoutExpired); its exit status is the caller's to check."""
    return subprocess.run(
        [*command, *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=dict(env),
        cwd=cwd,
        timeout=timeout,
        check=False,
        preexec_fn=preexec,
    )


async def arun_macupos(
    env: Mapping[str, str],
    *args: str,
    stdin: bytes = b"",
    timeout_s: float = 120,
    cwd: Path = REPO,
    command: Sequence[str] = CLI,
) -> tuple[int, str, str]:
    """``macupos ARGS`` as a real process while this event loop keeps running (a double or a service in it
    answers the process); (status, stdout, stderr). Past ``timeout_s`` it is killed and TimeoutError raised."""
    proc = await asyncio.create_subprocess_exec(
        *command,
        *args,
        env=dict(env),
        cwd=cwd,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        async with asyncio.timeout(timeout_s):
            out, err = await proc.communicate(stdin)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    return proc.returncode or 0, out.decode(), err.decode()

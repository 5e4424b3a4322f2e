"""`macupos serve` (and any other `macupos` command) as a real process beside the test, on 127.0.0.1."""

from __future__ import annotations

import re
import signal
import ssl
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from tests.cli_env import MACUPOS, cli_env

__all__ = ["MACUPOS", "cli", "serve_env", "serving", "stop", "wait_listening"]


def serve_env(home: Path, **extra: str) -> dict[str, str]:
    return cli_env(home, HOME=str(home.parent), **extra)


def cli(home: Path, *args: str, timeout_s: float = 120, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(MACUPOS), *args],
        env=serve_env(home, **extra),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


def wait_listening(
    proc: subprocess.Popen[bytes],
    log: Path,
    scheme: str = "http",
    *,
    offset: int = 0,
    verify: ssl.SSLContext | bool = True,
    timeout_s: float = 60,
) -> str:
    """The URL a starting `macupos serve` announces in ``log`` (past ``offset``), once its /healthz answers
    (AssertionError when it dies or takes longer than ``timeout_s``)."""
    deadline = time.monotonic() + timeout_s
    url = None
    while url is None:
        text = log.read_bytes()[offset:].decode(errors="replace")
        found = re.search(rf"listening on ({scheme}://127\.0\.0\.1:\d+)", text)
        if found:
            url = found.group(1)
        elif proc.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"macupos serve did not start:\n{text[-4000:]}")
        else:
            time.sleep(0.05)  # polling a file another process writes; bounded by the deadline above
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/healthz", timeout=5, verify=verify).status_code == 200:
                return url
        except httpx.TransportError:
            time.sleep(0.05)  # bounded by the deadline
    raise AssertionError("macupos serve did not answer /healthz")


def stop(proc: subprocess.Popen[bytes], grace_s: float = 30) -> None:
    """SIGTERM, then SIGKILL when it has not exited after ``grace_s``."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)


@contextmanager
def serving(
    home: Path,
    log: Path,
    *args: str,
    scheme: str = "http",
    verify: ssl.SSLContext | bool = True,
    env: dict[str, str] | None = None,
) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """`macupos -v serve --port 0 ARGS` until the block ends (SIGTERM, then SIGKILL after 30 s)."""
    with log.open("ab") as err:
        proc = subprocess.Popen(
            [str(MACUPOS), "-v", "serve", "--port", "0", *args],
            env=serve_env(home, **(env or {})),
            stdout=err,
            stderr=err,
        )
    try:
        yield proc, wait_listening(proc, log, scheme, verify=verify)
    finally:
        stop(proc)

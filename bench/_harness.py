"""What several benchmark scripts share: running one and printing (and saving) its result, waiting for a
`macupos serve`."""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import subprocess
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx


def emit(result: dict[str, Any], json_path: Path | None, *, ensure_ascii: bool = True) -> None:
    """Print the result as JSON, and write it to ``json_path`` too when given (--json)."""
    text = json.dumps(result, indent=2, ensure_ascii=ensure_ascii)
    print(text)
    if json_path:
        json_path.write_text(text + "\n", encoding="utf-8")


def run_and_emit(
    parser: argparse.ArgumentParser, main_async: Callable[[argparse.Namespace], Awaitable[dict[str, Any]]]
) -> None:
    """Parse the command line (``parser``'s options and ``--json PATH``), run ``main_async`` on it and emit its
    result."""
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    emit(asyncio.run(main_async(args)), args.json)


def wait_serving(proc: subprocess.Popen[bytes], log: Path, listening: str, start_s: float) -> str:
    """The URL a starting `macupos serve` wrote to ``log`` (``listening``'s group 1), once its /healthz answers;
    SystemExit with the log when it ends first or ``start_s`` passes."""
    deadline = time.monotonic() + start_s
    url = ""
    while True:
        if not url and (found := re.search(listening, log.read_text(errors="replace"))):
            url = found.group(1)
        if url:
            try:
                httpx.get(f"{url}/healthz", timeout=5).raise_for_status()
                return url
            except httpx.TransportError:
                pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"macupos serve did not start:\n{log.read_text(errors='replace')}")
        time.sleep(0.05)

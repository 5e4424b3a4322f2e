"""One worker thread for a local model (Whisper, Piper): calls run in arrival order, off the event loop.

The models are not shared between threads, and a note that arrives while another is heard waits its turn.
A call after ``shutdown`` is the owner's own error ("the transcriber is closed"), not asyncio's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

__all__ = ["ModelThread"]

_R = TypeVar("_R")


class ModelThread:
    def __init__(self, name: str, closed: Callable[[], Exception]) -> None:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
        self._closed = closed

    async def run(self, fn: Callable[..., _R], *args: object) -> _R:
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._executor, fn, *args)
        except RuntimeError as exc:  # submitted after shutdown
            if "shutdown" in str(exc):
                raise self._closed() from exc
            raise

    def shutdown(self) -> None:
        """Wait for the work already queued, then stop the thread."""
        self._executor.shutdown(wait=True)

"""One worker thread for a local model (Whisper, Piper): calls run in arrival order, off the event loop.

The models are not shared between threads, and a note that arrives while another is heard waits its turn.
A call after ``shutdown`` is the owner's own error ("the transcriber is closed"), not asyncio's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Self, TypeVar

__all__ = ["ModelOwner", "ModelThread"]

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


class ModelOwner:
    """Owns a local model loaded once on its ModelThread: ``load`` ahead of time or on first use (``_ensure_model``
    in the thread), ``aclose`` (or ``async with``) to stop. A subclass says how the model loads (``_load``)."""

    def __init__(self, thread: ModelThread) -> None:
        self._model: Any = None
        self._thread = thread

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    @property
    def loaded(self) -> bool:
        return self._model is not None

    async def load(self) -> None:
        """Load the model now (idempotent); its first use loads it otherwise."""
        await self._thread.run(self._ensure_model)

    async def aclose(self) -> None:
        """Stop the worker thread after the work already queued; the model is dropped."""
        await asyncio.to_thread(self.close)

    def close(self) -> None:
        """Blocking ``aclose`` for synchronous owners (fixtures, benchmarks, the CLI's ``doctor``)."""
        self._thread.shutdown()
        self._model = None

    # --- worker thread only below this line ---

    def _ensure_model(self) -> None:
        if self._model is None:
            self._model = self._load()

    def _load(self) -> Any:
        raise NotImplementedError

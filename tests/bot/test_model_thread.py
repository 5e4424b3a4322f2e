"""The one worker thread a local model runs on."""

from __future__ import annotations

import threading

import pytest

from bot.errors import VoiceModelError
from bot.model_thread import ModelThread


async def test_calls_run_in_arrival_order_on_one_thread_off_the_loop() -> None:
    worker = ModelThread("test-model", lambda: VoiceModelError("closed"))
    seen: list[tuple[int, str]] = []

    def call(n: int) -> int:
        seen.append((n, threading.current_thread().name))
        return n * 2

    try:
        assert [await worker.run(call, n) for n in range(3)] == [0, 2, 4]
    finally:
        worker.shutdown()
    assert [n for n, _ in seen] == [0, 1, 2]
    names = {name for _, name in seen}
    assert len(names) == 1 and names.pop().startswith("test-model")
    assert threading.current_thread().name not in {name for _, name in seen}


async def test_a_call_after_shutdown_is_the_owners_error() -> None:
    worker = ModelThread("test-model", lambda: VoiceModelError("the transcriber is closed"))
    worker.shutdown()
    with pytest.raises(VoiceModelError, match="closed"):
        await worker.run(int, "1")

"""Eywa's own surface where no other test file covers it: what `show` reads when the transcript is not wanted."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from memory.facade import Eywa
from memory.settings import MemorySettings


async def test_show_without_the_transcript_has_everything_else(settings: MemorySettings, transcripts: Path) -> None:
    # Forget and the service's forget need a session's subagents and source file, not its megabytes of markdown.
    async with await Eywa.open(settings) as eywa:
        await eywa.ingest([transcripts], use_llm=False)
        parent = "88a8d761-7b9a-4bf1-a8ca-c1febe6bf358"  # daaain_new: a session with a subagent
        full = await eywa.show(parent)
        brief = await eywa.show(parent, transcript=False)
    assert full.session is not None and full.session.markdown and full.subagents
    assert brief.session == dataclasses.replace(full.session, markdown="")
    assert (brief.handoff, brief.subagents) == (full.handoff, full.subagents)

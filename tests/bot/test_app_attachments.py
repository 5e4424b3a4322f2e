"""Photos and files end to end: the real bot and Claude Code CLI against the Bot API and Messages API doubles."""

from __future__ import annotations

import base64
import shutil
import subprocess
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from bot.inbox import INBOX
from tests.bot.app_harness import OWNER, Harness, harness
from tests.doubles.anthropic import last_user_text
from tests.doubles.telegram import MAX_DOWNLOAD, TelegramDouble

Jpeg = Callable[[str], bytes]
_FFMPEG = ["ffmpeg", "-nostdin", "-loglevel", "error", "-y", "-f", "lavfi"]


@pytest.fixture(scope="module")
def jpeg(tmp_path_factory: pytest.TempPathFactory) -> Jpeg:
    """Factory: ``jpeg("red")`` → a real 64×48 JPEG of that colour (made by ffmpeg, as voice notes are)."""
    if not shutil.which("ffmpeg"):
        pytest.fail("ffmpeg is needed to make test photos: run scripts/setup --test")
    folder = tmp_path_factory.mktemp("photos")

    def make(colour: str) -> bytes:
        out = folder / f"{colour}.jpg"
        if not out.exists():
            subprocess.run(
                [*_FFMPEG, "-i", f"color=c={colour}:s=64x48", "-frames:v", "1", str(out)],
                check=True,
                capture_output=True,
            )
        return out.read_bytes()

    return make


@pytest.fixture
async def h(tmp_path: Path, telegram_double: TelegramDouble) -> AsyncIterator[Harness]:
    async with harness(tmp_path, telegram_double) as hh:
        yield hh


def image_blocks(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The image blocks of the request's last user message."""
    users = [m for m in body.get("messages") or [] if m.get("role") == "user"]
    content = users[-1].get("content") if users else None
    return [b for b in content or [] if isinstance(b, dict) and b.get("type") == "image"]


def inbox_files(h: Harness) -> list[Path]:
    folder = h.project / INBOX
    return sorted(folder.iterdir()) if folder.exists() else []


async def test_a_photo_with_a_caption_reaches_the_model_as_an_image_block(h: Harness, jpeg: Jpeg) -> None:
    photo = jpeg("red")
    h.claude.enqueue("It is a red rectangle.")
    await h.start()
    h.tg.push_photo(OWNER, OWNER, photo, caption="what colour is this?")
    await h.wait_text(lambda t: "red rectangle" in t)
    body = h.claude.bodies[0]
    blocks = image_blocks(body)
    assert len(blocks) == 1
    assert blocks[0]["source"] == {
        "type": "base64",
        "media_type": "image/jpeg",
        "data": base64.b64encode(photo).decode(),
    }
    text = last_user_text(body)
    saved = inbox_files(h)
    assert len(saved) == 1 and saved[0].read_bytes() == photo  # the largest size, not the thumbnail
    assert "what colour is this?\n\nAttached" in text and f"{INBOX.as_posix()}/{saved[0].name}" in text


async def test_a_photo_without_a_caption_still_runs_with_its_image(h: Harness, jpeg: Jpeg) -> None:
    h.claude.enqueue("A blue screenshot.")
    await h.start()
    h.tg.push_photo(OWNER, OWNER, jpeg("blue"))
    await h.wait_text(lambda t: "A blue screenshot." in t)
    assert len(image_blocks(h.claude.bodies[0])) == 1
    assert "without a message" in last_user_text(h.claude.bodies[0])


async def test_a_text_document_lands_in_the_inbox_and_is_named_and_quoted(h: Harness) -> None:
    data = b"invoice,amount\nA-1,10\nA-2,32\n"
    h.claude.enqueue("The amounts sum to 42.")
    await h.start()
    h.tg.push_document(OWNER, OWNER, data, "../../invoices.csv", "text/csv", caption="sum the amounts")
    await h.wait_text(lambda t: "sum to 42" in t)
    saved = inbox_files(h)
    assert [p.name for p in saved] == ["_.._invoices.csv"] and saved[0].read_bytes() == data
    text = last_user_text(h.claude.bodies[0])
    assert "sum the amounts\n\nAttached" in text
    assert f"{INBOX.as_posix()}/_.._invoices.csv (document, {len(data)} bytes, text/csv)" in text
    assert "A-2,32" in text and "not instructions" in text  # quoted as the file's data
    assert image_blocks(h.claude.bodies[0]) == []


async def test_an_oversize_document_is_refused_before_download_and_nothing_runs(h: Harness) -> None:
    app = await h.start()
    h.tg.push_document(
        OWNER, OWNER, b"tiny", "dump.sql", "application/sql", caption="load this dump", file_size=MAX_DOWNLOAD + 1
    )
    refused = await h.wait_text(lambda t: t.startswith("📎 Too big"))
    assert "dump.sql (20.0 MB)" in refused and "at most 20 MB" in refused and "nothing was run" in refused
    await h.wait_handled(app)
    assert h.claude.arrivals == 0 and h.tg.calls("getFile") == [] and inbox_files(h) == []


async def test_a_caption_never_runs_when_its_file_cannot_be_downloaded(h: Harness, jpeg: Jpeg) -> None:
    app = await h.start()
    pushed = h.tg.push_photo(OWNER, OWNER, jpeg("green"), caption="deploy what this screenshot shows")
    largest = pushed["message"]["photo"][-1]["file_id"]
    del h.tg.files[largest]  # Telegram no longer has it (expired file id)
    told = await h.wait_text(lambda t: t.startswith("📎 Could not download"))
    assert "nothing was run" in told
    await h.wait_handled(app)
    assert h.claude.arrivals == 0


async def test_an_album_is_one_instruction_with_every_image(h: Harness, jpeg: Jpeg) -> None:
    photos = [jpeg("red"), jpeg("green"), jpeg("blue")]
    h.claude.enqueue("Three screenshots: red, green, blue.")
    app = await h.start()
    h.tg.push_media_group(OWNER, OWNER, photos, caption="compare these")
    await h.wait_text(lambda t: "Three screenshots" in t)
    await h.wait_handled(app)
    assert h.claude.arrivals == 1  # one instruction, not three
    blocks = image_blocks(h.claude.bodies[0])
    assert [b["source"]["data"] for b in blocks] == [base64.b64encode(p).decode() for p in photos]
    text = last_user_text(h.claude.bodies[0])
    assert "compare these\n\nAttached" in text and text.count(f"{INBOX.as_posix()}/photo-") == 3
    assert len(inbox_files(h)) == 3


async def test_a_photo_sent_while_the_session_works_is_queued_with_its_image(h: Harness, jpeg: Jpeg) -> None:
    photo = jpeg("yellow")
    h.claude.hold = 1
    h.claude.enqueue("Started the long job.", "The screenshot is yellow.")
    await h.start()
    h.tg.push_message(OWNER, OWNER, "start the long job")
    await h.tg.wait_for(h.claude.held.is_set, timeout=60)
    h.tg.push_photo(OWNER, OWNER, photo, caption="and what colour is this?")
    await h.wait_text(lambda t: t.startswith("📥 Queued"))
    h.claude.release.set()
    await h.wait_text(lambda t: "is yellow" in t)
    blocks = image_blocks(h.claude.bodies[-1])
    assert [b["source"]["data"] for b in blocks] == [base64.b64encode(photo).decode()]

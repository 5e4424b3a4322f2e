"""Memory you can see, from the chat: /memory opens the memory pages as a Telegram Mini App (when
MACUPOS_PUBLIC_URL says where they are), /graph sends the facts graph as a PNG readable on a phone."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from PIL import Image

from tests.bot.app_harness import OWNER, Harness, harness
from tests.doubles.telegram import TelegramDouble

PAGES = "https://memory.example.org"


@pytest.fixture
async def h(tmp_path: Path, telegram_double: TelegramDouble) -> AsyncIterator[Harness]:
    async with harness(tmp_path, telegram_double) as hh:
        yield hh


def web_app_urls(message: dict[str, object]) -> list[str]:
    rows = (message.get("reply_markup") or {}).get("inline_keyboard") or []  # type: ignore[union-attr]
    return [b["web_app"]["url"] for row in rows for b in row if "web_app" in b]


async def test_memory_sends_its_status_with_a_mini_app_button_when_the_pages_have_a_public_url(h: Harness) -> None:
    h.extra_env["MACUPOS_PUBLIC_URL"] = PAGES + "/"
    await h.start()
    h.tg.push_message(OWNER, OWNER, "/memory")
    status = await h.wait_message(lambda m: "Memory is" in str(m.get("text", "")))
    assert "on" in str(status["text"])  # the project's memory status, as before
    assert web_app_urls(status) == [f"{PAGES}/tg"]

    h.tg.push_message(OWNER, OWNER, "/memory open")
    opened = await h.wait_message(lambda m: "📒 Memory:" in str(m.get("text", "")))
    assert web_app_urls(opened) == [f"{PAGES}/tg"]

    h.tg.push_message(OWNER, OWNER, "/memory off")  # the project switch works as it did
    await h.wait_text(lambda t: "Memory is <b>off</b>" in t or "Memory is off" in t)


async def test_memory_open_without_a_public_url_says_how_to_set_one(h: Harness) -> None:
    await h.start()
    h.tg.push_message(OWNER, OWNER, "/memory open")
    text = await h.wait_text(lambda t: "MACUPOS_PUBLIC_URL" in t)
    assert "macupos serve --local" in text
    h.tg.push_message(OWNER, OWNER, "/memory")
    status = await h.wait_message(lambda m: "Memory is" in str(m.get("text", "")))
    assert not web_app_urls(status)


async def test_graph_sends_the_facts_graph_as_a_png_a_phone_can_read(h: Harness) -> None:
    await h.start()
    h.tg.push_message(OWNER, OWNER, "/graph")
    await h.wait_text(lambda t: "No facts to draw" in t)

    said = ("I drink V60 coffee", "Deploys go to fly.io on Fridays", "<script>alert(1)</script> is a payload")
    for n, text in enumerate(said, 1):
        h.tg.push_message(OWNER, OWNER, f"/remember {text}")
        await h.tg.wait_for(lambda n=n: sum("Remembered" in t for t in h.tg.texts()) >= n, timeout=30)

    h.tg.push_message(OWNER, OWNER, "/graph user")
    call = await h.tg.wait_for(lambda: next((c for c in h.tg.calls("sendPhoto") if c.ok), None), timeout=60)
    assert "Facts graph: user" in str(call.params.get("caption"))
    assert "4 nodes" in str(call.params.get("caption"))  # user and its three facts
    data = call.files["photo"].data
    image = Image.open(io.BytesIO(data))
    assert image.format == "PNG" and max(image.size) <= 1280 and min(image.size) >= 1000
    # Drawn, not blank: the nodes' colours are there.
    colours = {c for _, c in image.convert("RGB").getcolors(1 << 20) or []}
    assert (47, 111, 223) in colours and (240, 160, 48) in colours

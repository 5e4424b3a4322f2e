"""What the owner reads: long answers split under 4,096 (or a document), flood control honoured, commands registered,
and `macupos bot` refusing to start without an allowlist."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from bot.commands import COMMANDS
from macupos.cli import main
from tests.bot.app_harness import FAST, OWNER, Harness, harness
from tests.doubles.telegram import MAX_TEXT, TelegramDouble, check_html


@pytest.fixture
async def h(tmp_path: Path, telegram_double: TelegramDouble) -> AsyncIterator[Harness]:
    async with harness(tmp_path, telegram_double) as hh:
        yield hh


def long_answer(size: int, seed: int = 7) -> str:
    rng = random.Random(seed)
    words = ["alpha", "beta", "a<b", "x&y", "gamma.", "delta,", "exporter", "zeppelin"]
    lines: list[str] = []
    total = 0
    while total < size:
        line = "word " + " ".join(rng.choice(words) for _ in range(rng.randint(3, 25)))
        lines.append(line)
        total += len(line) + 1
    return "\n".join(lines)[:size].rstrip()


def _answer_chunks(h: Harness) -> list[str]:
    return [t for t in h.texts() if not t.startswith(("⏳", "📒"))]


async def test_a_100k_answer_arrives_in_chunks_under_the_limit_that_rejoin_to_the_original(h: Harness) -> None:
    answer = long_answer(100_000)
    h.claude.enqueue(answer)
    await h.start(tuning=replace(FAST, document_threshold=10**9))
    h.tg.push_message(OWNER, OWNER, "print the whole report")
    await h.wait_message(lambda m: "📒" in str(m.get("text", "")), timeout=90)
    chunks = _answer_chunks(h)
    assert len(chunks) >= 25
    assert all(len(c) <= MAX_TEXT and len(check_html(c)) <= MAX_TEXT for c in chunks)
    assert "".join(check_html(c) for c in chunks) == answer


async def test_a_long_answer_is_sent_as_a_document(h: Harness) -> None:
    answer = long_answer(20_000, seed=3)
    h.claude.enqueue(answer)
    await h.start()
    h.tg.push_message(OWNER, OWNER, "print the long report")
    await h.tg.wait_for(lambda: h.sent(method="sendDocument"), timeout=60)
    document = h.sent(method="sendDocument")[0].files["document"]
    assert document.data.decode("utf-8") == answer and document.file_name == "answer.md"


async def test_flood_control_loses_no_message(h: Harness) -> None:
    app = await h.start()
    h.tg.set_flood(1, retry_after=1)
    for command in ("/help", "/status", "/facts", "/handoffs", "/cost"):
        h.tg.push_message(OWNER, OWNER, command)
    await h.wait_handled(app)
    texts = h.texts()
    assert len(texts) == 5
    assert any(t.startswith("Send an instruction") for t in texts) and any(t.startswith("📁 Project") for t in texts)
    assert any(c.status == 429 for c in h.tg.calls("sendMessage"))  # the flood was real, and was waited out


async def test_commands_are_registered_with_telegram(h: Harness) -> None:
    await h.start()
    registered = next(iter(h.tg.commands.values()))
    assert [c["command"] for c in registered] == [name for name, _ in COMMANDS]


def test_macupos_bot_refuses_to_start_without_an_allowlist(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no .env of the working tree is read
    runner = CliRunner()
    env = {
        "TELEGRAM_BOT_TOKEN": "123:abc",
        "MACUPOS_ALLOWED_USERS": None,
        "MACUPOS_HOME": str(tmp_path / "home"),
        "MACUPOS_ENV_FILE": None,
    }
    result = runner.invoke(main, ["bot"], env=env)
    assert result.exit_code != 0
    assert "MACUPOS_ALLOWED_USERS" in result.output and "refuses to start" in result.output

"""The chat commands end to end: session control, memory in chat, voice confirmation and the RPA pipeline."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.voice.transcribe import Transcriber
from tests.bot.app_harness import OWNER, Harness, button, harness
from tests.bot.conftest import VoiceNote
from tests.doubles.anthropic import last_user_text
from tests.doubles.openai import API_KEY_VAR, ExecCommand, OpenAIDouble, write_codex_config
from tests.doubles.telegram import TelegramDouble

pytestmark = pytest.mark.filterwarnings("ignore::claude_agent_sdk.CanUseToolShadowedWarning")


@pytest.fixture
async def h(tmp_path: Path, telegram_double: TelegramDouble) -> AsyncIterator[Harness]:
    async with harness(tmp_path, telegram_double, MACUPOS_VOICE_CONFIRM="0") as hh:
        yield hh


async def test_new_project_status_and_stop(h: Harness) -> None:
    h.claude.hold = 1
    # By content: the interrupted, held request may or may not be answered after its CLI went away.
    h.claude.default = lambda body: "fresh answer" if "what is here" in last_user_text(body) else "first answer"
    app = await h.start()
    assert app.services is not None
    h.tg.push_message(OWNER, OWNER, "start the long refactor")
    await h.tg.wait_for(h.claude.held.is_set, timeout=60)
    h.tg.push_message(OWNER, OWNER, "and rename the module")
    await h.wait_text(lambda t: t.startswith("📥 Queued"))
    h.tg.push_message(OWNER, OWNER, "/status")
    status = await h.wait_text(lambda t: t.startswith("📁 Project"))
    assert "Running" in status and "start the long refactor" in status and "and rename the module" in status

    h.tg.push_message(OWNER, OWNER, "/stop")
    stopped = await h.wait_text(lambda t: t.startswith("⏹ Stopped"))
    assert "Cancelled 1" in stopped
    h.claude.release.set()
    await h.wait_message(lambda m: "⏹" in str(m.get("text", "")) and "Stage: stopped" in str(m.get("text", "")))
    await h.wait_handled(app)
    assert app.sessions is not None
    worker = app.sessions.chat(OWNER).worker
    if worker is not None:  # the chat's worker closes the run and its queue row after the stage line
        await asyncio.wait_for(asyncio.shield(worker), 60)
    # Nothing of what was stopped is left for the next start to run.
    with sqlite3.connect(f"file:{h.settings().db_path}?mode=ro", uri=True) as conn:
        left = conn.execute("SELECT text FROM queue WHERE status IN ('queued', 'running')").fetchall()
    assert left == []
    first_session = (await app.services.state.chat(OWNER)).session_id

    h.tg.push_message(OWNER, OWNER, "/new")
    await h.wait_text(lambda t: t.startswith("🆕"))
    h.tg.push_message(OWNER, OWNER, "/project other")
    await h.wait_text(lambda t: t.startswith("📁 Project other"))
    h.tg.push_message(OWNER, OWNER, "what is here?")
    await h.wait_text(lambda t: "fresh answer" in t)
    chat = await app.services.state.chat(OWNER)
    assert chat.project == "other" and chat.session_id and chat.session_id != first_session
    assert "and rename the module" not in " ".join(h.claude.user_texts())  # the stopped queue never ran


async def test_remember_facts_rules_and_handoffs(h: Harness) -> None:
    await h.start()
    h.tg.push_message(OWNER, OWNER, "/remember deploys go through make release")
    await h.wait_text(lambda t: t.startswith("🧠 Remembered"))
    h.tg.push_message(OWNER, OWNER, "/facts")
    facts = await h.wait_text(lambda t: "Injected into new sessions" in t)
    assert "deploys go through make release" in facts
    h.tg.push_message(OWNER, OWNER, "/rules")
    await h.wait_text(lambda t: "Standing rules" in t and "MEMORY.md" in t)
    h.tg.push_message(OWNER, OWNER, "/handoffs")
    await h.wait_text(lambda t: t == "No handoffs yet.")
    h.claude.enqueue("noted")
    h.tg.push_message(OWNER, OWNER, "hello")
    await h.wait_text(lambda t: t == "noted")
    assert "> - " in str(h.claude.bodies[0]["system"]) and "make release" in str(h.claude.bodies[0]["system"])


async def test_voice_confirm_waits_for_the_owner_and_a_text_replaces_the_transcript(
    tmp_path: Path, telegram_double: TelegramDouble, voice_note: VoiceNote, transcriber: Transcriber
) -> None:
    async with harness(tmp_path, telegram_double, MACUPOS_VOICE_CONFIRM="1") as h:
        h.claude.enqueue("ran the typed one", "ran the spoken one")
        app = await h.start(transcriber=transcriber)
        note = voice_note("check the billing logs").read_bytes()
        h.tg.push_voice(OWNER, OWNER, note, 2)
        first = await h.wait_message(lambda m: str(m.get("text", "")).startswith("🎙"))
        await h.wait_handled(app)
        assert h.claude.arrivals == 0  # nothing runs before the owner says so
        h.tg.push_message(OWNER, OWNER, "check the payment logs instead")
        await h.wait_text(lambda t: t == "ran the typed one")
        assert last_user_text(h.claude.bodies[0]).endswith("check the payment logs instead")
        h.tg.push_callback(OWNER, OWNER, first["message_id"], button(first, "Run"))  # the replaced one is gone
        await h.wait_handled(app)

        h.tg.push_voice(OWNER, OWNER, note, 2)
        second = await h.tg.wait_for(
            lambda: [m for m in h.tg.messages(OWNER).values() if str(m.get("text", "")).startswith("🎙")][1:],
            timeout=60,  # a transcription, on a machine other work may share
        )
        h.tg.push_callback(OWNER, OWNER, second[0]["message_id"], button(second[0], "Run"))
        await h.wait_text(lambda t: t == "ran the spoken one")
        assert "billing" in last_user_text(h.claude.bodies[-1]).lower()
        assert h.claude.arrivals == 2


async def test_an_older_voice_prompts_run_button_never_runs_a_newer_transcript(
    tmp_path: Path, telegram_double: TelegramDouble, voice_note: VoiceNote, transcriber: Transcriber
) -> None:
    async with harness(tmp_path, telegram_double, MACUPOS_VOICE_CONFIRM="1") as h:
        h.claude.enqueue("ran the second note")
        app = await h.start(transcriber=transcriber)
        h.tg.push_voice(OWNER, OWNER, voice_note("check the billing logs").read_bytes(), 2)
        await h.wait_handled(app)
        # Words espeak-ng and tiny.en agree on ("restart the staging server" came back as "Restarting us,
        # changing servers.") and none of the waiting prompt's answer words ("run the tests…" could be taken
        # as an unclear "Run").
        h.tg.push_voice(OWNER, OWNER, voice_note("open the billing tests").read_bytes(), 2)
        prompts = await h.tg.wait_for(
            lambda: (
                [m for m in h.tg.messages(OWNER).values() if str(m.get("text", "")).startswith("🎙")][1:]
                and [m for m in h.tg.messages(OWNER).values() if str(m.get("text", "")).startswith("🎙")]
            ),
            timeout=60,  # a transcription, on a machine other work may share
        )
        first, second = prompts[0], prompts[1]
        h.tg.push_callback(OWNER, OWNER, first["message_id"], button(first, "Run"))
        await h.wait_handled(app)
        assert h.claude.arrivals == 0  # the first prompt's transcript was replaced by the second note
        h.tg.push_callback(OWNER, OWNER, second["message_id"], button(second, "Run"))
        await h.wait_text(lambda t: t == "ran the second note")
        assert "test" in last_user_text(h.claude.bodies[-1]).lower()
        assert h.claude.arrivals == 1


def _claude_stage(body: dict[str, Any]) -> str:
    text = last_user_text(body)
    approve = "```json\n" + json.dumps({"verdict": "approve", "findings": ["F1: keep greet.txt tiny"]}) + "\n```"
    if "· stage research" in text:
        return "Research: the project has only a README."
    if "· stage audit" in text or "· stage review" in text:
        return f"Looks fine.\n\n{approve}"
    return "ok"


async def test_rpa_runs_the_pipeline_with_a_line_per_stage_and_the_audit_shown(
    tmp_path: Path, telegram_double: TelegramDouble
) -> None:
    async with OpenAIDouble() as openai:
        codex_home = tmp_path / "codex"
        write_codex_config(codex_home, openai.base_url)
        extra = {API_KEY_VAR: "double-key", "OPENAI_API_KEY": "", "OPENAI_BASE_URL": ""}
        async with harness(tmp_path, telegram_double, **extra) as h:
            h.claude.default = _claude_stage
            target = h.project / "greet.txt"
            openai.enqueue("PLAN v1: write greet.txt", ExecCommand(f"printf 'hello\\n' > {target}"), "Executed.")
            await h.start()
            h.tg.push_message(OWNER, OWNER, "/rpa add greet.txt")
            summary = await h.wait_text(lambda t: "<b>Audit</b>" in t, timeout=120)
            assert "approve" in summary and "F1: keep greet.txt tiny" in summary
            progress = await h.wait_message(lambda m: "Research → Plan → Audit" in str(m.get("text", "")))
            for stage in ("research", "plan", "audit", "execute", "review"):
                assert f"{stage} · " in progress["text"]
            assert target.read_text() == "hello\n"
            card = await h.wait_message(lambda m: "📒" in str(m.get("text", "")))  # the run's handoff, for review
            assert "Keep" in str(card["reply_markup"])

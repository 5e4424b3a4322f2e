"""Signed triggers against the real bot: real HTTP on 127.0.0.1 to the bot's trigger endpoint, the Telegram
double and the real Claude CLI against the Anthropic double. A signed call queues its instruction once (per
delivery id) in the owner's chat, in its branch when it names one, under the trigger profile."""

from __future__ import annotations

import asyncio
import copy
import json
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from bot.app import BotApp
from bot.triggers import DELIVERY_HEADER, EVENT_HEADER, SIGNATURE_HEADER, sign
from tests.bot.app_harness import FRIEND, OWNER, Harness, harness
from tests.bot.test_app_branches import commit_file, cwd_of, git, worktree
from tests.bot.test_app_schedules import settle
from tests.bot.test_triggers import workflow_run_delivery
from tests.cli_env import MACUPOS
from tests.doubles.anthropic import ToolUse, last_user_text
from tests.doubles.telegram import TelegramDouble

SECRET = "app-trigger-secret-5b1e9c0d7a"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
async def h(tmp_path: Path, telegram_double: TelegramDouble) -> AsyncIterator[Harness]:
    async with harness(
        tmp_path, telegram_double, MACUPOS_TRIGGER_PORT=str(free_port()), MACUPOS_TRIGGER_SECRET=SECRET
    ) as hh:
        yield hh


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=30) as client:
        yield client


def url(h: Harness, path: str) -> str:
    return f"http://127.0.0.1:{h.extra_env['MACUPOS_TRIGGER_PORT']}{path}"


async def post(
    h: Harness,
    http: httpx.AsyncClient,
    path: str,
    payload: dict[str, Any],
    *,
    delivery: str | None = None,
    event: str | None = None,
    signed: bool = True,
) -> httpx.Response:
    body = json.dumps(payload).encode()
    headers = {"content-type": "application/json"}
    if signed:
        headers[SIGNATURE_HEADER] = sign(SECRET, body)
    if delivery is not None:
        headers[DELIVERY_HEADER] = delivery
    if event is not None:
        headers[EVENT_HEADER] = event
    return await http.post(url(h, path), content=body, headers=headers)


def asked(h: Harness, text: str) -> int:
    """How many model requests carried ``text`` as the instruction (the held ones included)."""
    return sum(text in last_user_text(b) for b in h.claude.arrived)


async def test_a_signed_trigger_runs_once_per_delivery_and_an_unsigned_one_never(
    h: Harness, http: httpx.AsyncClient
) -> None:
    h.claude.default = "Linters are clean."
    app = await h.start()
    first = await post(h, http, "/trigger", {"text": "run the linters"}, delivery="hook-1")
    assert first.status_code == 202 and first.json() == {"status": "accepted", "id": "hook-1"}
    line = await h.wait_text(lambda t: t.startswith("⚡ Triggered"))
    assert "profile edit" in line and "run the linters" in line
    await h.wait_text(lambda t: "Linters are clean." in t)
    await settle(h, app)
    assert h.claude.arrivals == 1 and "run the linters" in last_user_text(h.claude.bodies[0])

    again = await post(h, http, "/trigger", {"text": "run the linters"}, delivery="hook-1")
    assert again.status_code == 200 and again.json() == {"status": "duplicate", "id": "hook-1"}
    unsigned = await post(h, http, "/trigger", {"text": "rm everything"}, delivery="hook-2", signed=False)
    assert unsigned.status_code == 401
    forged = await http.post(
        url(h, "/trigger"),
        content=b'{"text": "rm everything"}',
        headers={"content-type": "application/json", SIGNATURE_HEADER: sign("not-the-secret-at-all", b"{}")},
    )
    assert forged.status_code == 401
    await settle(h, app)
    assert h.claude.arrivals == 1
    assert sum(t.startswith("⚡ Triggered") for t in h.texts()) == 1
    assert await app.services.state.lanes_with_queued() == []  # type: ignore[union-attr]


async def test_a_trigger_runs_though_its_announcement_cannot_be_sent(
    h: Harness, http: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    h.claude.default = "Docs checked."
    app = await h.start()
    assert app.services is not None
    sender = app.services.sender
    real_send = sender.send

    async def flooded(chat_id: int, text: str, **kw: Any) -> Any:
        if text.startswith("⚡"):  # the chat is in flood control: this line would wait a long time
            await asyncio.Event().wait()
        return await real_send(chat_id, text, **kw)

    monkeypatch.setattr(sender, "send", flooded)
    monkeypatch.setattr(app.triggers, "announce_timeout_s", 0.2)
    response = await post(h, http, "/trigger", {"text": "check the docs"}, delivery="hook-flood")
    assert response.status_code == 202  # stored, and started, well within the endpoint's deadline
    await h.wait_text(lambda t: "Docs checked." in t)
    await settle(h, app)
    assert asked(h, "check the docs") == 1
    assert await app.services.state.lanes_with_queued() == []


async def test_a_failed_ci_run_is_fixed_in_its_branch_under_the_edit_profile(
    h: Harness, http: httpx.AsyncClient
) -> None:
    git(h.project, "init", "-q", "-b", "main")
    commit_file(h.project, "app.py", "print('hello')\n", "first")
    fixed = worktree(h, "fix-ci") / "fix.txt"
    h.claude.enqueue(
        ToolUse("Write", {"file_path": str(fixed), "content": "fixed\n"}),
        ToolUse("Bash", {"command": "git push --force", "description": "push it"}),
        "Fixed the failing test.",
    )
    app = await h.start()
    delivery = workflow_run_delivery("failure")
    delivery["repository"] = {**delivery["repository"], "name": "billing", "full_name": "acme/billing"}
    run = delivery["workflow_run"] = copy.deepcopy(delivery["workflow_run"])
    run["head_branch"] = "fix-ci"
    response = await post(h, http, "/github", delivery, delivery="gh-1", event="workflow_run")
    assert response.status_code == 202, response.text
    line = await h.wait_text(lambda t: t.startswith("⚡ Triggered"))
    assert "(GitHub workflow_run) in @fix-ci, profile edit" in line and "CI failed on fix-ci:" in line
    await h.wait_text(lambda t: "Fixed the failing test." in t)
    body = h.claude.bodies[0]
    assert cwd_of(body) == str(worktree(h, "fix-ci"))
    assert "\nCI failed on fix-ci: tests (run #418, failure, https://" in last_user_text(body)
    assert fixed.read_text(encoding="utf-8") == "fixed\n"  # an edit: allowed under profile edit
    denied = await h.wait_text(lambda t: t.startswith("🔒"))
    assert "(edit)" in denied and "git push --force" in denied  # a push: not
    assert not any("🔐" in str(m.get("text", "")) for m in h.tg.messages(OWNER).values())
    assert git(worktree(h, "fix-ci"), "rev-parse", "--abbrev-ref", "HEAD").strip() == "fix-ci"
    await settle(h, app)
    assert h.claude.arrivals == 3

    # The owner throws the branch away; GitHub redelivers the same delivery: nothing runs, nothing is remade.
    git(h.project, "worktree", "remove", "--force", str(worktree(h, "fix-ci")))
    git(h.project, "branch", "-q", "-D", "fix-ci")
    state = app.services.state  # type: ignore[union-attr]
    await state.remove_branch(OWNER, "fix-ci")
    again = await post(h, http, "/github", delivery, delivery="gh-1", event="workflow_run")
    assert again.status_code == 200 and again.json()["status"] == "duplicate"
    assert await state.branch(OWNER, "fix-ci") is None
    assert h.claude.arrivals == 3


async def test_macupos_trigger_hands_the_running_bot_an_instruction(h: Harness) -> None:
    h.claude.default = "Deployed the docs."
    app = await h.start()
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(h.tmp / "cli-home"),
        "MACUPOS_TRIGGER_PORT": h.extra_env["MACUPOS_TRIGGER_PORT"],
        "MACUPOS_TRIGGER_SECRET": SECRET,
    }
    process = await asyncio.create_subprocess_exec(
        str(MACUPOS),
        "trigger",
        "deploy the docs",
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, err.decode()
    delivery_id = out.decode().strip()
    assert len(delivery_id) == 36  # the uuid it sent, printed once the bot stored it
    line = await h.wait_text(lambda t: t.startswith("⚡ Triggered"))
    assert "(a signed call)" in line and "deploy the docs" in line
    await h.wait_text(lambda t: "Deployed the docs." in t)
    await settle(h, app)
    assert h.claude.arrivals == 1

    env["MACUPOS_TRIGGER_SECRET"] = "a-wrong-secret-of-some-length"
    process = await asyncio.create_subprocess_exec(
        str(MACUPOS), "trigger", "deploy again", env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    _, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 1 and "401" in err.decode()
    assert h.claude.arrivals == 1


async def test_a_trigger_stored_before_the_bot_stopped_runs_once_at_the_next_start(
    h: Harness, http: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    h.claude.default = "Linted after the restart."
    app = await h.start()
    assert app.sessions is not None

    async def stopped_first(chat_id: int, user_id: int, branch: str = "") -> bool:
        return False  # the process stops between storing the instruction (the 202) and starting its run

    monkeypatch.setattr(app.sessions, "run_queued", stopped_first)
    response = await post(h, http, "/trigger", {"text": "run the linters"}, delivery="hook-restart")
    assert response.status_code == 202
    await h.wait_text(lambda t: t.startswith("⚡ Triggered"))
    await app.stop()
    assert h.claude.arrivals == 0

    app = await h.start()
    await h.wait_text(lambda t: "Linted after the restart." in t)
    await settle(h, app)
    assert asked(h, "run the linters") == 1 and h.claude.arrivals == 1
    assert not any(t.startswith("⚠️") for t in h.texts())  # it never started: nothing to report as cut
    again = await post(h, http, "/trigger", {"text": "run the linters"}, delivery="hook-restart")
    assert again.status_code == 200 and again.json()["status"] == "duplicate"
    await settle(h, app)
    assert asked(h, "run the linters") == 1


async def test_a_trigger_waiting_for_a_slot_when_the_bot_stops_runs_once_at_the_next_start(
    h: Harness, http: httpx.AsyncClient
) -> None:
    h.extra_env["MACUPOS_MAX_PARALLEL"] = "1"
    h.claude.hold = 1
    h.claude.default = lambda body: (
        "Linted after the restart." if "run the linters" in last_user_text(body) else "Long job done."
    )
    app: BotApp = await h.start()
    h.tg.push_message(FRIEND, FRIEND, "a long job")  # takes the only slot, held at the double
    await asyncio.wait_for(h.claude.held.wait(), 90)
    response = await post(h, http, "/trigger", {"text": "run the linters"}, delivery="hook-restart")
    assert response.status_code == 202
    await h.wait_text(lambda t: t.startswith("⚡ Triggered"))
    await h.wait_text(lambda t: "Waiting for a free slot" in t)
    await app.stop()
    h.claude.release.set()
    assert asked(h, "run the linters") == 0  # it did not start while the bot was stopping

    app = await h.start()
    await h.wait_text(lambda t: "Linted after the restart." in t, timeout=30)
    await settle(h, app)
    assert asked(h, "run the linters") == 1


async def test_a_trigger_naming_another_project_runs_there(h: Harness, http: httpx.AsyncClient) -> None:
    h.claude.default = "Checked."
    app = await h.start()
    response = await post(h, http, "/trigger", {"text": "check the other one", "project": "other"}, delivery="p-1")
    assert response.status_code == 202
    await h.wait_text(lambda t: "Checked." in t)
    await settle(h, app)
    assert cwd_of(h.claude.bodies[-1]) == str(h.tmp / "other")

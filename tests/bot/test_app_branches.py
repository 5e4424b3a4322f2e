"""Agents in parallel: ``@branch`` instructions run side by side, each in its own git worktree, routed by
topic, reply and follow-up, and merged or thrown away from the chat (real git, the real Claude CLI)."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.bot.app_harness import OWNER, Harness, harness
from tests.doubles.anthropic import last_user_text
from tests.doubles.telegram import TelegramDouble

GIT_ENV = {
    "GIT_AUTHOR_NAME": "Owner",
    "GIT_AUTHOR_EMAIL": "owner@example.com",
    "GIT_COMMITTER_NAME": "Owner",
    "GIT_COMMITTER_EMAIL": "owner@example.com",
}


def git(cwd: Path, *args: str) -> str:
    run = subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin", **GIT_ENV}
    )
    assert run.returncode == 0, run.stderr
    return run.stdout


def commit_file(cwd: Path, name: str, text: str, message: str) -> None:
    (cwd / name).write_text(text, encoding="utf-8")
    git(cwd, "add", name)
    git(cwd, "commit", "-q", "-m", message)


def init_repo(cwd: Path) -> None:
    """A git repository on ``main`` whose commits are the owner's."""
    git(cwd, "init", "-q", "-b", "main")
    git(cwd, "config", "user.email", "owner@example.com")
    git(cwd, "config", "user.name", "Owner")


@pytest.fixture
async def h(tmp_path: Path, telegram_double: TelegramDouble) -> AsyncIterator[Harness]:
    async with harness(tmp_path, telegram_double) as hh:
        init_repo(hh.project)
        commit_file(hh.project, "app.py", "print('hello')\n", "first")
        yield hh


def worktree(h: Harness, branch: str) -> Path:
    return h.project / ".macupos" / "worktrees" / branch


def cwd_of(body: Mapping[str, Any]) -> str:
    """The working directory Claude Code told the model it works in (its environment block)."""
    found = re.search(r"Primary working directory: ([^\s\\]+)", json.dumps(body))
    return found.group(1) if found else ""


async def test_two_at_instructions_run_at_once_each_in_its_own_worktree(h: Harness) -> None:
    h.claude.hold = 2
    h.claude.default = lambda body: "done in " + ("A" if cwd_of(body).endswith("fix-a") else "B")
    await h.start()
    h.tg.push_message(OWNER, OWNER, "@fix-a make A")
    h.tg.push_message(OWNER, OWNER, "@fix-b make B")
    # Both requests are held at the double at the same time: the two sessions are in flight together.
    await h.tg.wait_for(lambda: h.claude.arrivals >= 2, timeout=120)
    held = h.claude.arrived[:2]
    assert h.claude.bodies == []  # neither has been answered: both are in flight at once
    assert {cwd_of(body) for body in held} == {str(worktree(h, "fix-a")), str(worktree(h, "fix-b"))}
    h.claude.release.set()
    await h.wait_text(lambda t: "done in A" in t and "fix-a" in t)
    await h.wait_text(lambda t: "done in B" in t and "fix-b" in t)
    for branch in ("fix-a", "fix-b"):
        assert git(worktree(h, branch), "rev-parse", "--abbrev-ref", "HEAD").strip() == branch
    assert git(h.project, "status", "--porcelain") == ""  # the worktrees stay out of the main checkout's status
    assert git(h.project, "rev-parse", "--abbrev-ref", "HEAD").strip() == "main"


async def test_past_the_parallel_limit_an_instruction_waits_in_line_and_then_runs(h: Harness) -> None:
    h.extra_env["MACUPOS_MAX_PARALLEL"] = "1"
    h.claude.hold = 1
    h.claude.default = "finished"
    await h.start()
    h.tg.push_message(OWNER, OWNER, "@one first job")
    await h.tg.wait_for(h.claude.held.is_set, timeout=120)
    h.tg.push_message(OWNER, OWNER, "@two second job")
    await h.wait_text(lambda t: "Waiting for a free slot: 1 in line" in t and "two" in t)
    assert h.claude.arrivals == 1
    h.claude.release.set()
    await h.tg.wait_for(lambda: sum("finished" in t for t in h.texts()) >= 2, timeout=120)
    assert [cwd_of(b) for b in h.claude.bodies] == [str(worktree(h, "one")), str(worktree(h, "two"))]


async def test_a_reply_continues_its_lane_and_a_terse_follow_up_goes_to_the_last_one(h: Harness) -> None:
    h.claude.default = lambda body: f"answer to: {last_user_text(body).strip().splitlines()[-1]}"
    await h.start()
    h.tg.push_message(OWNER, OWNER, "@fix-a look at the login")
    answer = await h.wait_message(lambda m: "answer to: look at the login" in str(m.get("text", "")))
    await h.wait_text(lambda t: t.startswith("🌿 fix-a · 📒"))  # its handoff's review card says whose it is
    h.tg.push_message(OWNER, OWNER, "a longer instruction for the main checkout that is not terse at all, surely")
    await h.wait_text(lambda t: "Main checkout (start with @fix-a" in t)
    await h.wait_text(lambda t: "not terse at all, surely" in t and "answer to" in t)
    assert cwd_of(h.claude.bodies[-1]) == str(h.project)
    # A reply to fix-a's answer goes back to fix-a, though the owner last talked to the main checkout.
    h.tg.push_message(OWNER, OWNER, "and the logout too", reply_to_message=answer)
    await h.wait_text(lambda t: "answer to: and the logout too" in t)
    assert cwd_of(h.claude.bodies[-1]) == str(worktree(h, "fix-a"))
    # Now fix-a was the last: a terse follow-up without a reply goes there, and the echo says so.
    h.tg.push_message(OWNER, OWNER, "removed; push")
    await h.wait_text(lambda t: t.startswith("↪️ @fix-a"))
    await h.wait_text(lambda t: "answer to: removed; push" in t)
    assert cwd_of(h.claude.bodies[-1]) == str(worktree(h, "fix-a"))


async def test_a_name_git_refuses_is_explained_and_nothing_runs(h: Harness) -> None:
    await h.start()
    h.tg.push_message(OWNER, OWNER, "@bad..name do it")
    await h.wait_text(lambda t: "not a branch name git accepts" in t)
    assert h.claude.arrivals == 0

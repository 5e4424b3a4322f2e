"""``/branches``: each branch's card, its diff as a patch, merging (fast-forward, merge commit, conflict and
Resolve), pushing, discarding (once or twice confirmed) and continuing, end to end with real git repositories;
the agent's edits are made by the test in the worktree (the Anthropic double cannot edit files)."""

from __future__ import annotations

import subprocess
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from bot.app import BotApp
from tests.bot.app_harness import FRIEND, OWNER, Harness, button, harness
from tests.bot.test_app_branches import GIT_ENV, commit_file, cwd_of, git, init_repo, worktree
from tests.doubles.anthropic import last_user_text
from tests.doubles.telegram import TelegramDouble

NOT_YOURS = "This button is not for you, or it has expired."


@pytest.fixture
async def h(tmp_path: Path, telegram_double: TelegramDouble) -> AsyncIterator[Harness]:
    async with harness(tmp_path, telegram_double) as hh:
        init_repo(hh.project)
        (hh.project / "app.py").write_text("print('hello')\n", encoding="utf-8")
        (hh.project / "lib.py").write_text("VALUE = 1\n", encoding="utf-8")
        git(hh.project, "add", "app.py", "lib.py")
        git(hh.project, "commit", "-q", "-m", "first")
        hh.claude.default = lambda body: f"answer to: {last_user_text(body).strip().splitlines()[-1]}"
        yield hh


# -- helpers ---------------------------------------------------------------------------------------


def containing(needle: str) -> Callable[[str], bool]:
    return lambda text: needle in text


def rev(cwd: Path, what: str = "HEAD") -> str:
    return git(cwd, "rev-parse", what).strip()


def has_branch(h: Harness, name: str) -> bool:
    return bool(git(h.project, "branch", "--list", name).strip())


def mark(h: Harness) -> int:
    """The newest bot message id so far: what comes after it is new."""
    return max(h.tg.messages(OWNER), default=0)


async def after(h: Harness, since: int, needle: str) -> dict[str, Any]:
    """The first bot message newer than ``since`` whose text has ``needle``."""
    return await h.wait_message(lambda m: m["message_id"] > since and needle in str(m.get("text", "")))


def toasts(h: Harness) -> list[str]:
    return [str(c.params.get("text")) for c in h.tg.sent if c.method == "answerCallbackQuery"]


async def press(h: Harness, message: Mapping[str, Any], label: str, user: int = OWNER) -> str:
    """Tap a button; returns its toast, answered once the press is handled (its messages are out)."""
    n = len(toasts(h))
    h.tg.push_callback(user, OWNER, message["message_id"], button(message, label))
    await h.tg.wait_for(lambda: len(toasts(h)) > n, timeout=60)
    return toasts(h)[-1]


async def card(h: Harness, branch: str) -> dict[str, Any]:
    since = mark(h)
    h.tg.push_message(OWNER, OWNER, "/branches")
    return await after(h, since, f"🌿 {branch} (from main")


async def run_branch(h: Harness, app: BotApp, *branches: str) -> None:
    """``@branch do work`` for each, answered and its bookkeeping done; the worktrees exist after."""
    for branch in branches:
        h.tg.push_message(OWNER, OWNER, f"@{branch} do the {branch} work")
    for branch in branches:
        await h.wait_text(containing(f"answer to: do the {branch} work"))
    await h.wait_handled(app)
    for branch in branches:
        assert git(worktree(h, branch), "symbolic-ref", "--short", "HEAD").strip() == branch


def snapshot(repo: Path) -> tuple[str, str, str, bytes]:
    """The main checkout as the owner sees it: branch, HEAD, status and a file's bytes."""
    head = git(repo, "symbolic-ref", "--short", "HEAD").strip()
    return head, rev(repo), git(repo, "status", "--porcelain", "--untracked-files=all"), (repo / "app.py").read_bytes()


# -- tests -----------------------------------------------------------------------------------------


async def test_the_list_the_diff_continue_and_a_button_of_someone_else(h: Harness) -> None:
    app = await h.start()
    h.tg.push_message(OWNER, OWNER, "/branches")
    await h.wait_text(lambda t: "No branches yet" in t and "@NAME instruction" in t)
    await run_branch(h, app, "fix-a")
    wt = worktree(h, "fix-a")
    commit_file(wt, "app.py", "print('hello')\nprint('fixed')\n", "fix the greeting")  # +1
    (wt / "lib.py").write_text("VALUE = 2\n", encoding="utf-8")  # uncommitted: +1 −1
    (wt / "notes.txt").write_text("one\ntwo\n", encoding="utf-8")  # untracked: +2
    status = git(wt, "status", "--porcelain")

    first = await card(h, "fix-a")
    assert "\ndone · " in first["text"] and "3 file(s) changed, +4 −1" in first["text"]
    assert "cost $" in first["text"]

    # Another allowlisted user's press does nothing, and does not spend the owner's button.
    assert await press(h, first, "Diff", user=FRIEND) == NOT_YOURS
    assert not h.sent(method="sendDocument")

    since = mark(h)
    assert await press(h, first, "Diff") == "Diff sent."
    summary = await after(h, since, "🌿 fix-a against main: 3 file(s), +4 −1")
    assert {"• app.py +1 −0", "• lib.py +1 −1", "• notes.txt +2 −0"} <= set(summary["text"].splitlines())
    document = h.sent(method="sendDocument")[-1].files["document"]
    assert document.file_name == "fix-a.patch"
    text = document.data.decode()
    assert "+print('fixed')" in text  # committed
    assert "-VALUE = 1\n+VALUE = 2" in text  # not committed
    assert "+++ b/notes.txt" in text and "+two" in text  # untracked
    assert git(wt, "status", "--porcelain") == status  # the agent's index is untouched
    assert git(wt, "log", "-1", "--format=%s").strip() == "fix the greeting"

    # The owner turns to the main checkout; Continue points the next terse follow-up back at fix-a.
    h.tg.push_message(OWNER, OWNER, "a long instruction for the main checkout, which is not a terse follow-up at all")
    await h.wait_text(lambda t: "answer to: a long instruction for the main checkout" in t)
    await h.wait_handled(app)
    assert cwd_of(h.claude.bodies[-1]) == str(h.project)
    assert await press(h, first, "Continue") == "Continuing."
    await h.wait_text(lambda t: t.startswith("▶️ Your next short follow-up goes to fix-a"))
    h.tg.push_message(OWNER, OWNER, "now the tests")
    await h.wait_text(lambda t: t.startswith("↪️ @fix-a"))
    await h.wait_text(lambda t: "answer to: now the tests" in t)
    assert cwd_of(h.claude.bodies[-1]) == str(wt)


async def test_merge_refused_on_a_dirty_checkout_then_fast_forward_push_and_discard(h: Harness) -> None:
    remote = h.tmp / "remote.git"
    git(h.tmp, "init", "-q", "--bare", "-b", "main", str(remote))
    git(h.project, "remote", "add", "origin", str(remote))
    git(h.project, "push", "-q", "origin", "main")
    app = await h.start()
    await run_branch(h, app, "fix-a")
    wt = worktree(h, "fix-a")
    commit_file(wt, "feature.py", "FEATURE = True\n", "add the feature")
    (wt / "lib.py").write_text("VALUE = 2\n", encoding="utf-8")  # left uncommitted by the agent

    # A dirty main checkout: Merge says so and changes nothing, here or in the worktree.
    (h.project / "app.py").write_text("print('edited by hand')\n", encoding="utf-8")
    before, tip, wt_status = snapshot(h.project), rev(wt), git(wt, "status", "--porcelain")
    since = mark(h)
    await press(h, await card(h, "fix-a"), "Merge")
    refused = await after(h, since, "❌ fix-a: the main checkout has uncommitted changes (app.py)")
    assert "Push" not in str(refused.get("reply_markup"))
    assert snapshot(h.project) == before and rev(wt) == tip and git(wt, "status", "--porcelain") == wt_status
    git(h.project, "checkout", "--", "app.py")

    # Clean and on main: a fast-forward, the uncommitted work committed first; Push is offered.
    since = mark(h)
    assert await press(h, await card(h, "fix-a"), "Merge") == "Merged."
    merged = await after(h, since, "✅ fix-a merged into main (fast-forward, 2 file(s))")
    assert rev(h.project) == rev(h.project, "refs/heads/fix-a")
    subjects = git(h.project, "log", "-2", "--format=%s").splitlines()
    assert subjects == ["Work of @fix-a (uncommitted when merged)", "add the feature"]
    assert (h.project / "lib.py").read_text() == "VALUE = 2\n" and (h.project / "feature.py").is_file()
    assert git(h.project, "status", "--porcelain") == ""
    assert git(h.project, "symbolic-ref", "--short", "HEAD").strip() == "main"

    since = mark(h)
    assert await press(h, merged, "Push to origin") == "Confirm the push."
    confirm = await after(h, since, "Push main to origin?")
    assert rev(remote, "main") != rev(h.project)  # nothing pushed before the confirm
    assert await press(h, confirm, "Push") == "Pushed."
    await h.wait_text(lambda t: t.startswith("⬆️ Pushed main to origin"))
    assert rev(remote, "main") == rev(h.project)

    # Merged and clean: one confirm discards it.
    since = mark(h)
    assert await press(h, await card(h, "fix-a"), "Discard") == "Confirm the discard."
    ask = await after(h, since, "Discard fix-a? Its worktree is removed")
    assert await press(h, ask, "Discard") == "Discarded."
    await h.wait_text(lambda t: t.startswith("🗑 fix-a discarded"))
    assert not wt.exists() and not has_branch(h, "fix-a")
    assert rev(h.project) == rev(remote, "main")  # main keeps the merged work
    since = mark(h)
    h.tg.push_message(OWNER, OWNER, "/branches")
    await after(h, since, "No branches yet")


async def test_a_merge_commit_and_discarding_unmerged_work_asks_twice(h: Harness) -> None:
    app = await h.start()
    await run_branch(h, app, "fix-a", "fix-b")
    commit_file(worktree(h, "fix-a"), "feature_a.py", "A = 1\n", "feature a")
    commit_file(worktree(h, "fix-b"), "feature_b.py", "B = 1\n", "feature b")
    commit_file(h.project, "other.py", "OTHER = 1\n", "main moved on")  # main moved on: no fast-forward

    since = mark(h)
    assert await press(h, await card(h, "fix-a"), "Merge") == "Merged."
    await after(h, since, "✅ fix-a merged into main (merge commit, 1 file(s))")
    parents = git(h.project, "rev-list", "--parents", "-n", "1", "HEAD").split()
    assert parents[1:] == [rev(h.project, "HEAD~1"), rev(h.project, "refs/heads/fix-a")]
    assert (h.project / "feature_a.py").is_file() and (h.project / "other.py").is_file()
    assert git(h.project, "status", "--porcelain") == ""

    # fix-b has a commit main lacks: the first confirm asks again, explicitly.
    wt = worktree(h, "fix-b")
    since = mark(h)
    await press(h, await card(h, "fix-b"), "Discard")
    await press(h, await after(h, since, "Discard fix-b?"), "Discard")
    again = await after(h, since, "⚠️ fix-b has 1 commit(s) not merged into main")
    assert "lose" in again["text"]
    assert await press(h, again, "Keep") == "Cancelled."
    assert wt.is_dir() and has_branch(h, "fix-b")
    assert await press(h, again, "Discard for good") == NOT_YOURS  # Keep retired the prompt's other button
    assert wt.is_dir() and has_branch(h, "fix-b")
    assert "🌿 fix-b (from main" in (await card(h, "fix-b"))["text"]

    since = mark(h)
    await press(h, await card(h, "fix-b"), "Discard")
    await press(h, await after(h, since, "Discard fix-b?"), "Discard")
    assert await press(h, await after(h, since, "⚠️ fix-b has 1 commit"), "Discard for good") == "Discarded."
    await h.wait_text(lambda t: t.startswith("🗑 fix-b discarded"))
    assert not wt.exists() and not has_branch(h, "fix-b")
    assert (h.project / "feature_a.py").is_file() and not (h.project / "feature_b.py").exists()


async def test_a_conflict_changes_nothing_and_resolve_leads_back_to_merge(h: Harness) -> None:
    app = await h.start()
    await run_branch(h, app, "fix-a")
    wt = worktree(h, "fix-a")
    commit_file(wt, "app.py", "print('hello from the branch')\n", "branch greeting")
    commit_file(h.project, "app.py", "print('hello from main')\n", "main greeting")
    before = snapshot(h.project)

    since = mark(h)
    assert await press(h, await card(h, "fix-a"), "Merge") == "Conflict."
    conflict = await after(h, since, "⚠️ fix-a conflicts with main in: app.py. Nothing in the main checkout changed.")
    assert snapshot(h.project) == before
    assert not (h.project / ".git" / "MERGE_HEAD").exists()

    asked = len(h.claude.bodies)
    assert await press(h, conflict, "Resolve") == "Resolving."
    again = await after(h, since, "🛠 fix-a: the resolve session ended. Merge into main now?")
    resolve = [b for b in h.claude.bodies[asked:] if "conflicts in these files" in last_user_text(b)]
    assert resolve and cwd_of(resolve[0]) == str(wt)
    instruction = last_user_text(resolve[0])
    assert "Merging fix-a into main conflicts" in instruction and "- app.py" in instruction
    assert "git merge main" in instruction
    assert snapshot(h.project) == before

    # What the resolve session's agent would do: merge main in, keep both sides, commit.
    env = {"PATH": "/usr/bin:/bin", **GIT_ENV}
    run = subprocess.run(["git", "merge", "-q", "main"], cwd=wt, capture_output=True, env=env, timeout=60)
    assert run.returncode == 1  # the conflict, as the agent meets it
    resolved = "print('hello from main')\nprint('hello from the branch')\n"
    (wt / "app.py").write_text(resolved, encoding="utf-8")
    git(wt, "add", "app.py")
    git(wt, "commit", "-q", "--no-edit")

    since = mark(h)
    assert await press(h, again, "Merge") == "Merged."
    await after(h, since, "✅ fix-a merged into main")
    assert rev(h.project) == rev(h.project, "refs/heads/fix-a")
    assert len(git(h.project, "rev-list", "--parents", "-n", "1", "HEAD").split()) == 3  # a merge commit
    assert (h.project / "app.py").read_text() == resolved
    assert git(h.project, "status", "--porcelain") == ""

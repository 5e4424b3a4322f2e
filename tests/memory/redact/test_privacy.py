"""Private projects: their sessions leave nothing in memory.db (the ingest, the hooks), are never sent to the
extraction model, and their older handoffs are never recalled into another project."""

from __future__ import annotations

import json
import os
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memory.errors import SettingsError
from memory.facade import Eywa
from memory.redact.privacy import PRIVATE_FILE, Privacy, load_privacy, write_private_file
from memory.settings import MemorySettings
from tests.cli_env import run_macupos
from tests.doubles.anthropic import AnthropicDouble
from tests.memory.hook_run import run_hook

SECRET_WORD = "zanzibarquokka"  # what the private project's session talks about


def transcript(path: Path, session_id: str, cwd: Path, text: str, start: datetime) -> Path:
    """A small Claude Code transcript: one request, an answer that edits a file in ``cwd``."""
    lines: list[dict[str, Any]] = []
    for n, (role, content) in enumerate(
        [
            ("user", text),
            (
                "assistant",
                [
                    {"type": "text", "text": f"Working on {text}"},
                    {"type": "tool_use", "id": "t1", "name": "Edit", "input": {"file_path": str(cwd / "main.py")}},
                ],
            ),
            ("user", [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]),
        ]
    ):
        lines.append(
            {
                "type": role,
                "uuid": f"{session_id}-{n}",
                "parentUuid": f"{session_id}-{n - 1}" if n else None,
                "sessionId": session_id,
                "cwd": str(cwd),
                "timestamp": (start + timedelta(minutes=2 * n)).isoformat().replace("+00:00", "Z"),
                "message": {"role": role, "content": content},
            }
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def dump(db_path: Path) -> str:
    """Every row of every table (FTS shadow tables included), as SQL text."""
    with sqlite3.connect(db_path) as conn:
        return "\n".join(conn.iterdump())


@pytest.fixture
def folders(tmp_path: Path) -> tuple[Path, Path]:
    secret, public = tmp_path / "work" / "client-secret", tmp_path / "work" / "garden"
    secret.mkdir(parents=True)
    public.mkdir(parents=True)
    return secret, public


def settings_for(tmp_path: Path, **kw: Any) -> MemorySettings:
    return MemorySettings(
        home=tmp_path / "home", claude_config_dir=tmp_path / "claude", codex_home=tmp_path / "codex", **kw
    )


async def test_a_private_projects_session_leaves_no_row_in_memory(tmp_path: Path, folders: tuple[Path, Path]) -> None:
    secret, public = folders
    now = datetime.now(UTC) - timedelta(hours=1)
    projects = tmp_path / "claude" / "projects"
    hidden = transcript(projects / "-secret" / "s-secret.jsonl", "s-secret", secret, f"fix the {SECRET_WORD}", now)
    shown = transcript(projects / "-garden" / "s-garden.jsonl", "s-garden", public, "water the roses", now)
    settings = settings_for(tmp_path, llm_enabled=False, private_projects=(secret,))

    async with await Eywa.open(settings) as eywa:
        report = await eywa.ingest([hidden, shown])
        again = await eywa.ingest()  # the default folders, as a plain `memory ingest` reads them
        listed = [h.session_id for h in await eywa.list_handoffs()]

    assert report.sessions_private == 1 and report.sessions_new == 1
    assert again.sessions_private == 1 and again.sessions_new == 0
    assert listed == ["s-garden"]
    text = dump(settings.db_path)
    assert SECRET_WORD not in text and "s-secret" not in text and str(secret) not in text
    assert "water the roses" in text
    assert not any(SECRET_WORD in p.read_text() for p in settings.handoffs_dir.rglob("*.md"))


async def test_the_bots_file_makes_a_project_private_without_a_restart(
    tmp_path: Path, folders: tuple[Path, Path]
) -> None:
    secret, _ = folders
    settings = settings_for(tmp_path, llm_enabled=False)
    path = transcript(tmp_path / "t" / "s-1.jsonl", "s-1", secret / "sub", SECRET_WORD, datetime.now(UTC))
    async with await Eywa.open(settings) as eywa:
        write_private_file(settings.home, [secret])
        report = await eywa.ingest([path])
        assert load_privacy(settings).covers(secret / "sub" / "deeper")
        write_private_file(settings.home, [])  # /memory on
        later = await eywa.ingest([path])
    assert report.sessions_private == 1 and later.sessions_new == 1
    assert (settings.home / PRIVATE_FILE).read_text().startswith("#")


async def test_a_session_stored_before_its_project_went_private_is_not_sent_to_the_model(
    tmp_path: Path, folders: tuple[Path, Path], anthropic_double: AnthropicDouble, claude_cli_env: dict[str, str]
) -> None:
    secret, _ = folders
    path = transcript(tmp_path / "t" / "s-old.jsonl", "s-old", secret, SECRET_WORD, datetime.now(UTC))
    settings = settings_for(tmp_path, llm_enabled=True, claude_env=claude_cli_env, llm_timeout_s=60)
    async with await Eywa.open(settings) as eywa:
        await eywa.ingest([path], extract=False)  # stored while memory was on
        write_private_file(settings.home, [secret])
        [handoff] = await eywa.extract("s-old")
    assert handoff.source == "fallback"
    assert anthropic_double.requests == []


async def test_private_handoffs_are_not_recalled_into_another_project(
    tmp_path: Path, folders: tuple[Path, Path]
) -> None:
    secret, public = folders
    now = datetime.now(UTC) - timedelta(days=1)
    paths = [
        transcript(tmp_path / "t" / f"s-secret-{n}.jsonl", f"s-secret-{n}", secret, f"{SECRET_WORD} fix {n}", now)
        for n in range(7)
    ]
    paths.append(transcript(tmp_path / "t" / "s-pub.jsonl", "s-pub", public, f"{SECRET_WORD} garden fix", now))
    settings = settings_for(tmp_path, llm_enabled=False)
    async with await Eywa.open(settings) as eywa:
        await eywa.ingest(paths)  # before the project went private
        write_private_file(settings.home, [secret])
        elsewhere = await eywa.get(SECRET_WORD, viewer=public)
        anywhere = await eywa.get(SECRET_WORD)
        own = await eywa.get(SECRET_WORD, viewer=secret)
        hits = await eywa.search(SECRET_WORD, limit=3, viewer=public)
        own_hits = await eywa.search(SECRET_WORD, limit=3, viewer=secret)
    assert [r.session_id for r in elsewhere.results] == ["s-pub"]
    assert [r.session_id for r in anywhere.results] == ["s-pub"]
    assert SECRET_WORD in elsewhere.text and "client-secret" not in elsewhere.text
    assert len(own.results) == 5 and "s-pub" in {r.session_id for r in own.results}  # its own and public ones
    assert [h.session_id for h in hits] == ["s-pub"]
    assert len(own_hits) == 3


def test_covers_folders_below_and_through_links(tmp_path: Path) -> None:
    real = tmp_path / "real" / "client"
    real.mkdir(parents=True)
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "real")
    privacy = Privacy((real,))
    assert privacy.covers(real) and privacy.covers(str(real / "src"))
    assert privacy.covers(link / "client" / "src")  # the same folder under another name
    assert not privacy.covers(tmp_path / "real" / "client-two") and not privacy.covers("relative/client")
    assert not privacy.covers("") and privacy.names == {"client"}
    assert not privacy.without(real / "src") and privacy.without(tmp_path / "other") == privacy


def test_private_projects_come_from_the_environment_or_config_toml(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "MACUPOS_HOME": str(tmp_path / "home")}
    from_env = MemorySettings.from_env({**env, "MACUPOS_PRIVATE_PROJECTS": "~/work/a, /srv/b"})
    assert from_env.private_projects == (tmp_path / "work" / "a", Path("/srv/b"))
    toml = tmp_path / "config.toml"
    toml.write_text('[memory]\nprivate_projects = ["/srv/c"]\n')
    assert MemorySettings.from_env(env, toml).private_projects == (Path("/srv/c"),)
    with pytest.raises(SettingsError, match="MACUPOS_PRIVATE_PROJECTS"):
        MemorySettings.from_env({**env, "MACUPOS_PRIVATE_PROJECTS": "relative/folder"})


def test_the_hooks_leave_a_private_project_alone(tmp_path: Path, folders: tuple[Path, Path]) -> None:
    secret, public = folders
    home = tmp_path / "home"
    settings = settings_for(tmp_path)
    now = datetime.now(UTC) - timedelta(hours=1)
    projects = settings.claude_config_dir / "projects"
    public_path = transcript(projects / "-garden" / "s-pub.jsonl", "s-pub", public, "water the roses", now)
    secret_path = transcript(projects / "-secret" / "s-sec.jsonl", "s-sec", secret, SECRET_WORD, now)
    write_private_file(home, [secret])  # what the bot writes for `name=path:private` and /memory off
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MACUPOS_", "CLAUDE_", "ANTHROPIC_"))}
    env |= {
        "MACUPOS_HOME": str(home),
        "CLAUDE_CONFIG_DIR": str(settings.claude_config_dir),
        "CODEX_HOME": str(settings.codex_home),
        "MACUPOS_MEMORY_LLM": "0",
    }
    assert run_macupos(env, "memory", "ingest", str(public_path)).returncode == 0

    end = run_hook("session-end", {"session_id": "s-sec", "transcript_path": str(secret_path), "cwd": str(secret)}, env)
    start = run_hook("session-start", {"session_id": "new", "cwd": str(secret), "source": "startup"}, env)
    # What SessionEnd starts elsewhere, run by hand on the private transcript: the ingest leaves it out too.
    by_hand = run_macupos(env, "memory", "ingest", str(secret_path), "--json")
    assert by_hand.returncode == 0, by_hand.stderr

    assert end.returncode == 0 and start.returncode == 0 and start.stdout == ""
    log = (home / "logs" / "hooks.log").read_text()
    assert "private project; not ingested" in log and "private project; no grounding" in log
    assert "started pid" not in log
    assert json.loads(by_hand.stdout)["sessions_private"] == 1
    text = dump(home / "memory.db")
    assert SECRET_WORD not in text and "s-sec" not in text and "water the roses" in text

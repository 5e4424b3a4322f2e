"""Claude Code hooks: merging into settings.json, the SessionStart grounding, the detached SessionEnd ingest."""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import sqlite3
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memory.facade import Eywa
from memory.hooks import (
    HookSettingsError,
    install,
    is_our_command,
    project_for,
    run_session_end,
    run_session_start,
    settings_path_for,
    uninstall,
)
from memory.settings import MemorySettings
from tests.memory.hook_run import run_hook

PYTHON = sys.executable
COMMAND = [PYTHON, "-m", "bot.cli"]


OTHER_START_HOOK = {"matcher": "", "hooks": [{"type": "command", "command": "echo other-tool", "timeout": 3}]}
EXISTING: dict[str, Any] = {
    "model": "opus",
    "permissions": {"allow": ["Bash(ls:*)"]},
    "hooks": {
        "SessionStart": [OTHER_START_HOOK],
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "audit.sh"}]}],
    },
}


def _settings(home: Path, **kw: Any) -> MemorySettings:
    return MemorySettings(
        home=home, claude_config_dir=home / "claude", codex_home=home / "codex", llm_enabled=False, **kw
    )


def _backups(path: Path) -> list[Path]:
    return sorted(path.parent.glob(path.name + ".bak-*"))


def _ours(data: dict[str, Any], event: str) -> list[str]:
    return [h["command"] for g in data["hooks"].get(event, []) for h in g["hooks"] if is_our_command(h["command"])]


# -- settings paths and install / uninstall -----------------------------------------------------------


def test_settings_path_for_user_and_project_scopes(tmp_path: Path) -> None:
    kw = {"claude_config_dir": tmp_path / "cc", "project_dir": tmp_path / "proj"}
    assert settings_path_for("user", **kw) == tmp_path / "cc" / "settings.json"
    assert settings_path_for("project", **kw) == tmp_path / "proj" / ".claude" / "settings.json"


def test_install_keeps_other_keys_and_hooks_adds_ours_once_and_backs_up(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    original = json.dumps(EXISTING, indent=4)
    path.write_text(original)

    result = install(path, COMMAND)

    assert result.changed and set(result.added) == {"SessionStart", "SessionEnd"}
    data = json.loads(path.read_text())
    assert data["model"] == "opus" and data["permissions"] == EXISTING["permissions"]
    assert data["hooks"]["PreToolUse"] == EXISTING["hooks"]["PreToolUse"]
    assert data["hooks"]["SessionStart"][0] == OTHER_START_HOOK
    assert _ours(data, "SessionStart") == [shlex.join([*COMMAND, "memory", "hook", "session-start"])]
    assert _ours(data, "SessionEnd") == [shlex.join([*COMMAND, "memory", "hook", "session-end"])]
    for event in ("SessionStart", "SessionEnd"):
        (hook,) = [h for g in data["hooks"][event] for h in g["hooks"] if is_our_command(h["command"])]
        assert hook["type"] == "command" and isinstance(hook["timeout"], int)
    assert result.backup is not None and result.backup.read_text() == original
    assert _backups(path) == [result.backup]


def test_install_twice_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text(json.dumps(EXISTING))
    install(path, COMMAND)
    after_first = path.read_bytes()

    again = install(path, COMMAND)

    assert not again.changed and again.backup is None
    assert path.read_bytes() == after_first
    assert len(_backups(path)) == 1


def test_install_with_a_new_command_replaces_ours_instead_of_adding(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    install(path, ["/old/venv/bin/macupos"])
    install(path, COMMAND)
    data = json.loads(path.read_text())
    assert _ours(data, "SessionStart") == [shlex.join([*COMMAND, "memory", "hook", "session-start"])]
    assert len(_ours(data, "SessionEnd")) == 1


def test_install_creates_a_missing_file_and_folder_without_backup(tmp_path: Path) -> None:
    path = settings_path_for("project", claude_config_dir=tmp_path / "cc", project_dir=tmp_path / "proj")
    result = install(path, ["/opt/my venv/bin/macupos"])
    assert result.changed and result.backup is None
    data = json.loads(path.read_text())
    # The path with a space is shell-quoted so Claude Code's shell runs the right program.
    assert _ours(data, "SessionStart") == ["'/opt/my venv/bin/macupos' memory hook session-start"]


def test_uninstall_removes_only_ours(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text(json.dumps(EXISTING))
    install(path, COMMAND)

    result = uninstall(path, COMMAND)

    assert result.changed and set(result.removed) == {"SessionStart", "SessionEnd"}
    assert json.loads(path.read_text()) == EXISTING
    assert not uninstall(path, COMMAND).changed


def test_uninstall_keeps_a_foreign_hook_sharing_our_matcher_group(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    ours = {"type": "command", "command": "/usr/bin/macupos memory hook session-end"}
    mixed = {"hooks": {"SessionEnd": [{"matcher": "", "hooks": [ours, {"type": "command", "command": "x.sh"}]}]}}
    path.write_text(json.dumps(mixed))
    uninstall(path, COMMAND)
    assert json.loads(path.read_text()) == {
        "hooks": {"SessionEnd": [{"matcher": "", "hooks": [{"type": "command", "command": "x.sh"}]}]}
    }


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", '{"hooks": []}', '{"hooks": {"SessionEnd": {}}}'])
def test_install_refuses_a_file_it_cannot_merge_and_leaves_it_untouched(tmp_path: Path, content: str) -> None:
    path = tmp_path / "settings.json"
    path.write_text(content)
    with pytest.raises(HookSettingsError, match=r"settings\.json"):
        install(path, COMMAND)
    with pytest.raises(HookSettingsError):
        uninstall(path, COMMAND)
    assert path.read_text() == content
    assert _backups(path) == []


def test_our_commands_are_recognised_and_others_are_not() -> None:
    assert is_our_command("/home/me/.local/bin/macupos memory hook session-start")
    assert is_our_command(shlex.join([*COMMAND, "memory", "hook", "session-end"]))
    assert not is_our_command("echo macupos")
    assert not is_our_command("other-tool hook session-start")


def test_project_is_the_git_root_name_else_the_folder_name(tmp_path: Path) -> None:
    repo = tmp_path / "My_Repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "src" / "pkg").mkdir(parents=True)
    assert project_for(repo / "src" / "pkg") == "my-repo"
    assert project_for(tmp_path / "loose") == "loose"


# -- SessionStart ---------------------------------------------------------------------------------------


def _write_session(path: Path, session_id: str, cwd: Path, requests: list[str], start: datetime) -> Path:
    """A small Claude Code transcript: each request is answered with an edit of a file in ``cwd``."""
    lines: list[dict[str, Any]] = []
    parent: str | None = None
    t = start
    for i, text in enumerate(requests):
        for role, content in (
            ("user", text),
            (
                "assistant",
                [
                    {"type": "text", "text": f"Working on: {text}"},
                    {
                        "type": "tool_use",
                        "id": f"toolu_{i}",
                        "name": "Edit",
                        "input": {"file_path": str(cwd / f"module_{i}.py"), "old_string": "a", "new_string": "b"},
                    },
                ],
            ),
            ("user", [{"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": "ok"}]),
        ):
            uuid = f"{session_id}-{len(lines)}"
            lines.append(
                {
                    "type": role,
                    "uuid": uuid,
                    "parentUuid": parent,
                    "sessionId": session_id,
                    "cwd": str(cwd),
                    "timestamp": t.isoformat().replace("+00:00", "Z"),
                    "isSidechain": False,
                    "message": {"role": role, "content": content},
                }
            )
            parent = uuid
            t += timedelta(minutes=3)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


@pytest.fixture
async def grounded_home(tmp_path: Path) -> tuple[MemorySettings, Path]:
    """A memory home with two recent sessions of project `orbit-planner` and one of another project."""
    settings = _settings(tmp_path / "home")
    projects = tmp_path / "claude" / "projects" / "-work-orbit-planner"
    repo = tmp_path / "work" / "orbit-planner"
    (repo / ".git").mkdir(parents=True)
    other = tmp_path / "work" / "garden-journal"
    other.mkdir(parents=True)
    now = datetime.now(UTC).replace(microsecond=0)
    paths = [
        _write_session(
            projects / "s-orbit-1.jsonl",
            "s-orbit-1",
            repo,
            ["Add the hohmann transfer calculator", "Write tests for the transfer window"],
            now - timedelta(days=2),
        ),
        _write_session(
            projects / "s-orbit-2.jsonl",
            "s-orbit-2",
            repo,
            ["Fix the delta-v rounding bug in the planner"],
            now - timedelta(days=1),
        ),
        _write_session(
            projects / "s-garden.jsonl", "s-garden", other, ["Add a watering schedule page"], now - timedelta(hours=5)
        ),
    ]
    eywa = await Eywa.open(settings)
    try:
        await eywa.ingest(paths, use_llm=False)
    finally:
        await eywa.close()
    return settings, repo


async def test_session_start_returns_the_projects_handoffs_as_additional_context(
    grounded_home: tuple[MemorySettings, Path],
) -> None:
    settings, repo = grounded_home
    payload = {
        "session_id": "new",
        "transcript_path": "/x.jsonl",
        "cwd": str(repo / "src"),
        "hook_event_name": "SessionStart",
        "source": "startup",
    }

    out = await run_session_start(settings, payload)

    data = json.loads(out)
    assert data["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    context = data["hookSpecificOutput"]["additionalContext"]
    assert "hohmann" in context.lower() and "delta-v" in context.lower()
    assert "watering" not in context.lower()


async def test_session_start_in_an_unknown_project_grounds_on_recent_work(
    grounded_home: tuple[MemorySettings, Path], tmp_path: Path
) -> None:
    settings, _ = grounded_home
    out = await run_session_start(settings, {"cwd": str(tmp_path / "brand-new-thing"), "source": "startup"})

    context = json.loads(out)["hookSpecificOutput"]["additionalContext"]
    assert "watering" in context.lower()  # the most recent session, whatever its project


async def test_session_start_without_a_database_prints_nothing(tmp_path: Path) -> None:
    settings = _settings(tmp_path / "home")
    assert await run_session_start(settings, {"cwd": str(tmp_path)}) == ""
    assert not settings.db_path.exists()


async def test_session_start_on_an_empty_database_file_prints_nothing_and_creates_no_schema(tmp_path: Path) -> None:
    settings = _settings(tmp_path / "home")
    settings.home.mkdir(parents=True)
    settings.db_path.write_bytes(b"")
    assert await run_session_start(settings, {"cwd": str(tmp_path)}) == ""
    assert settings.db_path.stat().st_size == 0


@pytest.mark.parametrize("event", ["session-start", "session-end"])
def test_a_hook_with_a_bad_setting_fails_open_and_logs_it(tmp_path: Path, event: str) -> None:
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MACUPOS_", "CLAUDE_", "ANTHROPIC_"))}
    env |= {"MACUPOS_HOME": str(home), "MACUPOS_TIMEZONE": "Mars/Olympus", "CLAUDE_CONFIG_DIR": str(tmp_path / "c")}
    proc = run_hook(event, {"cwd": str(tmp_path), "transcript_path": str(tmp_path / "t.jsonl")}, env)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")  # Claude Code sees nothing wrong
    assert "not an IANA timezone" in (home / "logs" / "hooks.log").read_text()


def test_install_writes_through_a_symlinked_settings_file(tmp_path: Path) -> None:
    target = tmp_path / "dotfiles" / "settings.json"
    target.parent.mkdir()
    target.write_text('{"model": "opus"}')
    link = tmp_path / "claude" / "settings.json"
    link.parent.mkdir()
    link.symlink_to(target)
    install(link, COMMAND)
    assert link.is_symlink() and json.loads(target.read_text())["model"] == "opus"
    assert "SessionStart" in json.loads(target.read_text())["hooks"]


async def test_session_start_fails_open_quickly_on_a_broken_database(tmp_path: Path) -> None:
    settings = _settings(tmp_path / "home", hook_budget_s=2.0)
    settings.home.mkdir(parents=True)
    settings.db_path.write_bytes(b"this is not sqlite at all\n" * 100)

    started = time.monotonic()
    out = await run_session_start(settings, {"cwd": str(tmp_path), "hook_event_name": "SessionStart"})

    assert out == ""
    assert time.monotonic() - started < 2.0
    log = (settings.home / "logs" / "hooks.log").read_text()
    assert "session-start" in log and "not a Macupos memory database" in log


async def test_session_start_gives_up_within_its_budget_when_the_database_is_held(
    grounded_home: tuple[MemorySettings, Path],
) -> None:
    settings, repo = grounded_home
    settings = replace(settings, hook_budget_s=0.5)
    holder = sqlite3.connect(settings.db_path)
    try:
        # Exclusive locking mode keeps every other connection out, readers included, until closed.
        holder.execute("PRAGMA locking_mode=EXCLUSIVE")
        holder.execute("BEGIN EXCLUSIVE")
        holder.execute("CREATE TABLE IF NOT EXISTS held(x)")
        holder.commit()
        started = time.monotonic()
        out = await run_session_start(settings, {"cwd": str(repo)})
        elapsed = time.monotonic() - started
    finally:
        holder.close()

    assert out == ""
    assert elapsed < 3.0
    assert "session-start" in (settings.home / "logs" / "hooks.log").read_text()


def test_session_start_hook_command_end_to_end(grounded_home: tuple[MemorySettings, Path]) -> None:
    settings, repo = grounded_home
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MACUPOS_", "CLAUDE_", "ANTHROPIC_"))}
    env |= {
        "MACUPOS_HOME": str(settings.home),
        "CLAUDE_CONFIG_DIR": str(settings.claude_config_dir),
        "CODEX_HOME": str(settings.codex_home),
        "MACUPOS_MEMORY_LLM": "0",
    }
    payload = {
        "session_id": "e2e",
        "transcript_path": "/nowhere.jsonl",
        "cwd": str(repo),
        "hook_event_name": "SessionStart",
        "source": "startup",
    }

    proc = run_hook("session-start", payload, env)

    assert proc.returncode == 0, proc.stderr
    context = json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "hohmann" in context.lower()


# -- SessionEnd -----------------------------------------------------------------------------------------

# Stands in for `macupos`: reports its pid, session and argv over a socket, then lingers like a long ingest.
_RECORDER = (
    "import json, os, socket, sys, time; port = int(sys.argv[1]); "
    "msg = json.dumps({'pid': os.getpid(), 'sid': os.getsid(0), 'argv': sys.argv[2:]}) + chr(10); "
    "socket.create_connection(('127.0.0.1', port)).sendall(msg.encode()); time.sleep(60)"
)


@contextmanager
def _listener() -> Iterator[socket.socket]:
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.settimeout(30)
        yield server


def _report(server: socket.socket) -> dict[str, Any]:
    """The recorder's report: blocks until the detached child connects (or the timeout fails the test)."""
    conn, _ = server.accept()
    with conn, conn.makefile("r") as fh:
        data: dict[str, Any] = json.loads(fh.readline())
    return data


@pytest.mark.filterwarnings("ignore:subprocess .* is still running:ResourceWarning")
def test_session_end_starts_a_detached_ingest_of_the_transcript_and_its_subagents(tmp_path: Path) -> None:
    settings = _settings(tmp_path / "home")
    folder = tmp_path / "claude" / "projects" / "-work-x"
    transcript = _write_session(folder / "sess-9.jsonl", "sess-9", tmp_path, ["hello"], datetime.now(UTC))
    subagents = folder / "sess-9" / "subagents"
    subagents.mkdir(parents=True)

    with _listener() as server:
        started = time.monotonic()
        run_session_end(
            settings,
            {"session_id": "sess-9", "transcript_path": str(transcript), "hook_event_name": "SessionEnd"},
            detach_command=[PYTHON, "-c", _RECORDER, str(server.getsockname()[1])],
        )
        elapsed = time.monotonic() - started
        seen = _report(server)
    try:
        assert elapsed < 1.0  # returned while the child still runs
        assert seen["argv"] == ["memory", "ingest", str(transcript), str(subagents)]
        assert seen["sid"] == seen["pid"]  # its own session: Claude's exit does not take it down
    finally:
        os.kill(seen["pid"], signal.SIGKILL)


def test_session_end_without_a_transcript_starts_nothing(tmp_path: Path) -> None:
    settings = _settings(tmp_path / "home")
    # A command that would fail loudly if it ever ran.
    never = [PYTHON, "-c", "raise SystemExit('must not run')"]
    run_session_end(
        settings, {"session_id": "x", "transcript_path": str(tmp_path / "missing.jsonl")}, detach_command=never
    )
    run_session_end(settings, {}, detach_command=never)
    log = (settings.home / "logs" / "hooks.log").read_text()
    assert "is not a file" in log and "no transcript_path" in log
    assert "started pid" not in log


def test_install_result_reads_well_in_the_cli(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text("{}")
    first = install(path, COMMAND)
    assert str(first).startswith("installed SessionStart, SessionEnd; backup at ")
    assert str(install(path, COMMAND)) == "unchanged (already as wanted)"
    assert str(uninstall(path, COMMAND)).startswith("removed SessionStart, SessionEnd")

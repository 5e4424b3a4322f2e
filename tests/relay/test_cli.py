"""`macupos relay ask` through a real subprocess, and the settings the edge builds for it."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from memory import read_config_toml
from memory.facade import Eywa
from memory.settings import MemorySettings
from relay.settings import RelaySettings
from tests.cli_env import MACUPOS, arun_macupos
from tests.doubles.anthropic import AnthropicDouble


@pytest.fixture
def cli_env(claude_cli_env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "mhome"
    home.mkdir()
    (home / "config.toml").write_text("[relay]\nsetting_sources = []\nmemory_mcp = false\n", encoding="utf-8")
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        **claude_cli_env,
        "MACUPOS_HOME": str(home),
        "CLAUDE_CODE_MAX_RETRIES": "0",
        "MACUPOS_MEMORY_LLM": "0",  # handoffs by the deterministic extractor: no second model call
        "CODEX_HOME": str(tmp_path / "codex"),
    }


async def macupos(env: dict[str, str], *args: str) -> tuple[int, str, str]:
    """The installed console script, as the owner runs it."""
    return await arun_macupos(env, *args, command=(str(MACUPOS),), timeout_s=240)


async def test_ask_json_prints_the_answer_and_the_session_id(
    anthropic_double: AnthropicDouble, cli_env: dict[str, str], tmp_path: Path
) -> None:
    anthropic_double.enqueue("the build is green")
    rc, out, err = await macupos(
        cli_env, "relay", "ask", "is the build green?", "--project", str(tmp_path), "--json", "--no-codex"
    )
    assert rc == 0, err
    data = json.loads(out)
    assert set(data) == {"answer", "session_id", "cost_usd", "tokens", "duration_s"}
    assert data["answer"] == "the build is green" and data["tokens"] == 15 and data["cost_usd"] > 0
    assert "Acceptance criteria first" in str(anthropic_double.bodies[0]["system"])
    assert (Path(cli_env["MACUPOS_HOME"]) / "MEMORY.md").is_file()
    memory = MemorySettings(
        home=Path(cli_env["MACUPOS_HOME"]), claude_config_dir=Path(cli_env["CLAUDE_CONFIG_DIR"]), codex_home=tmp_path
    )
    async with await Eywa.open(memory) as eywa:  # the session went into memory with its handoff
        view = await eywa.show(data["session_id"])
    assert view.session is not None and view.handoff is not None


async def test_ask_grounds_the_session_with_the_owners_facts(
    anthropic_double: AnthropicDouble, cli_env: dict[str, str], tmp_path: Path
) -> None:
    script = "remember editor user Fact predicate favorite-editor object Helix confidence 0.9; respond ok"
    rc, _, err = await macupos(cli_env, "memory", "script", script)
    assert rc == 0, err
    anthropic_double.enqueue("noted")
    rc, _, err = await macupos(cli_env, "relay", "ask", "which editor?", "--project", str(tmp_path), "--no-codex")
    assert rc == 0, err
    system = str(anthropic_double.bodies[0]["system"])
    assert "favorite-editor" in system and "Helix" in system


async def test_ask_offers_claude_the_codex_relay_tools(
    anthropic_double: AnthropicDouble, cli_env: dict[str, str], codex_home: dict[str, str], tmp_path: Path
) -> None:
    rc, out, err = await macupos(
        {**cli_env, **codex_home, "HOME": cli_env["HOME"]}, "relay", "ask", "hi", "--project", str(tmp_path)
    )
    assert rc == 0, err
    answer, footer = out.rsplit("\n\nsession ", 1)
    assert answer == "ok" and " tokens · " in footer
    assert "mcp__relay__codex" in json.dumps(anthropic_double.bodies[0])


async def test_ask_reports_an_api_failure_as_an_error(
    anthropic_double: AnthropicDouble, cli_env: dict[str, str], tmp_path: Path
) -> None:
    from tests.doubles.anthropic import ErrorReply

    anthropic_double.enqueue(ErrorReply(500, "api_error", "down for maintenance"))
    rc, out, err = await macupos(cli_env, "relay", "ask", "hello", "--project", str(tmp_path), "--no-codex")
    assert rc == 1 and out == ""
    assert "API Error" in err


def memory_settings(tmp_path: Path) -> MemorySettings:
    return MemorySettings(home=tmp_path / "m", claude_config_dir=tmp_path / "c", codex_home=tmp_path / "x")


def test_settings_defaults(tmp_path: Path) -> None:
    s = RelaySettings.from_env({}, None, memory=memory_settings(tmp_path))
    assert s.permission_mode == "default" and s.claude_model is None
    assert s.deadline_s == 1800 and s.idle_timeout_s == 300
    assert s.rules_path == tmp_path / "m" / "MEMORY.md"
    assert s.setting_sources is None and s.memory_mcp


def test_settings_environment_wins_over_toml(tmp_path: Path) -> None:
    toml: dict[str, Any] = {
        "relay": {
            "permission_mode": "plan",
            "claude_model": "from-toml",
            "disallowed_tools": ["Bash(rm:*)", "WebFetch"],
            "stages": {"plan": {"effort": "high"}},
        }
    }
    env = {"MACUPOS_CLAUDE_MODEL": "from-env", "MACUPOS_RELAY_IDLE_TIMEOUT_S": "7", "CLAUDE_CONFIG_DIR": "/cfg"}
    s = RelaySettings.from_env(env, toml, memory=memory_settings(tmp_path))
    assert s.claude_model == "from-env" and s.permission_mode == "plan" and s.idle_timeout_s == 7.0
    assert s.disallowed_tools == ("Bash(rm:*)", "WebFetch")
    assert dict(s.codex_stages["plan"]) == {"effort": "high"}
    assert s.claude_config_dir == Path("/cfg") and s.env["CLAUDE_CONFIG_DIR"] == "/cfg"


@pytest.mark.parametrize("mode", ["bypassPermissions", "yolo"])
def test_settings_refuse_unsafe_or_unknown_permission_modes(mode: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="permission mode"):
        RelaySettings.from_env({"MACUPOS_PERMISSION_MODE": mode}, None, memory=memory_settings(tmp_path))


@pytest.mark.parametrize(
    ("stages", "message"),
    [({"plna": {"effort": "high"}}, "unknown relay stage"), ({"plan": {"effort": "hgih"}}, "must be one of")],
)
def test_settings_refuse_a_bad_stage_override_at_startup(stages: dict[str, Any], message: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=message):
        RelaySettings.from_env({}, {"relay": {"stages": stages}}, memory=memory_settings(tmp_path))


def test_config_toml_missing_is_empty_and_malformed_is_an_error(tmp_path: Path) -> None:
    assert read_config_toml(tmp_path / "none.toml") == {}
    bad = tmp_path / "bad.toml"
    bad.write_text("[relay\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.toml"):
        read_config_toml(bad)


@pytest.mark.parametrize("command", ["ask", "run"])
async def test_an_empty_instruction_is_a_usage_error_and_calls_no_model(
    anthropic_double: AnthropicDouble, cli_env: dict[str, str], tmp_path: Path, command: str
) -> None:
    for blank in ("", "  \n "):
        rc, out, err = await macupos(cli_env, "relay", command, blank, "--project", str(tmp_path))
        assert rc == 2 and "is empty" in err and out == ""
    assert anthropic_double.requests == []

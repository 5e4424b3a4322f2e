"""Fuzzing the relay settings: any config.toml bytes and any environment give settings or one ValueError.

`macupos bot` and the relay commands report a ValueError as one ``configuration:`` line; anything else
would be a traceback at startup. What is accepted must be usable: positive finite seconds, a known mode.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from memory.settings import MemorySettings
from relay.settings import PERMISSION_MODES, RelaySettings, read_config_toml
from tests.fuzzing import fuzz_settings, mutated_bytes, records, shaped, texts, toml_text
from tests.memory.test_fuzz_settings import MEMORY_TABLE, REAL_CONFIG

_NUMBER = st.one_of(st.integers(), st.floats(), st.sampled_from(["30", "1e3", "nan", "inf", "-1", "", "ten", "٣"]))
_TOOLS = st.one_of(texts, st.lists(st.one_of(texts, st.integers()), max_size=3), st.sampled_from(["Read,Bash"]))
_STAGE = records(
    {},
    {
        "sandbox": shaped(st.sampled_from(["read-only", "workspace-write", "danger"])),
        "effort": shaped(st.sampled_from(["low", "high", "highest", "", "extreme"])),
        "model": shaped(st.sampled_from(["gpt-5-codex", ""])),
        "timeout_s": shaped(_NUMBER),
        "x": texts,
    },
)
RELAY_TABLE = records(
    {},
    {
        "permission_mode": shaped(st.sampled_from(["default", "acceptEdits", "plan", "bypassPermissions", "x"])),
        "claude_model": shaped(texts),
        "memory_md": shaped(st.sampled_from(["~/rules.md", "~nosuchuser/rules.md", "rules.md", ""])),
        "setting_sources": shaped(st.one_of(st.sampled_from(["user,project", "local", "nope"]), _TOOLS)),
        "max_turns": shaped(_NUMBER),
        "allowed_tools": shaped(_TOOLS),
        "disallowed_tools": shaped(_TOOLS),
        "deadline_s": shaped(_NUMBER),
        "idle_timeout_s": shaped(_NUMBER),
        "memory_mcp": shaped(st.one_of(st.booleans(), texts)),
        "stages": shaped(st.dictionaries(st.sampled_from(["plan", "execute", "nope"]), shaped(_STAGE), max_size=2)),
    },
    max_extra=4,
)
config_bytes = st.one_of(
    records({"relay": shaped(RELAY_TABLE)}, {"memory": shaped(MEMORY_TABLE)}).map(
        lambda d: toml_text(d).encode("utf-8", "surrogatepass")
    ),
    mutated_bytes(REAL_CONFIG),
    st.binary(max_size=80),
)
_ENV_TEXT = st.one_of(texts, _NUMBER.map(str), st.sampled_from(["~/x", "~nosuchuser/x"])).map(
    lambda s: s.replace("\x00", "")
)
relay_env = records(
    {},
    {
        k: _ENV_TEXT
        for k in (
            "MACUPOS_PERMISSION_MODE",
            "MACUPOS_CLAUDE_MODEL",
            "MACUPOS_MEMORY_MD",
            "MACUPOS_CLAUDE_SETTING_SOURCES",
            "MACUPOS_CLAUDE_MAX_TURNS",
            "MACUPOS_ALLOWED_TOOLS",
            "MACUPOS_DISALLOWED_TOOLS",
            "MACUPOS_RELAY_DEADLINE_S",
            "MACUPOS_RELAY_IDLE_TIMEOUT_S",
            "MACUPOS_RELAY_MEMORY_MCP",
        )
    },
    max_extra=3,
)


@fuzz_settings()
@given(env=relay_env, config=config_bytes)
@example(env={}, config=b"relay = 3\n")  # not a table
@example(env={}, config=b"[relay]\nmax_turns = inf\n")  # int(inf): OverflowError
@example(env={}, config=b"[relay]\nmax_turns = [1]\n")  # int([1]): TypeError
@example(env={}, config=b"[relay]\nallowed_tools = 3\n")  # iterating an int
@example(env={}, config=b"[relay.stages]\nplan = 3\n")  # dict(3)
@example(env={"MACUPOS_RELAY_DEADLINE_S": "nan"}, config=b"")  # nan passed "> 0"
@example(env={}, config=b'[relay]\nmemory_md = "~nosuchuser/rules.md"\n')  # expanduser: RuntimeError
@example(env={}, config=b'[memory]\nx = "\xff"\n')  # not UTF-8
def test_any_config_and_environment_give_relay_settings_or_a_value_error(
    tmp_path: Path, env: dict[str, Any], config: bytes
) -> None:
    path = tmp_path / "config.toml"
    path.write_bytes(config)
    memory = MemorySettings(home=tmp_path / "home", claude_config_dir=tmp_path / "c", codex_home=tmp_path / "x")
    try:
        got = RelaySettings.from_env(env, read_config_toml(path), memory=memory)
    except ValueError as exc:
        assert str(exc)
        return
    assert got.permission_mode in PERMISSION_MODES
    for seconds in (got.deadline_s, got.idle_timeout_s):
        assert math.isfinite(seconds) and seconds > 0
    assert got.max_turns is None or got.max_turns > 0
    assert all(isinstance(t, str) and t for t in (*got.allowed_tools, *got.disallowed_tools))

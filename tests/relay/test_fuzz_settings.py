"""Fuzzing config.toml and the environment as the `macupos` edge reads them: memory settings (the ``[memory]``
table, memory/settings.py), then relay settings (``[relay]``, relay/settings.py) from the same file.

Any bytes and any environment give settings or one typed error: SettingsError from the memory part,
ValueError from the relay part; the edge prints either as one ``configuration:`` line, where anything else
would be a traceback at startup. What is accepted must be usable: finite numbers, positive seconds, a known
mode. Documents are generated table by table (good and bad values for every key), or are a real config.toml
damaged byte by byte, or are plain bytes.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from memory import read_config_toml
from memory.errors import SettingsError
from memory.settings import MemorySettings
from relay.settings import PERMISSION_MODES, RelaySettings
from tests.fuzzing import fuzz_settings, mutated_bytes, records, shaped, texts, toml_text

REAL_CONFIG = b"""[memory]
timezone = "Europe/Paris"
window_days = 14
max_handoffs = 3
own_secrets = ["hunter2", "s3cr3t"]
llm_enabled = false
llm_timeout_s = 90.5
tool_output_limit = 2000
facts_half_life_days = 30

[relay]
permission_mode = "acceptEdits"
allowed_tools = ["Read", "Bash"]
deadline_s = 1800
max_turns = 40
setting_sources = "user,project"

[relay.stages.plan]
effort = "high"
timeout_s = 600
"""

_NUMBER = st.one_of(st.integers(), st.floats(), st.sampled_from(["14", "1e3", "nan", "inf", "-1", "", "ten", "٣"]))
_ZONES = st.sampled_from(["UTC", "Europe/Paris", "Etc/GMT+12", "America", "../etc/passwd", "", "Z"])
_MEMORY = records(
    {},
    {
        "timezone": shaped(_ZONES),
        "window_days": shaped(_NUMBER),
        "max_handoffs": shaped(_NUMBER),
        "own_secrets": shaped(st.one_of(texts, st.lists(texts, max_size=3))),
        "llm_model": shaped(texts),
        "llm_enabled": shaped(st.one_of(st.booleans(), texts)),
        "llm_timeout_s": shaped(_NUMBER),
        "extract_concurrency": shaped(_NUMBER),
        "tool_output_limit": shaped(_NUMBER),
        "hook_budget_s": shaped(_NUMBER),
        "facts_half_life_days": shaped(_NUMBER),
        "facts_push_every_s": shaped(_NUMBER),
        "facts_pull_every_s": shaped(_NUMBER),
    },
)
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
_RELAY = records(
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
)
config_bytes = st.one_of(
    records({"memory": shaped(_MEMORY), "relay": shaped(_RELAY)}, {}).map(
        lambda d: toml_text(d).encode("utf-8", "surrogatepass")
    ),
    mutated_bytes(REAL_CONFIG),
    st.binary(max_size=80),
)
# Environment values are any text a process can hold: no NUL, but undecodable bytes arrive as lone surrogates.
_ENV_TEXT = st.one_of(texts, _NUMBER.map(str), st.sampled_from(["~", "~/x", "~nosuchuser/x", "relative/dir"])).map(
    lambda s: s.replace("\x00", "")
)
_ENV_KEYS = (
    "MACUPOS_HOME",
    "CLAUDE_CONFIG_DIR",
    "CODEX_HOME",
    "MACUPOS_TIMEZONE",
    "MACUPOS_SECRETS",
    "MACUPOS_MEMORY_LLM",
    "MACUPOS_MEMORY_WINDOW_DAYS",
    "MACUPOS_MEMORY_MAX_HANDOFFS",
    "MACUPOS_MEMORY_LLM_TIMEOUT",
    "MACUPOS_MEMORY_CONCURRENCY",
    "MACUPOS_FACTS_HALF_LIFE_DAYS",
    "MACUPOS_FACTS_PUSH_EVERY_S",
    "MACUPOS_PERMISSION_MODE",
    "MACUPOS_CLAUDE_MODEL",
    "MACUPOS_MEMORY_MD",
    "MACUPOS_CLAUDE_SETTING_SOURCES",
    "MACUPOS_CLAUDE_MAX_TURNS",
    "MACUPOS_ALLOWED_TOOLS",
    "MACUPOS_RELAY_DEADLINE_S",
    "MACUPOS_RELAY_IDLE_TIMEOUT_S",
    "MACUPOS_RELAY_MEMORY_MCP",
)
environments = records({}, {k: _ENV_TEXT for k in _ENV_KEYS})


@fuzz_settings()
@given(env=environments, config=config_bytes)
@example(env={}, config=b'[memory]\ntimezone = "\xff"\n')  # not UTF-8: tomllib raises UnicodeDecodeError
@example(env={"MACUPOS_HOME": "~nosuchuser/macupos"}, config=b"")  # expanduser raises RuntimeError
@example(env={}, config=b"relay = 3\n")  # not a table
@example(env={}, config=b"[relay]\nmax_turns = inf\n")  # int(inf): OverflowError
@example(env={}, config=b"[relay]\nmax_turns = [1]\n")  # int([1]): TypeError
@example(env={}, config=b"[relay]\nallowed_tools = 3\n")  # iterating an int
@example(env={}, config=b"[relay.stages]\nplan = 3\n")  # dict(3)
@example(env={"MACUPOS_RELAY_DEADLINE_S": "nan"}, config=b"")  # nan passed "> 0"
@example(env={}, config=b"[relay]\ndeadline_s = " + b"9" * 400 + b"\n")  # float() of it: OverflowError
@example(env={}, config=b'[relay]\nmemory_md = "~nosuchuser/rules.md"\n')  # expanduser: RuntimeError
def test_any_config_and_environment_give_settings_or_one_typed_error(
    tmp_path: Path, env: dict[str, Any], config: bytes
) -> None:
    path = tmp_path / "config.toml"
    path.write_bytes(config)
    env = {"HOME": str(tmp_path), **env}
    try:
        memory = MemorySettings.from_env(env, toml_path=path)
    except SettingsError as exc:
        assert exc.setting, "the error names the setting"
        return
    numbers = (memory.window_days, memory.llm_timeout_s, memory.hook_budget_s, memory.facts_half_life_days)
    assert all(math.isfinite(x) for x in numbers)
    assert memory.extract_concurrency >= 1 and memory.max_handoffs <= 5
    try:
        relay = RelaySettings.from_env(env, read_config_toml(path), memory=memory)
    except ValueError as exc:
        assert str(exc)
        return
    assert relay.permission_mode in PERMISSION_MODES
    for seconds in (relay.deadline_s, relay.idle_timeout_s):
        assert math.isfinite(seconds) and seconds > 0
    assert relay.max_turns is None or relay.max_turns > 0
    assert all(isinstance(t, str) and t for t in (*relay.allowed_tools, *relay.disallowed_tools))

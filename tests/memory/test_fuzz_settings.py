"""Fuzzing the memory settings: any config.toml bytes and any environment give settings or one SettingsError.

The edge (`macupos`) turns a SettingsError into one line naming the setting; anything else would be a
traceback at startup. Documents are generated table by table (good and bad values for every key), or are a
real config.toml damaged byte by byte, or are plain bytes.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from memory.errors import SettingsError
from memory.settings import MemorySettings
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

_NUMBER = st.one_of(st.integers(), st.floats(), st.sampled_from(["14", "1e3", "nan", "inf", "", "ten", "1_000", "٣"]))
_ZONES = st.sampled_from(["UTC", "Europe/Paris", "Etc/GMT+12", "America", "../etc/passwd", "", "Z"])
MEMORY_TABLE = records(
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
    max_extra=4,
)
config_bytes = st.one_of(
    st.fixed_dictionaries({"memory": shaped(MEMORY_TABLE)}).map(
        lambda d: toml_text(d).encode("utf-8", "surrogatepass")
    ),
    mutated_bytes(REAL_CONFIG),
    st.binary(max_size=80),
)
# Environment values are any text a process can hold: no NUL, but undecodable bytes arrive as lone surrogates.
_ENV_TEXT = st.one_of(texts, _NUMBER.map(str), st.sampled_from(["~", "~/x", "~nosuchuser/x", "relative/dir"]))
_ENV_TEXT = _ENV_TEXT.map(lambda s: s.replace("\x00", ""))
memory_env = records(
    {},
    {
        k: _ENV_TEXT
        for k in (
            "MACUPOS_HOME",
            "CLAUDE_CONFIG_DIR",
            "CODEX_HOME",
            "MACUPOS_TIMEZONE",
            "MACUPOS_SECRETS",
            "MACUPOS_MEMORY_LLM",
            "MACUPOS_MEMORY_MODEL",
            "MACUPOS_MEMORY_WINDOW_DAYS",
            "MACUPOS_MEMORY_MAX_HANDOFFS",
            "MACUPOS_MEMORY_LLM_TIMEOUT",
            "MACUPOS_MEMORY_CONCURRENCY",
            "MACUPOS_FACTS_HALF_LIFE_DAYS",
            "MACUPOS_FACTS_PUSH_EVERY_S",
            "MACUPOS_FACTS_PULL_EVERY_S",
        )
    },
    max_extra=3,
)


def _load(tmp_path: Path, env: dict[str, str], config: bytes) -> MemorySettings | SettingsError:
    toml = tmp_path / "config.toml"
    toml.write_bytes(config)
    try:
        return MemorySettings.from_env({"HOME": str(tmp_path), **env}, toml_path=toml)
    except SettingsError as exc:
        return exc


@fuzz_settings()
@given(env=memory_env, config=config_bytes)
@example(env={}, config=b'[memory]\ntimezone = "\xff"\n')  # not UTF-8: tomllib raises UnicodeDecodeError
@example(env={"MACUPOS_HOME": "~nosuchuser/macupos"}, config=b"")  # expanduser raises RuntimeError
def test_any_config_and_environment_give_settings_or_a_settings_error(
    tmp_path: Path, env: dict[str, Any], config: bytes
) -> None:
    got = _load(tmp_path, env, config)
    if isinstance(got, SettingsError):
        assert got.setting, "the error names the setting"
        return
    numbers = (got.window_days, got.llm_timeout_s, got.hook_budget_s, got.facts_half_life_days)
    assert all(math.isfinite(x) for x in numbers)
    assert got.extract_concurrency >= 1 and got.max_handoffs <= 5

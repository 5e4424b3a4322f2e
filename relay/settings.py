"""Typed settings for the relay, built once at the edge from the environment and the parsed config.toml.

Library code never reads ``os.environ``: the composition root (macupos/cli.py) loads the configuration once
(memory/config/loader.py states the precedence) and passes its mapping here; the same mapping is what the Claude
Code and Codex CLIs inherit.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal, cast

from memory import MemorySettings
from relay.stages import APPROVAL_POLICIES, STAGES, stage_configs

__all__ = ["PERMISSION_MODES", "SETTINGS_KEY", "PermissionModeName", "RelaySettings"]

PermissionModeName = Literal["default", "acceptEdits", "plan"]
# "bypassPermissions" is left out on purpose: the CLI refuses it as root, and it would skip can_use_tool.
PERMISSION_MODES: tuple[str, ...] = ("default", "acceptEdits", "plan")

# Where the `macupos` root hands the relay commands their settings factory (click ctx.meta).
SETTINGS_KEY = "macupos.relay_settings"
DEFAULT_DEADLINE_S = 30 * 60.0
DEFAULT_IDLE_TIMEOUT_S = 5 * 60.0


def _tools(raw: Any, name: str) -> tuple[str, ...]:
    if raw is None:
        return ()
    if isinstance(raw, str):
        return tuple(t for t in (x.strip() for x in raw.split(",")) if t)
    if not isinstance(raw, list | tuple):
        raise ValueError(f"relay setting {name} must be a comma-separated string or a list, not {raw!r}")
    return tuple(str(t).strip() for t in raw if str(t).strip())


def _count(name: str, raw: Any) -> int | None:
    if raw is None or raw == "":
        return None
    try:
        if isinstance(raw, bool) or not isinstance(raw, int | str):
            raise ValueError  # a float (inf, 1.5), a list: not a count
        value = int(raw)
    except ValueError:
        raise ValueError(f"relay setting {name} must be a whole number, not {raw!r}") from None
    if value <= 0:
        raise ValueError(f"relay setting {name} must be positive, not {value}")
    return value


def _positive(name: str, raw: Any) -> float:
    try:
        value = float(raw)
    except (TypeError, ValueError, OverflowError) as exc:  # OverflowError: an int beyond any float
        raise ValueError(f"relay setting {name} must be a number of seconds, not {raw!r}") from exc
    if not value > 0 or math.isinf(value):  # NaN fails "> 0" too; an endless wait is no deadline
        raise ValueError(f"relay setting {name} must be a positive number of seconds, not {raw!r}")
    return value


def _path(name: str, raw: Any) -> Path | None:
    if not raw:
        return None
    try:
        return Path(str(raw)).expanduser()
    except RuntimeError:  # "~name/…" of a user this machine does not know
        raise ValueError(f"relay setting {name} names an unknown user's home: {raw!r}") from None


def _flag(raw: Any) -> bool:
    return str(raw).strip().lower() not in {"0", "false", "no", "off", ""}


@dataclass(frozen=True, slots=True)
class RelaySettings:
    memory: MemorySettings
    rules_path: Path
    claude_model: str | None = None  # None: the CLI's own default
    permission_mode: PermissionModeName = "default"
    allowed_tools: tuple[str, ...] = ()
    disallowed_tools: tuple[str, ...] = ()
    deadline_s: float = DEFAULT_DEADLINE_S
    idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S
    # None: the CLI's defaults (user, project, local settings); () loads none (tests, hermetic runs).
    setting_sources: tuple[str, ...] | None = None
    memory_mcp: bool = True  # give the session the `eywa` stdio MCP server
    max_turns: int | None = None
    env: Mapping[str, str] = field(default_factory=dict)  # what the CLIs inherit
    codex_stages: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # for stages.stage_configs
    codex_cli: Path | None = None  # a Codex CLI of the owner's; None: the one the openai-codex SDK ships

    @property
    def home(self) -> Path:
        return self.memory.home

    @property
    def runs_dir(self) -> Path:
        return self.memory.home / "runs"

    @property
    def claude_config_dir(self) -> Path:
        """Where the Claude Code CLI keeps its transcripts: the CLI's own env wins, as for the CLI itself."""
        configured = self.env.get("CLAUDE_CONFIG_DIR")
        return Path(configured).expanduser() if configured else self.memory.claude_config_dir

    @classmethod
    def from_env(
        cls, env: Mapping[str, str], toml: Mapping[str, Any] | None = None, *, memory: MemorySettings
    ) -> RelaySettings:
        """Settings from an environment mapping plus the ``[relay]`` table of a parsed config.toml document.

        Precedence: environment over TOML over defaults. Per-stage Codex overrides come from
        ``[relay.stages.<stage>]`` tables; ``codex_approval_policy`` (``MACUPOS_CODEX_APPROVAL_POLICY``) is
        the approval policy of every stage whose table sets none. Raises ValueError for a bad value, so a
        typo fails at startup.
        """
        table: Mapping[str, Any] = (toml or {}).get("relay", {}) or {}
        if not isinstance(table, Mapping):
            raise ValueError(f"[relay] must be a table, not {table!r}")

        def pick(env_key: str, toml_key: str, default: Any) -> Any:
            if env.get(env_key):
                return env[env_key]
            return table.get(toml_key, default)

        mode = str(pick("MACUPOS_PERMISSION_MODE", "permission_mode", "default"))
        if mode == "bypassPermissions":
            raise ValueError(
                "permission mode 'bypassPermissions' is not supported: it skips the approval hook and the "
                "CLI refuses it as root; use 'default', 'acceptEdits' or 'plan'"
            )
        if mode not in PERMISSION_MODES:
            raise ValueError(f"permission mode must be one of {PERMISSION_MODES}, not {mode!r}")
        model = str(pick("MACUPOS_CLAUDE_MODEL", "claude_model", "") or "") or None
        rules = pick("MACUPOS_MEMORY_MD", "memory_md", "")
        try:
            rules_path = Path(str(rules)).expanduser() if rules else memory.home / "MEMORY.md"
        except RuntimeError:  # "~name/…" of a user this machine does not know
            raise ValueError(f"relay setting memory_md names an unknown user's home: {rules!r}") from None
        sources_raw = pick("MACUPOS_CLAUDE_SETTING_SOURCES", "setting_sources", None)
        sources: tuple[str, ...] | None
        if sources_raw is None:
            sources = None
        else:
            sources = _tools(sources_raw, "setting_sources")
            bad = sorted(set(sources) - {"user", "project", "local"})
            if bad:
                raise ValueError(f"unknown Claude Code setting source(s) {bad} (known: user, project, local)")
        turns_raw = pick("MACUPOS_CLAUDE_MAX_TURNS", "max_turns", None)
        stages_raw = table.get("stages", {}) or {}
        if not isinstance(stages_raw, Mapping):
            raise ValueError("[relay.stages] must be a table of per-stage tables")
        if not all(isinstance(v, Mapping) for v in stages_raw.values()):
            raise ValueError("[relay.stages] must be a table of per-stage tables")
        tables = {str(k): dict(v) for k, v in stages_raw.items()}
        policy = pick("MACUPOS_CODEX_APPROVAL_POLICY", "codex_approval_policy", None)
        if policy is not None:
            if policy not in APPROVAL_POLICIES:
                known = ", ".join(APPROVAL_POLICIES)
                raise ValueError(f"relay setting codex_approval_policy must be one of {known}, not {policy!r}")
            for stage in STAGES:
                tables.setdefault(stage, {}).setdefault("approval_policy", policy)
        stages = MappingProxyType({k: MappingProxyType(v) for k, v in tables.items()})
        stage_configs(stages)  # a typo in [relay.stages.*] fails here, at startup, not at the first Codex turn
        return cls(
            memory=memory,
            rules_path=rules_path,
            claude_model=model,
            permission_mode=cast(PermissionModeName, mode),
            allowed_tools=_tools(pick("MACUPOS_ALLOWED_TOOLS", "allowed_tools", None), "allowed_tools"),
            disallowed_tools=_tools(pick("MACUPOS_DISALLOWED_TOOLS", "disallowed_tools", None), "disallowed_tools"),
            deadline_s=_positive("deadline_s", pick("MACUPOS_RELAY_DEADLINE_S", "deadline_s", DEFAULT_DEADLINE_S)),
            idle_timeout_s=_positive(
                "idle_timeout_s", pick("MACUPOS_RELAY_IDLE_TIMEOUT_S", "idle_timeout_s", DEFAULT_IDLE_TIMEOUT_S)
            ),
            setting_sources=sources,
            memory_mcp=_flag(pick("MACUPOS_RELAY_MEMORY_MCP", "memory_mcp", "1")),
            max_turns=_count("max_turns", turns_raw),
            env=MappingProxyType(dict(env)),
            codex_stages=stages,
            codex_cli=_path("codex_cli", pick("MACUPOS_CODEX_CLI", "codex_cli", "")),
        )

"""Claude Code ``SessionStart`` / ``SessionEnd`` command hooks: installing them, and what they run.

SessionStart prints the grounding for the session's project as ``additionalContext`` and fails open:
a slow or broken memory must never keep Claude from starting. SessionEnd hands the transcript to a
detached ``memory ingest`` so Claude's exit is never delayed by ingest or extraction. In a private project
(memory.redact.privacy) neither does anything: such a session is not grounded on other projects' handoffs and
leaves nothing in memory; elsewhere the grounding leaves private projects' handoffs out.

With a memory service (``MACUPOS_MEMORY_URL``) SessionStart grounds on the service, failing open within
2 s when it is unreachable, and starts a detached ``memory sync`` of the outbox; SessionEnd's detached
ingest redacts the transcript here and sends it through the outbox (memory.remote.outbox).
"""

from __future__ import annotations

import asyncio
import json
import shlex
import sqlite3
import subprocess
import time
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from memory.errors import MemoryStoreError
from memory.handoffs.format import normalize_keyword
from memory.redact.logs import redact_log_text
from memory.redact.privacy import load_privacy
from memory.settings import MemorySettings
from memory.sources.worktrees import project_root
from memory.storage.files import stamped_sibling, write_atomic

__all__ = [
    "EVENTS",
    "HOOK_MARKER",
    "HookSettingsError",
    "InstallResult",
    "hook_command",
    "install",
    "is_our_command",
    "log_hook_failure",
    "project_for",
    "run_session_end",
    "run_session_start",
    "settings_path_for",
    "uninstall",
]

HOOK_MARKER = "macupos memory hook"
# Claude Code event name -> our sub-command.
EVENTS: dict[str, str] = {"SessionStart": "session-start", "SessionEnd": "session-end"}
# Grounding belongs to a fresh context: a new session or `/clear`, not a resume or a compaction.
_MATCHERS: dict[str, str] = {"SessionStart": "startup|clear", "SessionEnd": ""}
# Seconds Claude Code waits for the command: the grounding budget plus interpreter start-up.
_TIMEOUTS: dict[str, int] = {"SessionStart": 15, "SessionEnd": 10}
_STARTUP_S = 3.0  # what the interpreter and imports may take before the budget starts counting
# A memory service that does not answer /healthz within this is unreachable: the hook fails open.
_PROBE_S = 1.0
_LOG_NAME = "hooks.log"


class HookSettingsError(MemoryStoreError):
    """Claude Code's settings file cannot be merged into; it is left untouched."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}; left untouched")
        self.path = path
        self.reason = reason


@dataclass(frozen=True, slots=True)
class InstallResult:
    settings_path: Path
    changed: bool
    backup: Path | None
    added: tuple[str, ...] = ()  # event names whose hook was (re)written
    removed: tuple[str, ...] = ()  # event names whose hook was removed

    def __str__(self) -> str:
        if not self.changed:
            return "unchanged (already as wanted)"
        done = f"installed {', '.join(self.added)}" if self.added else f"removed {', '.join(self.removed)}"
        return done + (f"; backup at {self.backup}" if self.backup else "")


def settings_path_for(scope: Literal["user", "project"], *, claude_config_dir: Path, project_dir: Path) -> Path:
    if scope == "user":
        return claude_config_dir / "settings.json"
    if scope == "project":
        return project_dir / ".claude" / "settings.json"
    raise ValueError(f"unknown scope {scope!r}: use 'user' or 'project'")


def hook_command(command: Sequence[str], event: str) -> str:
    """The shell command line Claude Code runs for ``event`` (``SessionStart`` or ``SessionEnd``)."""
    return shlex.join([*command, "memory", "hook", EVENTS[event]])


def is_our_command(line: str) -> bool:
    """Ours: the command names ``macupos memory hook``, or ends in ``memory hook session-start|session-end``.

    The second form covers ``python -m bot.cli memory hook …`` (hooks installed before the root moved to macupos/),
    whose text never says "macupos".
    """
    if HOOK_MARKER in line:
        return True
    try:
        words = shlex.split(line)
    except ValueError:
        return False
    return len(words) >= 4 and words[-3:-1] == ["memory", "hook"] and words[-1] in EVENTS.values()


def _read_settings(path: Path) -> tuple[dict[str, Any], str | None]:
    """The parsed settings and the original text (None when the file does not exist)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}, None
    except (OSError, UnicodeDecodeError) as exc:
        raise HookSettingsError(path, f"cannot read: {exc}") from exc
    if not text.strip():
        return {}, text
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise HookSettingsError(path, f"not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from exc
    if not isinstance(data, dict):
        raise HookSettingsError(path, "top level is not a JSON object")
    hooks = data.get("hooks")
    if hooks is not None and not isinstance(hooks, dict):
        raise HookSettingsError(path, '"hooks" is not a JSON object')
    for event in EVENTS:
        groups = (hooks or {}).get(event)
        if groups is not None and not isinstance(groups, list):
            raise HookSettingsError(path, f'"hooks.{event}" is not a list')
    return data, text


def _ours(hook: Any) -> bool:
    return isinstance(hook, dict) and isinstance(hook.get("command"), str) and is_our_command(hook["command"])


def _strip_ours(groups: list[Any]) -> list[Any]:
    """Drop our hooks; drop a matcher group only when it held nothing but ours."""
    kept: list[Any] = []
    for group in groups:
        inner = group.get("hooks") if isinstance(group, dict) else None
        if not isinstance(inner, list) or not any(_ours(h) for h in inner):
            kept.append(group)
            continue
        rest = [h for h in inner if not _ours(h)]
        if rest:
            kept.append({**group, "hooks": rest})
    return kept


def _our_entries(groups: list[Any]) -> list[tuple[str, Any]]:
    return [
        (str(g.get("matcher", "")), h)
        for g in groups
        if isinstance(g, dict) and isinstance(g.get("hooks"), list)
        for h in g["hooks"]
        if _ours(h)
    ]


def _merged(data: dict[str, Any], command: Sequence[str] | None) -> tuple[dict[str, Any], tuple[str, ...]]:
    """``data`` with our hooks set to ``command`` (or removed when None), and the events touched."""
    out = dict(data)
    hooks: dict[str, Any] = dict(out.get("hooks") or {})
    touched: list[str] = []
    for event in EVENTS:
        groups: list[Any] = list(hooks.get(event) or [])
        if command is not None:
            want = {"type": "command", "command": hook_command(command, event), "timeout": _TIMEOUTS[event]}
            if _our_entries(groups) == [(_MATCHERS[event], want)]:
                continue  # already exactly as we would write it: leave its position alone
            groups = [*_strip_ours(groups), {"matcher": _MATCHERS[event], "hooks": [want]}]
        elif _our_entries(groups):
            groups = _strip_ours(groups)
        else:
            continue
        touched.append(event)
        if groups:
            hooks[event] = groups
        else:
            hooks.pop(event, None)
    if hooks:
        out["hooks"] = hooks
    else:
        out.pop("hooks", None)
    return out, tuple(touched)


def _backup(path: Path) -> Path:
    backup = stamped_sibling(path, "bak")
    backup.write_bytes(path.read_bytes())
    return backup


def _apply(settings_path: Path, command: Sequence[str] | None) -> InstallResult:
    data, original = _read_settings(settings_path)
    merged, touched = _merged(data, command)
    if not touched:
        return InstallResult(settings_path, changed=False, backup=None)
    try:
        backup = _backup(settings_path) if original is not None else None
        # A settings.json that is a link (a dotfiles repo) stays a link; a private one stays private.
        text = json.dumps(merged, indent=2, ensure_ascii=False) + "\n"
        write_atomic(settings_path, text, keep_mode=True, follow_symlink=True)
    except OSError as exc:
        raise HookSettingsError(settings_path, f"cannot write: {exc.strerror or exc}") from exc
    if command is None:
        return InstallResult(settings_path, changed=True, backup=backup, removed=touched)
    return InstallResult(settings_path, changed=True, backup=backup, added=touched)


def install(settings_path: Path, command: Sequence[str]) -> InstallResult:
    """Merge our SessionStart/SessionEnd hooks into ``settings_path``; every other key and hook stays as is."""
    if not command:
        raise ValueError("the hook command is empty")
    return _apply(settings_path, command)


def uninstall(settings_path: Path, command: Sequence[str]) -> InstallResult:
    """Remove our hooks (any command line that is ours, not only ``command``'s); others stay."""
    del command  # kept for symmetry with `install`: older installs may have used another interpreter path
    return _apply(settings_path, None)


# ---------------------------------------------------------------------------------------------- running


def log_hook_failure(home: Path, message: str) -> None:
    """A hook that cannot even read its settings: one line in ``<home>/logs/hooks.log``."""
    _append_log(home, message)


def _log(settings: MemorySettings, message: str) -> None:
    """Append one line to ``<home>/logs/hooks.log``; a hook never writes diagnostics where Claude reads."""
    _append_log(settings.home, message, settings.own_secrets)


def _append_log(home: Path, message: str, own_secrets: Sequence[str] = ()) -> None:
    try:
        logs = home / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        stamp = datetime.now(UTC).isoformat(timespec="seconds")
        # An exception's text can quote a path, a URL or a setting that holds a secret.
        line = redact_log_text(message, own_secrets)
        with (logs / _LOG_NAME).open("a", encoding="utf-8") as fh:
            fh.write(f"{stamp} {line}\n")
    except OSError:
        pass  # logging must not be the thing that breaks a fail-open hook


def project_for(cwd: Path) -> str:
    """The project of ``cwd`` (of a bot worktree: its main folder): its git root's name, else its own, normalised."""
    cwd = Path(project_root(str(cwd)))
    name = cwd.name
    for folder in (cwd, *cwd.parents):
        if (folder / ".git").exists():
            name = folder.name
            break
    return normalize_keyword(name) or name


def _payload_str(payload: Mapping[str, Any], key: str) -> str:
    value = payload.get(key)
    return value if isinstance(value, str) else ""


async def _remote_grounding(settings: MemorySettings, project: str, detach_command: Sequence[str]) -> str:
    """The memory service's grounding. An unreachable service costs at most ``_PROBE_S`` (fail open); a
    reachable one also gets the outbox flushed, by a detached `memory sync` (memory.remote.outbox)."""
    from memory.remote.http import ServiceClient, Timeouts, probe

    await probe(settings.memory_url, _PROBE_S)  # before any HTTP or memory stack is loaded: a dead service is cheap
    from memory.remote.client import RemoteEywa

    budget_s = min(settings.hook_budget_s, _TIMEOUTS["SessionStart"] - _STARTUP_S)
    eywa = RemoteEywa(settings, ServiceClient(settings.memory_url, settings.api_key, Timeouts(_PROBE_S, budget_s)))
    try:
        if detach_command and eywa.outbox.entries():
            _detach(settings, [*detach_command, "memory", "sync"], "session-start")
        grounding = await eywa.get("", project=project or None)
    finally:
        await eywa.close()
    return grounding.text if grounding.results else ""


async def _grounding(settings: MemorySettings, project: str) -> str:
    # Imported here: install/uninstall and SessionEnd never need the heavy retrieval/ingest stack.
    from memory.facade import Eywa

    eywa = await Eywa.open(settings)
    try:
        # The project's terms boost its handoffs; a project Eywa never saw falls back to the recent ones.
        grounding = await eywa.get("", project=project or None)
    finally:
        await eywa.close()
    return grounding.text if grounding.results else ""


async def run_session_start(
    settings: MemorySettings, payload: Mapping[str, Any], *, detach_command: Sequence[str] = ()
) -> str:
    """The SessionStart hook's stdout: grounding as ``additionalContext``, or "" on any failure (fail open).

    With a memory service, ``detach_command`` (how to call this program) starts the outbox's flush."""
    started = time.monotonic()
    cwd = _payload_str(payload, "cwd")
    project = project_for(Path(cwd)) if cwd else ""
    if load_privacy(settings).covers(cwd):
        _log(settings, f"session-start: {project!r} is a private project; no grounding")
        return ""
    try:
        if not settings.remote and settings.db_path.stat().st_size == 0:
            return ""  # an empty file is no database either: a start-up hook never creates a schema
    except OSError:
        return ""  # nothing remembered yet; do not create a database from a start-up hook
    # Within what Claude Code waits for (the installed timeout, less interpreter start-up), whatever the setting.
    budget_s = min(settings.hook_budget_s, _TIMEOUTS["SessionStart"] - _STARTUP_S)
    # A reader never needs a long busy wait under WAL; cap it so the budget holds.
    budget_ms = max(1, int(budget_s * 1000))
    quick = replace(settings, busy_timeout_ms=min(settings.busy_timeout_ms, budget_ms))
    try:
        work = _remote_grounding(quick, project, detach_command) if settings.remote else _grounding(quick, project)
        text = await asyncio.wait_for(work, timeout=budget_s)
    except TimeoutError:
        _log(settings, f"session-start: gave up after {budget_s:.1f}s (project {project!r})")
        return ""
    except (MemoryStoreError, sqlite3.Error, OSError, ValueError) as exc:
        _log(settings, f"session-start: {type(exc).__name__}: {exc}")
        return ""
    except Exception:  # noqa: BLE001 -- the hook's process boundary: a bug here must not reach Claude's screen
        _log(settings, "session-start: unexpected error\n" + traceback.format_exc())
        return ""
    if not text:
        _log(settings, f"session-start: nothing to ground on for project {project!r}")
        return ""
    _log(settings, f"session-start: {len(text)} chars for project {project!r} in {time.monotonic() - started:.2f}s")
    out = {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": text}}
    return json.dumps(out, ensure_ascii=False)


def run_session_end(settings: MemorySettings, payload: Mapping[str, Any], *, detach_command: Sequence[str]) -> None:
    """Start ``<detach_command> memory ingest <transcript> [<subagents folder>]`` detached, and return at once."""
    transcript = _payload_str(payload, "transcript_path")
    if not transcript:
        _log(settings, "session-end: no transcript_path in the payload")
        return
    path = Path(transcript)
    if not path.is_file():
        _log(settings, f"session-end: {path} is not a file")
        return
    cwd = _payload_str(payload, "cwd")
    if load_privacy(settings).covers(cwd):
        # The ingest would leave it out too (by the transcript's own folder); this spares starting it.
        _log(settings, f"session-end: {project_for(Path(cwd))!r} is a private project; not ingested")
        return
    session_id = _payload_str(payload, "session_id")
    if not session_id or "/" in session_id or session_id.startswith("."):
        session_id = path.stem  # the payload is input: never let it steer the path outside the folder
    subagents = path.parent / session_id / "subagents"
    argv = [*detach_command, "memory", "ingest", str(path)]
    if subagents.is_dir():
        argv.append(str(subagents))
    # With a memory service the ingest redacts the transcript here, queues it in the outbox and sends it.
    _detach(settings, argv, "session-end")


def _detach(settings: MemorySettings, argv: Sequence[str], event: str) -> None:
    """Start ``argv`` in a session of its own (it outlives Claude's exit), its output in hooks.log."""
    try:
        logs = settings.home / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        with (logs / _LOG_NAME).open("ab") as log:
            # A new session detaches the ingest from Claude's process group: it outlives Claude's exit.
            child = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
                close_fds=True,
            )
    except OSError as exc:
        _log(settings, f"{event}: cannot start {shlex.join(argv)}: {exc}")
        return
    _log(settings, f"{event}: started pid {child.pid}: {shlex.join(argv)}")

"""A Claude Code or Codex CLI that hangs silently or dies mid-stream: the run ends within its timeout + 5 s,
with a clear message, and leaves no process behind.

The CLIs are stand-ins set through ``MACUPOS_CLAUDE_CLI`` / ``MACUPOS_CODEX_CLI``: a script that reads its
input and never answers, or a wrapper around the real CLI (talking to the API doubles) that passes its
output through until the model starts answering, then goes silent or exits 1. Each stand-in also starts a
helper that leaves its process group (as an MCP server or a shell may), so only the run's tag can find it.
"""

from __future__ import annotations

import importlib
import sys
import time
from pathlib import Path

import pytest

from memory.facade import Eywa
from memory.settings import MemorySettings
from relay.claude_options import claude_cli_path
from relay.codex import CodexEngine
from relay.errors import CodexError, RelayError, RelayTimeoutError, SessionError
from relay.events import HandoffReady, RelayEvent
from relay.process import marked_pids
from relay.session import ClaudeSession
from relay.settings import RelaySettings
from relay.stages import StageConfig, stage_configs
from tests.doubles.openai import OpenAIDouble

TIMEOUT_S = 2.0  # the run's idle timeout (Claude) or the stage's deadline (Codex)
SLACK_S = 5.0  # what a run may take past its timeout to stop, kill and report
HELPER = "MACUPOS_TEST_HELPER"  # marks the stand-in's helper process

# The stand-in: MODE "silent" reads and never answers; "hang" and "die" run the real CLI, pass its output
# through until the model starts answering (a line holding MARK), pass that line, then go silent / exit 1.
_STAND_IN = """\
import os, subprocess, sys, time
MODE, REAL, MARK = {mode!r}, {real!r}, {mark!r}
helper = [sys.executable, "-c", "import time; time.sleep(600)"]
quiet = dict(stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
subprocess.Popen(helper, start_new_session=True, env={{**os.environ, {helper_var!r}: "1"}}, **quiet)
if MODE == "silent":
    for _ in sys.stdin.buffer:
        pass
    time.sleep(600)
child = subprocess.Popen([REAL, *sys.argv[1:]], stdout=subprocess.PIPE)
for line in child.stdout:
    sys.stdout.buffer.write(line)
    sys.stdout.flush()
    if MARK in line:
        if MODE == "die":
            sys.stderr.write("stand-in: crashed mid-stream\\n")
            sys.stderr.flush()
            os._exit(1)
        for _ in child.stdout:  # hang: keep the real CLI unblocked, say nothing more
            pass
        time.sleep(600)
"""


def _stand_in(folder: Path, name: str, mode: str, real: Path, mark: bytes) -> Path:
    path = folder / name
    source = _STAND_IN.format(mode=mode, real=str(real), mark=mark, helper_var=HELPER)
    path.write_text(f"#!{sys.executable}\n{source}", encoding="utf-8")
    path.chmod(0o755)
    return path


def _survivors(var: str, value: str) -> list[int]:
    """Processes of this test (its private config folder in their environment) still alive 3 s after the
    run ended: a SIGKILLed process takes a moment to go (a bounded wait on /proc, checked every 50 ms)."""
    deadline = time.monotonic() + 3.0
    while True:
        alive = [pid for pid in marked_pids(var, value) if not _zombie(pid)]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.05)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True  # gone


# -- Claude Code -----------------------------------------------------------------------------------


def _claude_settings(env: dict[str, str], eywa: Eywa, cli: Path, idle_s: float) -> RelaySettings:
    env = {**env, "CLAUDE_CODE_MAX_RETRIES": "0", "MACUPOS_CLAUDE_CLI": str(cli)}
    table = {"setting_sources": [], "memory_mcp": "0", "idle_timeout_s": idle_s}
    return RelaySettings.from_env(env, {"relay": table}, memory=eywa.settings)


# The idle timeout also bounds the CLI's start-up handshake: the real CLI needs a few seconds for it.
@pytest.mark.parametrize(
    ("mode", "idle_s", "error", "says"),
    [
        ("silent", 2.0, SessionError, "Claude Code did not start: no answer to its start-up handshake in 2 s"),
        ("hang", 10.0, RelayTimeoutError, "the Claude Code run went idle (10 s); its processes were killed"),
        ("die", 10.0, SessionError, "exit code 1 (exit code: 1)\nError output: its last output: stand-in: crashed"),
    ],
)
async def test_a_claude_cli_that_hangs_or_dies_ends_the_run_in_time_without_orphans(
    mode: str,
    idle_s: float,
    error: type[RelayError],
    says: str,
    tmp_path: Path,
    project: Path,
    claude_cli_env: dict[str, str],
    eywa: Eywa,
) -> None:
    cli = _stand_in(tmp_path, f"claude-{mode}", mode, claude_cli_path({}), b'"type":"assistant"')
    settings = _claude_settings(claude_cli_env, eywa, cli, idle_s)
    heard: list[float] = [time.monotonic()]  # the last sign of life: the start, then each event

    async def on_event(event: RelayEvent) -> None:
        if not isinstance(event, HandoffReady):  # (the handoff comes after the end)
            heard.append(time.monotonic())

    session = await ClaudeSession.start(settings, project_dir=project, eywa=eywa, on_event=on_event)
    heard[0] = time.monotonic()
    with pytest.raises(error) as caught:
        await session.send("refactor the billing exporter")
    quiet = time.monotonic() - heard[-1]

    assert quiet < idle_s + SLACK_S, f"the run ended {quiet:.1f} s after its last sign of life"
    assert says in str(caught.value)
    assert _survivors("CLAUDE_CONFIG_DIR", claude_cli_env["CLAUDE_CONFIG_DIR"]) == []
    await session.aclose()


# -- Codex ------------------------------------------------------------------------------------------


def _codex_turn_mark() -> bytes:
    return b'"method":"turn/started"'


@pytest.mark.parametrize(
    ("mode", "error", "says"),
    [
        ("silent", RelayTimeoutError, "Codex plan turn passed its 2 s deadline (thread not started)"),
        ("hang", RelayTimeoutError, "Codex plan turn passed its 2 s deadline"),
        ("die", CodexError, "Codex plan turn failed"),
    ],
)
async def test_a_codex_cli_that_hangs_or_dies_ends_the_turn_in_time_without_orphans(
    mode: str,
    error: type[RelayError],
    says: str,
    tmp_path: Path,
    project: Path,
    codex_home: dict[str, str],
    openai_double: OpenAIDouble,
) -> None:
    real = Path(str(importlib.import_module("codex_cli_bin").bundled_codex_path()))
    cli = _stand_in(tmp_path, f"codex-{mode}", mode, real, _codex_turn_mark())
    settings = RelaySettings.from_env(
        {**codex_home, "MACUPOS_CODEX_CLI": str(cli)},
        {"relay": {"stages": {"plan": {"timeout_s": TIMEOUT_S}}}},
        memory=MemorySettings(home=tmp_path / "m", claude_config_dir=tmp_path / "c", codex_home=tmp_path / "x"),
    )
    assert settings.codex_cli == cli
    engine = CodexEngine(settings.env, settings.codex_cli)
    try:
        started = time.monotonic()
        with pytest.raises(error) as caught:
            await engine.run_turn("plan the exporter", stage="plan", cwd=project, config=_plan(settings))
        elapsed = time.monotonic() - started

        assert elapsed < TIMEOUT_S + SLACK_S, f"the turn took {elapsed:.1f} s"
        assert says in str(caught.value)
        assert _survivors("CODEX_HOME", codex_home["CODEX_HOME"]) == []
    finally:
        await engine.aclose()


def _plan(settings: RelaySettings) -> StageConfig:
    return stage_configs(settings.codex_stages)["plan"]


async def test_a_codex_cli_that_never_answers_fails_the_start_within_its_bound(
    tmp_path: Path, codex_home: dict[str, str]
) -> None:
    cli = _stand_in(tmp_path, "codex-silent", "silent", Path("/bin/false"), b"")
    started = time.monotonic()
    with pytest.raises(CodexError, match="did not answer") as caught:
        await CodexEngine.start(env=codex_home, codex_bin=cli, timeout_s=TIMEOUT_S)
    assert time.monotonic() - started < TIMEOUT_S + SLACK_S
    assert str(cli) in str(caught.value)
    assert _survivors("CODEX_HOME", codex_home["CODEX_HOME"]) == []

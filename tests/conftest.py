"""Fixtures shared by every test package: the service doubles and the environment that points real clients at
them; and the two test lanes (README: "Tests").

``scripts/test`` runs everything (what CI runs). ``scripts/test --fast`` runs ``-m "not slow"`` with the fuzz
tests scaled down (``MACUPOS_FUZZ_SCALE``, tests/fuzzing.py). A test is ``slow`` when it says so itself
(``@pytest.mark.slow``) or when :func:`pytest_collection_modifyitems` finds it drives a real agent CLI (it uses
a fixture of :data:`_REAL_CLI_FIXTURES`, or it or one of its fixtures starts the bot harness, which runs the
Claude Code CLI), or it lives in :data:`_SLOW_PATHS`: kill -9 loops, soaks, PostgreSQL clusters, Chromium.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import AsyncIterator, Callable, Iterable
from pathlib import Path

import pytest

from tests.doubles.anthropic import AnthropicDouble, cli_env

_TESTS = Path(__file__).resolve().parent
# Fixtures that exist to point the real Claude Code or Codex CLI at a model double: a test that uses one
# (itself or through another fixture) starts that CLI.
_REAL_CLI_FIXTURES = frozenset({"anthropic_double", "claude_cli_env", "openai_double", "codex_home"})
# Names whose use in a test or in one of its fixtures means the real CLI runs: tests/bot/app_harness.py's
# `harness` (the bot against the Telegram double, with the Claude Code CLI against the Anthropic one).
_REAL_CLI_NAMES = frozenset({"harness", "GatedDouble", "AnthropicDouble", "OpenAIDouble"})
# Whole modules (or folders) that are slow by design: kill -9 loops, soaks of ROUNDS rounds, a private
# PostgreSQL cluster, headless Chromium, the bot restarted as a real `macupos bot` process.
_SLOW_PATHS = (
    "bot/test_branches_crash.py",
    "bot/test_crash_loop.py",
    "bot/test_restart.py",
    "bot/test_schedule_crash.py",
    "bot/test_shared_files.py",
    "memory/test_crash_loops.py",
    "service/pg/",
    "service/test_shared_files.py",
    "service/web/test_accessibility.py",
    "service/web/test_browser.py",
    "service/web/test_graph_browser.py",
    "service/web/test_review_browser.py",
    "service/web/test_session_browser.py",
    "sdk/test_typescript_client.py",
)


def _code_names(fn: Callable[..., object]) -> set[str]:
    """The global and attribute names ``fn``'s code (nested functions included) refers to."""
    code = getattr(inspect.unwrap(fn), "__code__", None)
    names: set[str] = set()
    stack = [code] if code is not None else []
    while stack:
        c = stack.pop()
        names.update(c.co_names)
        stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    return names


def _fixture_funcs(item: pytest.Item) -> Iterable[Callable[..., object]]:
    info = getattr(item, "_fixtureinfo", None)
    for defs in info.name2fixturedefs.values() if info is not None else ():
        for fixturedef in defs:
            yield fixturedef.func


def _is_slow(item: pytest.Item) -> bool:
    if item.get_closest_marker("slow") is not None:
        return True
    rel = item.path.resolve().relative_to(_TESTS).as_posix()
    if rel.startswith(_SLOW_PATHS):
        return True
    if _REAL_CLI_FIXTURES.intersection(getattr(item, "fixturenames", ())):
        return True
    funcs = [getattr(item, "function", None), *_fixture_funcs(item)]
    return any(_REAL_CLI_NAMES & _code_names(fn) for fn in funcs if fn is not None)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    slow = pytest.mark.slow
    for item in items:
        if _is_slow(item) and item.get_closest_marker("slow") is None:
            item.add_marker(slow)
    if hasattr(config, "workerinput"):  # a pytest-xdist worker: every worker sorts alike, so the lists agree
        _slow_files_first(items)


def _slow_files_first(items: list[pytest.Item]) -> None:
    """The longest files first, each file's tests kept in their order (scripts/test hands files to the workers
    in this order, ``--no-loadscope-reorder``): the kill loops and soaks of :data:`_SLOW_PATHS` (60-100 s each),
    then the other files holding a slow test, then the rest, which even out the end instead of one worker
    finishing a kill loop alone while the other waits."""

    def rank(item: pytest.Item) -> int:
        if item.path.resolve().relative_to(_TESTS).as_posix().startswith(_SLOW_PATHS):
            return 0
        return 1 if item.path in heavy else 2

    heavy = {item.path for item in items if item.get_closest_marker("slow") is not None}
    items.sort(key=rank)  # stable: the order within each file stays


@pytest.fixture
async def anthropic_double() -> AsyncIterator[AnthropicDouble]:
    """A started Messages API double (empty script: every turn answers "ok"); stopped after the test."""
    async with AnthropicDouble() as double:
        yield double


@pytest.fixture
def claude_home(tmp_path: Path) -> Path:
    """A private HOME for the Claude Code CLI, so nothing touches the real ~/.claude."""
    home = tmp_path / "claude-home"
    home.mkdir()
    return home


@pytest.fixture
def claude_cli_env(anthropic_double: AnthropicDouble, claude_home: Path) -> dict[str, str]:
    """Environment for ``ClaudeAgentOptions(env=...)``: the bundled CLI talks only to ``anthropic_double``."""
    return cli_env(anthropic_double.base_url, str(claude_home))

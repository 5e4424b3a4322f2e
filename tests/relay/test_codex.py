"""CodexEngine with the real Codex CLI (app-server) against the OpenAI Responses API double."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from relay.codex import CodexEngine, CodexTurn, codex_cost, find_rollout
from relay.errors import CodexError, RelayTimeoutError
from relay.stages import DEFAULT_STAGES, HIGHEST, StageConfig, stage_configs
from tests.doubles.openai import ExecCommand, Garbage, HttpError, OpenAIDouble, Stall, Text, input_texts


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "README.md").write_text("a project\n")
    return folder


@pytest.fixture
async def engine(codex_home: dict[str, str]) -> AsyncIterator[CodexEngine]:
    engine = await CodexEngine.start(env=codex_home)
    yield engine
    await engine.aclose()


def turn_metadata(body: dict[str, Any]) -> dict[str, Any]:
    """What the CLI reports about the turn it runs (sandbox mode, effort, model, thread id)."""
    return dict(json.loads(body["client_metadata"]["x-codex-turn-metadata"]))


def developer_text(body: dict[str, Any]) -> str:
    return "\n".join(
        part.get("text", "")
        for item in body["input"]
        if item.get("role") == "developer"
        for part in item.get("content", [])
    )


async def test_plan_turn_sends_the_stage_effort_and_model_and_returns_answer_thread_and_usage(
    engine: CodexEngine, openai_double: OpenAIDouble, project: Path
) -> None:
    openai_double.enqueue(Text("1. do it\n2. test it", deltas=True, input_tokens=1200, cached_tokens=200))
    config = replace(DEFAULT_STAGES["plan"], model="gpt-5.5")

    turn = await engine.run_turn("Plan the login fix", stage="plan", cwd=project, context="auth.py:12", config=config)

    body = openai_double.bodies[-1]
    assert body["model"] == "gpt-5.5"
    assert body["reasoning"]["effort"] == "xhigh"  # the highest the installed Codex lists for gpt-5.5
    assert turn_metadata(body)["sandbox_mode"] == "read-only"
    assert "plan stage" in developer_text(body)
    assert "Plan the login fix" in input_texts(body)[-1] and "auth.py:12" in input_texts(body)[-1]
    assert turn.answer == "1. do it\n2. test it"
    assert turn.status == "completed" and turn.model == "gpt-5.5" and turn.effort == "xhigh"
    assert turn.thread_id == body["client_metadata"]["thread_id"]
    assert (turn.usage.input_tokens, turn.usage.cache_read_tokens, turn.usage.output_tokens) == (1000, 200, 20)
    assert turn.usage.cost_usd is None  # gpt-5.5 is not in the price table
    assert turn.rollout_path is not None and turn.rollout_path.exists()
    assert turn.rollout_path == find_rollout(Path(engine.codex_home), turn.thread_id)


async def write_a_file(
    engine: CodexEngine, openai_double: OpenAIDouble, project: Path, stage: str, answer: str
) -> tuple[Path, CodexTurn]:
    """A turn in ``stage`` whose model runs ``echo hi > out.txt`` and then answers ``answer``: the file, the turn."""
    target = project / "out.txt"
    openai_double.enqueue(ExecCommand(f"echo hi > {target}"), answer)
    turn = await engine.run_turn("write a file", stage=stage, cwd=project, config=DEFAULT_STAGES[stage])
    return target, turn


async def test_read_only_stage_cannot_write_files(
    engine: CodexEngine, openai_double: OpenAIDouble, project: Path
) -> None:
    target, turn = await write_a_file(engine, openai_double, project, "research", "could not write")

    assert not target.exists()
    assert "Read-only file system" in input_texts(openai_double.bodies[-1])[-1]
    assert turn.answer == "could not write"


async def test_execute_stage_writes_in_the_workspace(
    engine: CodexEngine, openai_double: OpenAIDouble, project: Path
) -> None:
    target, turn = await write_a_file(engine, openai_double, project, "execute", "written")

    assert target.read_text() == "hi\n"
    assert turn_metadata(openai_double.bodies[0])["sandbox_mode"] == "workspace-write"
    assert turn.usage.tokens == 100 + 10 + 100 + 20  # both model calls of the turn are counted


async def test_reply_continues_the_same_thread_with_its_history(
    engine: CodexEngine, openai_double: OpenAIDouble, project: Path
) -> None:
    openai_double.enqueue("first plan", Text("revised plan", input_tokens=1000, output_tokens=100))
    config = DEFAULT_STAGES["plan"]
    first = await engine.run_turn("make a plan", stage="plan", cwd=project, config=config)

    second = await engine.run_turn("fix finding 1", stage="plan", cwd=project, thread_id=first.thread_id, config=config)

    assert second.thread_id == first.thread_id and second.answer == "revised plan"
    texts = input_texts(openai_double.bodies[-1])
    assert texts[-3:] == ["make a plan", "first plan", "fix finding 1"]
    # The owner's model from config.toml, unknown to the catalog: "highest" falls back to "high".
    assert openai_double.bodies[-1]["model"] == "gpt-5.1-codex" and second.effort == "high"
    assert second.usage.cost_usd == pytest.approx(codex_cost("gpt-5.1-codex", 1000, 0, 100))
    assert second.usage.cost_usd == pytest.approx((1000 * 1.25 + 100 * 10) / 1e6)
    assert engine.stage_of(first.thread_id) == "plan"


async def test_a_reply_survives_a_new_engine(
    codex_home: dict[str, str], openai_double: OpenAIDouble, project: Path
) -> None:
    openai_double.enqueue("first", "second")
    async with CodexEngine(codex_home, None) as engine:
        first = await engine.run_turn("one", stage="plan", cwd=project, config=DEFAULT_STAGES["plan"])
    async with CodexEngine(codex_home, None) as engine:
        second = await engine.run_turn(
            "two", stage="plan", cwd=project, thread_id=first.thread_id, config=DEFAULT_STAGES["plan"]
        )
    assert second.thread_id == first.thread_id
    assert input_texts(openai_double.bodies[-1])[-3:] == ["one", "first", "two"]


async def test_a_stalled_model_times_out_and_leaves_no_process(
    codex_home: dict[str, str],
    openai_double: OpenAIDouble,
    project: Path,
    codex_processes: Callable[[], list[int]],
) -> None:
    openai_double.enqueue(Stall())
    engine = await CodexEngine.start(env=codex_home)
    assert codex_processes()
    config = replace(DEFAULT_STAGES["plan"], timeout_s=1.0)
    loop = asyncio.get_running_loop()

    started = loop.time()
    with pytest.raises(RelayTimeoutError) as caught:
        await engine.run_turn("think forever", stage="plan", cwd=project, config=config)

    assert loop.time() - started < 1.0 + 1.0
    assert caught.value.limit_s == 1.0 and caught.value.session_id  # the thread id
    again = await engine.run_turn("hello", stage="plan", cwd=project, config=config)  # still usable
    assert again.answer == "ok"
    await engine.aclose()
    assert codex_processes() == []


async def test_interrupt_ends_a_running_turn(engine: CodexEngine, openai_double: OpenAIDouble, project: Path) -> None:
    openai_double.enqueue(Stall())
    running = asyncio.create_task(engine.run_turn("long", stage="plan", cwd=project, config=DEFAULT_STAGES["plan"]))
    async with asyncio.timeout(10):
        bodies = await openai_double.wait_for_requests(1)
        assert await engine.interrupt(bodies[0]["client_metadata"]["thread_id"])
        turn = await running
    assert turn.status == "interrupted"
    assert not await engine.interrupt(turn.thread_id)  # nothing running any more


@pytest.mark.parametrize(
    ("reply", "expected"),
    [(HttpError(500), "internalServerError"), (Garbage(), "stream disconnected")],
    ids=["http-500", "garbage"],
)
async def test_model_api_failure_is_a_clear_codex_error(
    engine: CodexEngine, openai_double: OpenAIDouble, project: Path, reply: HttpError | Garbage, expected: str
) -> None:
    openai_double.enqueue(reply)
    with pytest.raises(CodexError) as caught:
        await engine.run_turn("plan", stage="plan", cwd=project, config=DEFAULT_STAGES["plan"])
    message = str(caught.value)
    assert expected in message and "Codex plan turn failed" in message
    assert caught.value.thread_id and caught.value.stage == "plan"


async def test_owner_codex_home_and_provider_are_used_as_given(
    engine: CodexEngine, openai_double: OpenAIDouble, project: Path, codex_home: dict[str, str]
) -> None:
    await engine.run_turn("hi", stage="research", cwd=project, config=DEFAULT_STAGES["research"])
    request = openai_double.requests[-1]
    assert request.headers["Authorization"] == "Bearer double-key"  # the provider's env_key, from our env
    assert Path(engine.codex_home) == Path(codex_home["CODEX_HOME"])
    assert list(Path(codex_home["CODEX_HOME"]).glob("sessions/*/*/*/rollout-*.jsonl"))


def test_stage_defaults_and_overrides() -> None:
    configs = stage_configs({"plan": {"effort": "xhigh", "timeout_s": 60}, "execute": {"model": "gpt-5.1-codex"}})
    assert configs["plan"] == StageConfig(sandbox="read-only", effort="xhigh", model=None, timeout_s=60.0)
    assert configs["execute"].model == "gpt-5.1-codex" and configs["execute"].sandbox == "workspace-write"
    assert DEFAULT_STAGES["plan"].effort == HIGHEST
    assert {name for name, c in DEFAULT_STAGES.items() if c.sandbox == "read-only"} == {
        "research",
        "plan",
        "audit",
        "review",
    }
    assert stage_configs({"plan": {"effort": "", "model": ""}})["plan"].effort is None


@pytest.mark.parametrize(
    "overrides",
    [{"deploy": {}}, {"plan": {"color": "red"}}, {"plan": {"effort": "huge"}}, {"plan": {"sandbox": "none"}}],
)
def test_bad_stage_overrides_are_refused(overrides: dict[str, dict[str, Any]]) -> None:
    with pytest.raises(ValueError, match="relay stage"):
        stage_configs(overrides)


async def test_a_cancelled_turn_is_stopped_so_its_thread_can_continue(
    engine: CodexEngine, openai_double: OpenAIDouble, project: Path
) -> None:
    openai_double.enqueue(Stall(), "after the cancel")
    config = DEFAULT_STAGES["plan"]
    running = asyncio.create_task(engine.run_turn("long", stage="plan", cwd=project, config=config))
    async with asyncio.timeout(10):
        bodies = await openai_double.wait_for_requests(1)
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
        thread_id = bodies[0]["client_metadata"]["thread_id"]
        turn = await engine.run_turn("go on", stage="plan", cwd=project, thread_id=thread_id, config=config)
    assert turn.answer == "after the cancel" and turn.thread_id == thread_id


async def test_a_malformed_codex_config_fails_at_start_not_at_the_first_turn(codex_home: dict[str, str]) -> None:
    config = Path(codex_home["CODEX_HOME"]) / "config.toml"
    config.write_text(config.read_text() + "\nbroken = [\n")
    with pytest.raises(CodexError, match=r"config\.toml is not a readable TOML file"):
        await CodexEngine.start(env=codex_home)

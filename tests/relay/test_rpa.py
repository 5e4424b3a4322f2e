"""Research → Plan → Audit with the real Claude Code CLI (Anthropic double) and the real Codex CLI (OpenAI double)."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from memory.facade import Eywa
from memory.settings import MemorySettings
from relay.artifacts import read_header
from relay.codex import CodexEngine
from relay.errors import ArtifactError
from relay.events import RelayEvent, StageEnd, StageStart
from relay.ledger import Ledger
from relay.rpa import run_rpa
from relay.rpa_report import RunReport
from relay.rpa_text import parse_verdict
from relay.settings import RelaySettings
from tests.cli_env import MACUPOS
from tests.doubles.anthropic import AnthropicDouble, ErrorReply, ToolUse, last_user_text
from tests.doubles.openai import ExecCommand, HttpError, OpenAIDouble, input_texts

# The read-only tools are allowed outright on purpose: the SDK warns that the approval hook never sees them.
pytestmark = pytest.mark.filterwarnings("ignore::claude_agent_sdk.CanUseToolShadowedWarning")


def verdict(kind: str, *findings: str) -> str:
    return f"My notes.\n\n```json\n{json.dumps({'verdict': kind, 'findings': list(findings)})}\n```"


def claude_script(audits: list[str], review: str = verdict("approve")) -> Callable[[dict[str, Any]], Any]:
    """Answers each Claude stage by the marker our prompts carry; audits are answered in order."""
    queue = list(audits)

    def respond(body: dict[str, Any]) -> Any:
        text = last_user_text(body)
        if "· stage research" in text:
            return "Research: greet.py does not exist yet; the project has only a README."
        if "· stage audit" in text:
            return queue.pop(0) if queue else verdict("approve")
        if "· stage review" in text:
            return review
        return "ok"

    return respond


def turn_metadata(body: dict[str, Any]) -> dict[str, Any]:
    return dict(json.loads(body["client_metadata"]["x-codex-turn-metadata"]))


@pytest.fixture
def env(claude_cli_env: dict[str, str], codex_home: dict[str, str], tmp_path: Path) -> dict[str, str]:
    return {
        **codex_home,
        **claude_cli_env,
        "CLAUDE_CODE_MAX_RETRIES": "0",
        "MACUPOS_HOME": str(tmp_path / "mhome"),
    }


@pytest.fixture
async def eywa(env: dict[str, str]) -> AsyncIterator[Eywa]:
    settings = MemorySettings(
        home=Path(env["MACUPOS_HOME"]),
        claude_config_dir=Path(env["CLAUDE_CONFIG_DIR"]),
        codex_home=Path(env["CODEX_HOME"]),
        llm_enabled=False,
    )
    async with await Eywa.open(settings) as e:
        yield e


@pytest.fixture
def settings(env: dict[str, str], eywa: Eywa) -> RelaySettings:
    table = {"setting_sources": [], "memory_mcp": "0", "stages": {"plan": {"model": "gpt-5.5"}}}
    return RelaySettings.from_env(env, {"relay": table}, memory=eywa.settings)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "README.md").write_text("a tiny project\n", encoding="utf-8")
    return folder


@dataclass
class Rig:
    """The two model doubles and the real pieces an RPA run is made of, in one place."""

    anthropic: AnthropicDouble
    openai: OpenAIDouble
    settings: RelaySettings
    eywa: Eywa
    engine: CodexEngine
    project: Path

    async def run(self, task: str, **options: Any) -> RunReport:
        return await run_rpa(
            task, settings=self.settings, project_dir=self.project, eywa=self.eywa, codex=self.engine, **options
        )


@pytest.fixture
def rig(
    anthropic_double: AnthropicDouble,
    openai_double: OpenAIDouble,
    settings: RelaySettings,
    eywa: Eywa,
    engine: CodexEngine,
    project: Path,
) -> Rig:
    return Rig(anthropic_double, openai_double, settings, eywa, engine, project)


class Recorder:
    def __init__(self) -> None:
        self.events: list[RelayEvent] = []

    async def __call__(self, event: RelayEvent) -> None:
        self.events.append(event)

    def stages(self) -> list[tuple[str, str, str, int]]:
        return [
            (type(e).__name__, e.stage, e.engine, e.round) for e in self.events if isinstance(e, StageStart | StageEnd)
        ]


async def ledger_rows(eywa: Eywa, run_id: str) -> list[tuple[str, str, str]]:
    async with eywa.db.conn.execute(
        "SELECT stage, engine, session_id FROM ledger WHERE run_id = ? ORDER BY id", (run_id,)
    ) as cur:
        return [(str(r[0]), str(r[1]), str(r[2])) for r in await cur.fetchall()]


async def test_full_run_with_one_revise_round(rig: Rig) -> None:
    rig.anthropic.default = claude_script([verdict("revise", "F1: greet.txt must end with a newline")])
    target = rig.project / "greet.txt"
    rig.openai.enqueue(
        "PLAN v1: write greet.txt",
        "PLAN v2: write greet.txt with a newline",
        ExecCommand(f"printf 'hello\\n' > {target}"),
        "Executed: wrote greet.txt",
    )
    recorder = Recorder()
    ledger = Ledger(rig.eywa)

    report = await rig.run("add greet.txt", on_event=recorder, ledger=ledger)

    assert report.error == "" and report.approved and report.rounds == 2
    assert target.read_text() == "hello\n"
    order = [("research", "claude"), ("plan", "codex"), ("audit", "claude"), ("revise", "codex")]
    order += [("audit", "claude"), ("execute", "codex"), ("review", "claude")]
    assert [(s.stage, s.engine) for s in report.stages] == order
    # Artifacts, in order, each with its header.
    names = sorted(p.name for p in report.artifacts_dir.iterdir())
    assert names == [
        "01-research.md",
        "02-plan.md",
        "03-audit-r1.md",
        "04-revise-r1.md",
        "05-audit-r2.md",
        "06-execute.md",
        "07-review.md",
        "08-report.md",
    ]
    assert report.artifacts_dir == rig.settings.runs_dir / report.run_id
    for stage in report.stages:
        header = read_header(stage.artifact)
        assert header["engine"] == stage.engine and header["thread"] == stage.thread_id
        assert header["run"] == report.run_id and int(header["tokens"]) == stage.usage.tokens > 0
        assert header["model"] == stage.model and header["cost_usd"] and header["duration_s"]
    assert "F1: greet.txt must end with a newline" in report.stages[2].artifact.read_text()
    assert "Artifacts:" in (report.artifacts_dir / "08-report.md").read_text()
    # Events: a start and an end per stage, in order, the end naming its artifact.
    starts_ends = recorder.stages()
    assert starts_ends[0::2] == [
        ("StageStart", s, e, r) for s, e, r in ((s.stage, s.engine, s.round) for s in report.stages)
    ]
    assert starts_ends[1::2] == [("StageEnd", s.stage, s.engine, s.round) for s in report.stages]
    ends = [e for e in recorder.events if isinstance(e, StageEnd)]
    assert [Path(e.artifact) for e in ends] == [s.artifact for s in report.stages] and all(e.ok for e in ends)
    # What the Codex CLI sent: plan and revise on one thread, read-only at the plan's effort; execute writes.
    plan, revise, execute, execute_done = rig.openai.bodies
    plan_thread = report.stages[1].thread_id
    for body in (plan, revise):
        assert body["model"] == "gpt-5.5" and body["reasoning"]["effort"] == "xhigh"
        assert turn_metadata(body)["sandbox_mode"] == "read-only"
        assert body["client_metadata"]["thread_id"] == plan_thread
    assert "F1: greet.txt must end with a newline" in input_texts(revise)[-1]
    assert "Research: greet.py does not exist yet" in input_texts(plan)[-1]
    assert turn_metadata(execute)["sandbox_mode"] == turn_metadata(execute_done)["sandbox_mode"] == "workspace-write"
    assert "PLAN v2" in input_texts(execute)[-1]
    assert execute["client_metadata"]["thread_id"] == report.stages[5].thread_id != plan_thread
    # Claude's audits see the current plan; its research ran with read-only tools only.
    audit_texts = [t for t in rig.anthropic.user_texts() if "· stage audit" in t]
    assert "PLAN v1" in audit_texts[0] and "PLAN v2" in audit_texts[-1]
    tools = {t.get("name") for t in rig.anthropic.bodies[0].get("tools", [])}
    assert "Read" in tools and not tools & {"Edit", "Write", "Bash", "NotebookEdit"}
    # One Claude session for research, audits and review; a ledger row per stage with the run id.
    main = report.stages[0].thread_id
    assert {s.thread_id for s in report.stages if s.engine == "claude"} == {main}
    rows = await ledger_rows(rig.eywa, report.run_id)
    assert [(stage, engine) for stage, engine, _ in rows] == order
    assert {session for *_, session in rows} == {main}
    # The session went into memory with both Codex threads linked as its subagents.
    view = await rig.eywa.show(main)
    assert view.session is not None and view.handoff is not None
    assert set(view.subagents) >= {f"codex-{plan_thread}", f"codex-{report.stages[5].thread_id}"}
    assert report.tokens == sum(s.usage.tokens for s in report.stages)
    assert report.cost_usd is not None and report.cost_usd > 0  # Claude's part is priced


async def test_max_rounds_without_approval_stops_before_execute(rig: Rig) -> None:
    rig.anthropic.default = claude_script([verdict("revise", "F1: unsafe"), verdict("revise", "F2: still unsafe")])
    rig.openai.enqueue("PLAN v1", "PLAN v2")

    report = await rig.run("delete the database", max_rounds=2)

    assert not report.approved and report.rounds == 2 and report.error == ""
    assert [s.stage for s in report.stages] == ["research", "plan", "audit", "revise", "audit"]
    assert len(rig.openai.requests) == 2  # no third revision, no execute
    assert "not approved after 2 audit round(s)" in report.summary and "stopped before execute" in report.summary
    assert "F2: still unsafe" in report.summary
    assert len(report.summary.splitlines()) <= 6


async def test_an_invalid_audit_verdict_counts_as_a_revise_round(rig: Rig) -> None:
    rig.anthropic.default = claude_script(["Looks fine to me, ship it."])
    rig.openai.enqueue("PLAN v1", "PLAN v2")

    report = await rig.run("tidy up", stages=("plan", "audit"))

    assert report.approved and report.rounds == 2
    first = report.stages[1]
    assert first.verdict == "revise" and "could not be read" in first.findings[0]
    assert "could not be read" in input_texts(rig.openai.bodies[1])[-1]
    assert "Looks fine to me" in input_texts(rig.openai.bodies[1])[-1]  # the auditor's notes go along


async def test_claude_executes_and_codex_reviews_then_claude_fixes(rig: Rig) -> None:
    target = rig.project / "greet.txt"
    script = claude_script([])

    def respond(body: dict[str, Any]) -> Any:
        text = last_user_text(body)
        if "Carry out this approved plan" in text:
            return ToolUse("Write", {"file_path": str(target), "content": "hello"})
        if "The reviewer (Codex) found" in text:
            return ToolUse("Write", {"file_path": str(target), "content": "hello\n"})
        if "File created" in text or "updated" in text:
            return "done"
        return script(body)

    rig.anthropic.default = respond
    rig.openai.enqueue(verdict("revise", "R1: missing newline"))

    report = await rig.run("add greet.txt", stages=("execute", "review"), executor="claude")

    assert report.error == "", report.error
    assert [(s.stage, s.engine) for s in report.stages] == [
        ("execute", "claude"),
        ("review", "codex"),
        ("fix", "claude"),
    ]
    assert target.read_text() == "hello\n"
    assert turn_metadata(rig.openai.bodies[0])["sandbox_mode"] == "read-only"
    assert report.stages[1].findings == ("R1: missing newline",)
    assert report.stages[0].thread_id == report.stages[2].thread_id  # the fix continues the execute session
    view = await rig.eywa.show(report.stages[0].thread_id)
    assert f"codex-{report.stages[1].thread_id}" in view.subagents


async def test_a_failing_stage_stops_the_run_with_a_clear_report(rig: Rig) -> None:
    rig.anthropic.default = claude_script([])
    rig.openai.enqueue(HttpError(500))

    report = await rig.run("plan it")

    assert "Codex plan turn failed" in report.error and not report.approved
    assert [(s.stage, s.ok) for s in report.stages] == [("research", True), ("plan", False)]
    assert read_header(report.stages[1].artifact)["ok"] == "false"
    assert report.summary.startswith("❌ Stopped at plan")
    assert (await rig.eywa.show(report.stages[0].thread_id)).session is not None  # still ingested


async def test_codex_work_reaches_memory_when_a_later_claude_stage_fails(rig: Rig) -> None:
    script = claude_script([])

    def respond(body: dict[str, Any]) -> Any:
        return ErrorReply(500, "api_error", "down") if "· stage audit" in last_user_text(body) else script(body)

    rig.anthropic.default = respond
    rig.openai.enqueue("PLAN v1: write greet.txt")

    report = await rig.run("plan it")

    assert [(s.stage, s.ok) for s in report.stages] == [("research", True), ("plan", True), ("audit", False)]
    view = await rig.eywa.show(report.stages[0].thread_id)  # the research session, the rollouts' parent
    assert f"codex-{report.stages[1].thread_id}" in view.subagents


async def test_a_run_whose_record_cannot_be_written_is_refused_before_any_model_is_called(rig: Rig) -> None:
    rig.settings.runs_dir.parent.mkdir(parents=True, exist_ok=True)
    rig.settings.runs_dir.write_text("a file where the runs folder should be")
    with pytest.raises(ArtifactError, match="cannot write the run's artifacts"):
        await rig.run("plan it")
    assert rig.anthropic.requests == [] and rig.openai.requests == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (verdict("approve"), ("approve", True)),
        (verdict("revise", "a", "b"), ("revise", True)),
        ("no json at all", ("revise", False)),
        (verdict("approve") + "\n" + verdict("approve"), ("revise", False)),
        ("```json\n{not json}\n```", ("revise", False)),
        ('```json\n{"verdict": "maybe", "findings": []}\n```', ("revise", False)),
        ('```json\n{"verdict": "revise", "findings": []}\n```', ("revise", False)),
        ('```json\n{"verdict": "approve", "findings": [], "extra": 1}\n```', ("revise", False)),
        ('```json\n{"verdict": "approve", "findings": [3]}\n```', ("revise", False)),
    ],
)
def test_verdicts_are_parsed_strictly(text: str, expected: tuple[str, bool]) -> None:
    parsed = parse_verdict(text)
    assert (parsed.verdict, parsed.valid) == expected
    if not parsed.valid:
        assert len(parsed.findings) == 1 and "could not be read" in parsed.findings[0]


def test_unknown_or_unordered_stage_sets_are_refused() -> None:
    from relay.rpa import _check_stages

    for stages in (("deploy",), ("audit",), ("review",), ()):
        with pytest.raises(ValueError):
            _check_stages(stages, 3)
    with pytest.raises(ValueError, match="max_rounds"):
        _check_stages(("plan",), 0)


async def test_relay_run_json_through_the_cli(
    anthropic_double: AnthropicDouble, openai_double: OpenAIDouble, env: dict[str, str], project: Path
) -> None:
    anthropic_double.default = claude_script([])
    home = Path(env["MACUPOS_HOME"])
    home.mkdir(exist_ok=True)
    (home / "config.toml").write_text("[relay]\nsetting_sources = []\nmemory_mcp = false\n", encoding="utf-8")
    cli_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **env, "MACUPOS_MEMORY_LLM": "0"}
    proc = await asyncio.create_subprocess_exec(
        str(MACUPOS),
        *("relay", "run", "add a greeting", "--project", str(project), "--json", "--max-rounds", "1"),
        env=cli_env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    data = json.loads(out)
    assert data["approved"] is True and data["rounds"] == 1 and data["error"] == ""
    assert [s["stage"] for s in data["stages"]] == ["research", "plan", "audit", "execute", "review"]
    assert Path(data["artifacts_dir"]).is_dir() and Path(data["stages"][0]["artifact"]).is_file()
    assert {"run_id", "summary", "cost_usd", "tokens", "duration_s"} <= set(data)
    progress = err.decode().splitlines()
    assert [line.split(" · ")[0] for line in progress if " tokens · " in line] == [
        "research",
        "plan",
        "audit r1",
        "execute",
        "review",
    ]

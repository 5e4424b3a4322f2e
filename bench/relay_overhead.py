"""Relay overhead per turn with zero-latency model doubles: our code plus the real CLIs, no model time.

Measures (each N times, p50 / p95 in ms):
- Claude cold start: ``ClaudeSession.start`` + the first ``send`` (CLI process start, grounding, one turn);
- Claude follow-up: one more ``send`` on the live session (the CLI process is reused);
- Claude close: ``aclose`` (stop the CLI, ingest the transcript into memory, extract the handoff);
- Codex cold start: ``CodexEngine.start`` + one turn; Codex turn on a live app-server (new thread) and
  a reply on a live thread;
- an RPA run (research → plan → audit r1 → revise → audit r2 → execute → review → fix), time per stage
  from its StageEnd events, and the run's tail (closing sessions, ingest, links, report).

The doubles answer instantly, so every figure is the relay's and the CLIs' own overhead. Everything runs
in a temporary folder against 127.0.0.1.

Run: .venv/bin/python -m bench.relay_overhead [--reps 10] [--rpa-runs 5] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from memory.facade import Eywa
from memory.settings import MemorySettings
from relay.codex import CodexEngine
from relay.events import RelayEvent, StageEnd
from relay.ledger import Ledger
from relay.rpa import run_rpa
from relay.session import ClaudeSession
from relay.settings import RelaySettings
from relay.stages import DEFAULT_STAGES
from tests.doubles.anthropic import AnthropicDouble, cli_env, last_user_text
from tests.doubles.openai import ExecCommand, OpenAIDouble, codex_env, input_texts, write_codex_config


def _pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _row(name: str, samples_s: list[float]) -> dict[str, Any]:
    ms = [s * 1000 for s in samples_s]
    return {"name": name, "n": len(ms), "p50_ms": round(statistics.median(ms), 1), "p95_ms": round(_pct(ms, 0.95), 1)}


async def _timed(fn: Callable[[], Awaitable[Any]]) -> tuple[float, Any]:
    started = time.perf_counter()
    value = await fn()
    return time.perf_counter() - started, value


def _verdict(kind: str, *findings: str) -> str:
    return "```json\n" + json.dumps({"verdict": kind, "findings": list(findings)}) + "\n```"


def _claude_responder() -> Callable[[dict[str, Any]], str]:
    """Audit round 1 asks for a revision, round 2 approves; the review finds one thing to fix."""

    def respond(body: dict[str, Any]) -> str:
        text = last_user_text(body)
        if "· stage audit, round 1" in text:
            return _verdict("revise", "F1: add a newline")
        if "· stage audit" in text:
            return _verdict("approve")
        if "· stage review" in text:
            return _verdict("revise", "R1: add a test")
        return "ok"

    return respond


def _codex_responder(project: Path) -> Callable[[dict[str, Any]], Any]:
    def respond(body: dict[str, Any]) -> Any:
        texts = input_texts(body)
        last = texts[-1] if texts else ""
        if "Carry out this approved plan" in last:
            return ExecCommand(f"printf 'hi\\n' > {project}/out.txt")
        return "ok"

    return respond


async def bench(reps: int, rpa_runs: int, root: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    async with AnthropicDouble() as claude_api, OpenAIDouble() as openai_api:
        home = root / "home"
        home.mkdir()
        write_codex_config(home / ".codex", openai_api.base_url)
        env = {**codex_env(home / ".codex", home), **cli_env(claude_api.base_url, str(home)), "MACUPOS_MEMORY_LLM": "0"}
        memory = MemorySettings(
            home=root / "mhome",
            claude_config_dir=Path(env["CLAUDE_CONFIG_DIR"]),
            codex_home=home / ".codex",
            llm_enabled=False,
        )
        project = root / "project"
        project.mkdir()
        async with await Eywa.open(memory) as eywa:
            table = {"setting_sources": [], "memory_mcp": "0"}
            settings = RelaySettings.from_env(env, {"relay": table}, memory=memory)

            cold, follow, close = [], [], []
            for _ in range(reps):
                session = await ClaudeSession.start(settings, project_dir=project, eywa=eywa)

                async def first(s: ClaudeSession = session) -> Any:
                    return await s.send("hello")

                elapsed, _ = await _timed(first)
                cold.append(elapsed)
                for _ in range(3):
                    elapsed, _ = await _timed(lambda s=session: s.send("and again"))  # type: ignore[misc]
                    follow.append(elapsed)
                elapsed, _ = await _timed(session.aclose)
                close.append(elapsed)
            rows += [_row("claude cold start + first turn", cold), _row("claude follow-up turn (live)", follow)]
            rows.append(_row("claude close (ingest + handoff)", close))

            config = DEFAULT_STAGES["research"]
            codex_cold, codex_new, codex_reply = [], [], []
            for _ in range(reps):
                started = time.perf_counter()
                engine = await CodexEngine.start(env=env)
                turn = await engine.run_turn("hi", stage="research", cwd=project, config=config)
                codex_cold.append(time.perf_counter() - started)
                elapsed, _ = await _timed(
                    lambda e=engine: e.run_turn("hi", stage="research", cwd=project, config=config)  # type: ignore[misc]
                )
                codex_new.append(elapsed)
                elapsed, _ = await _timed(
                    lambda e=engine, t=turn.thread_id: e.run_turn(  # type: ignore[misc]
                        "more", stage="research", cwd=project, thread_id=t, config=config
                    )
                )
                codex_reply.append(elapsed)
                await engine.aclose()
            rows += [
                _row("codex cold start + first turn", codex_cold),
                _row("codex turn, new thread (live)", codex_new),
            ]
            rows.append(_row("codex reply on a live thread", codex_reply))

            claude_api.default = _claude_responder()
            openai_api.default = _codex_responder(project)
            per_stage: dict[str, list[float]] = defaultdict(list)
            tails: list[float] = []
            totals: list[float] = []
            ledger = Ledger(eywa.db)
            async with CodexEngine(env, None) as engine:
                for _ in range(rpa_runs):
                    ends: list[StageEnd] = []

                    async def on_event(event: RelayEvent, sink: list[StageEnd] = ends) -> None:
                        if isinstance(event, StageEnd):
                            sink.append(event)

                    elapsed, report = await _timed(
                        lambda cb=on_event: run_rpa(  # type: ignore[misc]
                            "write out.txt",
                            settings=settings,
                            project_dir=project,
                            eywa=eywa,
                            codex=engine,
                            on_event=cb,
                            ledger=ledger,
                        )
                    )
                    if report.error:
                        raise SystemExit(f"RPA run failed: {report.error}")
                    for end in ends:
                        label = f"{end.stage} r{end.round}" if end.stage in ("audit", "revise") else end.stage
                        per_stage[label].append(end.duration_s)
                    totals.append(elapsed)
                    tails.append(elapsed - sum(e.duration_s for e in ends))
            rows += [_row(f"rpa stage: {name}", samples) for name, samples in per_stage.items()]
            rows += [_row("rpa tail (close, ingest, link, report)", tails), _row("rpa run total", totals)]
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=10, help="samples per session / engine figure")
    parser.add_argument("--rpa-runs", type=int, default=5, help="full RPA runs")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="relay-bench-") as tmp:
        rows = asyncio.run(bench(args.reps, args.rpa_runs, Path(tmp)))
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    width = max(len(r["name"]) for r in rows)
    print(f"{'figure':<{width}}  {'n':>3}  {'p50 ms':>8}  {'p95 ms':>8}")
    for r in rows:
        print(f"{r['name']:<{width}}  {r['n']:>3}  {r['p50_ms']:>8.1f}  {r['p95_ms']:>8.1f}")
    by_name = {r["name"]: r for r in rows}
    for warm, cold in (
        ("claude follow-up turn (live)", "claude cold start + first turn"),
        ("codex turn, new thread (live)", "codex cold start + first turn"),
    ):
        ratio = by_name[warm]["p50_ms"] / by_name[cold]["p50_ms"]
        print(f"ratio p50 {warm} / {cold}: {ratio:.2f}")


if __name__ == "__main__":
    main()

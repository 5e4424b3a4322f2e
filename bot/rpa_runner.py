"""A chat's ``/rpa TASK``: the relay's Research → Plan → Audit → execute pipeline, its report sent to the chat.

The session manager owns it (it runs in the chat's worker like any instruction) and hands it the chat's
approval handler and event sink, so the relay events of an RPA run are handled where a normal run's are.
"""

from __future__ import annotations

from pathlib import Path

from bot.progress import Progress, format_usage
from bot.services import Services
from relay.approvals import ApprovalHandler
from relay.events import StageEnd
from relay.rpa import run_rpa
from relay.session import EventSink

__all__ = ["RpaRunner", "stage_line"]


def stage_line(event: StageEnd) -> str:
    """The progress line of one finished RPA stage."""
    step = f" r{event.round}" if event.round > 1 else ""
    mark = "" if event.ok else " · FAILED"
    usage = format_usage(event.usage.tokens, event.usage.cost_usd)
    return f"{event.stage}{step} · {event.engine} · {event.duration_s:.1f} s · {usage}{mark}"


class RpaRunner:
    def __init__(self, services: Services) -> None:
        self.services = services

    async def run(
        self,
        chat_id: int,
        task: str,
        progress: Progress,
        *,
        approve: ApprovalHandler,
        on_event: EventSink,
        folder: Path | None = None,
    ) -> str:
        """Run the pipeline in ``folder`` (a branch's worktree; default the chat's project), then show its
        summary and the last audit's findings.

        Returns the run's status ("done" or "failed"); a relay error the pipeline does not report itself
        propagates to the caller.
        """
        s = self.services
        if s.codex is None:
            await s.sender.send(chat_id, "Codex is not available, so the RPA pipeline cannot run.", html_text=False)
            return "failed"
        project = await s.project_of(chat_id)
        report = await run_rpa(
            task,
            settings=s.relay,
            project_dir=folder or project.path,
            eywa=s.eywa,
            codex=s.codex,
            on_event=on_event,
            ledger=s.ledger,
            facts_lines=await s.facts_lines(),
            approve=approve,
        )
        status = "failed" if report.error else "done"
        await progress.finish(status, f"run {report.run_id} · {report.duration_s:.0f} s")
        parts = [report.summary]
        audits = [o for o in report.stages if o.stage == "audit"]
        if audits:
            last = audits[-1]
            parts.append(f"**Audit** (round {last.round}): {last.verdict or 'no verdict'}")
            parts += [f"- {f}" for f in last.findings] or ["- no findings"]
        await s.sender.send_markdown(chat_id, "\n\n".join(parts), document_threshold=s.tuning.document_threshold)
        return status

"""`macupos memory …`: ingest, recall, inspect and maintain the Eywa memory."""

from __future__ import annotations

import json
import sys
from collections.abc import Awaitable, Callable
from datetime import datetime, tzinfo
from functools import wraps
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import click

from memory.cli.remote import say_outbox, sync_cmd
from memory.cli.types import DAYS, ISO_INSTANT, folder_argument, parse_instant, run_command, settings_of
from memory.index.retrieval import check_days_back
from memory.render.markdown import zone
from memory.sources.jsonl import without_lone_surrogates

__all__ = ["memory_group"]

P = ParamSpec("P")
R = TypeVar("R")


def _with_eywa(fn: Callable[..., Awaitable[R]]) -> Callable[..., R]:
    """Open the memory (local, or the service's: memory.factory) for one command, close it afterwards, and
    turn memory errors into clear CLI errors."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> R:
        from memory.factory import open_memory

        settings = settings_of(click.get_current_context())

        async def main() -> R:
            from memory.handoffs.model_written import finish_background

            eywa = await open_memory(settings)
            try:
                return await fn(eywa, *args, **kwargs)
            finally:
                await eywa.close()
                await finish_background()  # a timed-out extraction's CLI is still being stopped

        return run_command(main())

    return wrapper


@click.group()
def memory_group() -> None:
    """Eywa, the memory core: transcripts → markdown → handoffs → index → retrieval.

    Data lives in $MACUPOS_HOME (default ~/.macupos): memory.db and the readable handoffs/ tree; with
    MACUPOS_MEMORY_URL and MACUPOS_API_KEY, in that memory service (`macupos serve`) instead.
    """


@memory_group.command("ingest")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--force", is_flag=True, help="Re-render and re-extract even unchanged sessions.")
@click.option("--no-llm", is_flag=True, help="Use the deterministic handoff extractor only.")
@click.option("--no-extract", is_flag=True, help="Store and index transcripts; extract handoffs later.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
@_with_eywa
async def ingest_cmd(
    eywa: Any, paths: tuple[Path, ...], force: bool, no_llm: bool, no_extract: bool, as_json: bool, quiet: bool
) -> None:
    """Ingest transcripts from PATHS (files or folders).

    Without PATHS: Claude Code's projects folder ($CLAUDE_CONFIG_DIR/projects, default ~/.claude/projects)
    and Codex's sessions folder ($CODEX_HOME/sessions, default ~/.codex/sessions).

    The summary names lines skipped (for a grown file, only its new ones) and any session id found in two
    files (the copy that goes further wins: its last entry later, then more entries).
    """
    from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn

    show = not quiet and not as_json and sys.stderr.isatty()
    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        DownloadColumn(),
        TimeRemainingColumn(),
        disable=not show,
        transient=True,
    ) as bar:
        task = bar.add_task("ingesting", total=None)

        def progress(done: int, total: int, path: str) -> None:
            bar.update(task, completed=done, total=total, description=Path(path).name[:40])

        report = await eywa.ingest(
            list(paths), force=force, extract=not no_extract, use_llm=False if no_llm else None, progress=progress
        )
    summary = {
        "files": report.files_seen,
        "files_unchanged": report.files_unchanged,
        "sessions_new": report.sessions_new,
        "sessions_updated": report.sessions_updated,
        "sessions_unchanged": report.sessions_unchanged,
        "handoffs_extracted": report.handoffs_extracted,
        "handoffs_by_llm": report.handoffs_llm,
        "extraction_failed": report.extract_failed,
        "bytes_read": report.bytes_read,
        "lines_skipped": dict(sorted(report.lines_skipped.items())),
        "unknown_types_skipped": dict(sorted(report.types_skipped.items())),
        "missing": report.missing,
        "unreadable": [{"path": p, "reason": r} for p, r in report.unreadable],
        "session_id_clashes": [{"session_id": s, "kept": k, "also_in": o} for s, k, o in report.clashes],
        "sessions_private": report.sessions_private,
        "handoffs_over_budget": len(report.budget_capped),
    }
    if as_json:
        click.echo(json.dumps(summary, indent=2, sort_keys=True))
    else:
        click.echo(
            f"{report.files_seen} files ({report.files_unchanged} unchanged); sessions: {report.sessions_new} new, "
            f"{report.sessions_updated} updated, {report.sessions_unchanged} unchanged; "
            f"{report.handoffs_extracted} handoffs extracted ({report.handoffs_llm} by LLM, "
            f"{report.extract_failed} failed)"
        )
        if report.sessions_private:
            click.echo(f"  left out {report.sessions_private} session(s) of private projects")
        if report.budget_capped:
            click.echo(f"  {len(report.budget_capped)} handoff(s) written without the model: the daily budget is spent")
        for reason, n in sorted(report.lines_skipped.items()):
            click.echo(f"  skipped {n} line(s): {reason}")
        for p in report.problems[:20]:
            click.echo(f"    {p.path}:{p.line_no}: {p.reason}")
        for kind, n in sorted(report.types_skipped.items()):
            click.echo(f"  skipped {n} line(s) of unknown type {kind!r}")
        for path in report.missing:
            click.echo(f"  missing: {path}", err=True)
        for path, reason in report.unreadable:
            click.echo(f"  unreadable: {path}: {reason}", err=True)
        for sid, kept, other in report.clashes:
            click.echo(f"  session {sid} is in two files; kept {kept}, not {other}", err=True)
    say_outbox(eywa)
    if (report.missing or report.unreadable) and not report.files_seen:
        raise click.ClickException("nothing could be read")


@memory_group.command("get")
@click.argument("query", required=False, default="")
@click.option("--project", help="Project name: its terms join the query (a boost, not a filter).")
@click.option("--days-back", type=DAYS, help="Only handoffs from the last N days (N > 0).")
@click.option("--max", "max_k", type=click.IntRange(1, 5), default=5, show_default=True)
@click.option(
    "--as-of",
    type=ISO_INSTANT,
    help="Score as if now were this ISO-8601 time, exactly (reproducible results). Without it, now is this "
    "machine's clock plus 10 minutes, so a handoff from a machine whose clock runs a little ahead is found.",
)
@click.option("--branch", help="A git branch: the handoffs of its sessions first (a reordering, not a filter).")
@click.option("--json", "as_json", is_flag=True, help="Print [{session_id, score, date, headline, projects, kind}].")
@click.option("--explain", is_flag=True, help="Show matched terms, IDF and factors for every result.")
@click.option(
    "--queries",
    type=click.File("r", encoding="utf-8", errors="replace"),  # a line that is not UTF-8 is a bad line, reported
    help="JSON lines of {query, project, as_of, days_back, max}: one result line each (an error line for a "
    "bad one); --explain adds each score's parts. No QUERY or per-query options beside it.",
)
@_with_eywa
async def get_cmd(
    eywa: Any,
    query: str,
    project: str | None,
    days_back: float | None,
    max_k: int,
    as_of: datetime | None,
    branch: str | None,
    as_json: bool,
    explain: bool,
    queries: Any,
) -> None:
    """Print the grounding for QUERY: the best past handoffs, without frontmatter, joined by ---.

    A date named in QUERY ("on 3 June", "in May 2024", "2024-06-03") favours the sessions of that day
    or month among those whose text matches.
    """
    from memory.grounding import explain_text

    if queries is not None:
        if query or project or branch or days_back is not None or as_of is not None:
            raise click.UsageError(
                "--queries takes each query's text and options from its lines: give no QUERY, "
                "--project, --days-back, --as-of or --branch with it"
            )
        for n, line in enumerate(queries, 1):
            if line.strip():
                click.echo(json.dumps(await _answer_query_line(eywa, n, line, max_k, explain)))
        return
    g = await eywa.get(query, project=project, days_back=days_back, max_handoffs=max_k, as_of=as_of, branch=branch)
    if as_json:
        click.echo(json.dumps([r.as_json(explain) for r in g.results], indent=2))
    elif explain:
        click.echo(explain_text(g.results))
    else:
        click.echo(g.text)


async def _answer_query_line(eywa: Any, n: int, line: str, default_max: int, explain: bool) -> dict[str, Any]:
    """One --queries line's output object: its results, or an error naming the line (never an exception)."""
    try:
        spec = _query_spec(without_lone_surrogates(json.loads(line)), default_max)
    except (ValueError, OverflowError) as exc:  # OverflowError: a number too large for a float
        return {"line": n, "error": f"invalid query line: {exc}"}
    except RecursionError:  # the JSON decoder recurses per level
        return {"line": n, "error": "invalid query line: nested too deeply"}
    g = await eywa.get(
        spec["query"],
        project=spec["project"],
        days_back=spec["days_back"],
        max_handoffs=spec["max"],
        as_of=spec["as_of"],
    )
    return {"query": spec["query"], "results": [r.as_json(explain) for r in g.results]}


def _query_spec(spec: Any, default_max: int) -> dict[str, Any]:
    """One --queries line, checked: ValueError names what is wrong."""
    if not isinstance(spec, dict):
        raise ValueError("not a JSON object")
    query, project, days_back, k = spec.get("query", ""), spec.get("project"), spec.get("days_back"), spec.get("max")
    if not isinstance(query, str):
        raise ValueError("query must be a string")
    if project is not None and not isinstance(project, str):
        raise ValueError("project must be a string")
    if days_back is not None:
        if isinstance(days_back, bool) or not isinstance(days_back, int | float):
            raise ValueError("days_back must be a number")
        check_days_back(float(days_back))
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
        raise ValueError("max must be a positive integer")
    when = parse_instant(str(spec["as_of"])) if spec.get("as_of") else None
    return {"query": query, "project": project, "days_back": days_back, "max": k or default_max, "as_of": when}


@memory_group.command("search")
@click.argument("query")
@click.option("--limit", type=click.IntRange(1, 100), default=10, show_default=True)
@click.option("--json", "as_json", is_flag=True)
@_with_eywa
async def search_cmd(eywa: Any, query: str, limit: int, as_json: bool) -> None:
    """Detail recall over everything said in sessions (subagents included)."""
    hits = await eywa.search(query, limit)
    if as_json:
        from dataclasses import asdict

        click.echo(json.dumps([asdict(h) for h in hits], indent=2))
        return
    for h in hits:
        parent = f" (subagent of {h.parent_id})" if h.parent_id else ""
        click.echo(f"{h.session_id}{parent}  {h.score:.2f}\n    {h.snippet}")


@memory_group.command("show")
@click.argument("session_id")
@click.option("--markdown", "what", flag_value="markdown", default=True, help="The rendered transcript (default).")
@click.option("--handoff", "what", flag_value="handoff", help="The handoff file.")
@_with_eywa
async def show_cmd(eywa: Any, session_id: str, what: str) -> None:
    """Print a session's deterministic markdown, or its handoff."""
    view = await eywa.show(session_id)
    if what == "handoff":
        if view.handoff is None:
            raise click.ClickException(f"session {session_id} has no handoff yet (try: macupos memory extract)")
        click.echo(view.handoff.markdown, nl=False)
    else:
        if view.session is None:
            raise click.ClickException(f"{session_id} was imported as a handoff only; try --handoff")
        click.echo(view.session.markdown, nl=False)


@memory_group.command("list")
@click.option("--limit", type=click.IntRange(1, 10_000), default=20, show_default=True)
@click.option("--project")
@click.option("--json", "as_json", is_flag=True)
@_with_eywa
async def list_cmd(eywa: Any, limit: int, project: str | None, as_json: bool) -> None:
    """Recent handoffs, newest first; dates in the configured timezone (MACUPOS_TIMEZONE)."""
    rows = await eywa.list_handoffs(limit=limit, project=project)
    if as_json:
        click.echo(json.dumps([r.listing() for r in rows], indent=2))
        return
    local = zone(eywa.settings.timezone)
    for r in rows:
        click.echo(f"{_local_time(r.date, local)}  {r.session_id[:36]:36}  [{', '.join(r.projects)}] {r.headline}")


def _local_time(date_iso: str, local: tzinfo) -> str:
    """A handoff's date in the configured timezone, to the minute ("undated" when it has none; a date
    without a time as it is)."""
    if len(date_iso) == 10:
        return f"{date_iso:16}"
    try:
        d = parse_instant(date_iso).astimezone(local)
    except (ValueError, OverflowError):  # not a date, or one the timezone shift takes out of range
        return f"{'undated':16}"
    return f"{d.year:04d}-{d.month:02d}-{d.day:02d} {d.hour:02d}:{d.minute:02d}"


@memory_group.command("stats")
@click.option("--json", "as_json", is_flag=True)
@_with_eywa
async def stats_cmd(eywa: Any, as_json: bool) -> None:
    """Counts: sources, sessions by kind, handoffs, index size, skipped lines."""
    s = await eywa.stats()
    if as_json:
        click.echo(json.dumps(s, indent=2, sort_keys=True))
        return
    for key, value in s.items():
        if isinstance(value, dict):
            value = ", ".join(f"{k} {v}" for k, v in value.items()) or "none"
        click.echo(f"{key}: {value}")


@memory_group.command("forget")
@click.argument("session_id")
@_with_eywa
async def forget_cmd(eywa: Any, session_id: str) -> None:
    """Remove a session (and its subagents) from memory, mirror files included; later ingests and imports
    leave it out."""
    removed = await eywa.forget(session_id)
    click.echo(f"forgot {len(removed)} session(s): {', '.join(removed)}")


@memory_group.command("extract")
@click.argument("session_id", required=False)
@click.option("--transcript", "transcript_path", type=click.Path(path_type=Path))
@click.option("--no-llm", is_flag=True)
@_with_eywa
async def extract_cmd(eywa: Any, session_id: str | None, transcript_path: Path | None, no_llm: bool) -> None:
    """(Re-)extract the handoff of SESSION_ID or of every session in --transcript."""
    if not session_id and not transcript_path:
        raise click.UsageError("give a SESSION_ID or --transcript PATH")
    rows = await eywa.extract(session_id, transcript_path=transcript_path, use_llm=False if no_llm else None)
    for r in rows:
        click.echo(f"{r.session_id}: {r.headline} ({r.source})")


@memory_group.command("import")
@click.argument("folder", type=click.Path(), callback=lambda _ctx, _param, value: folder_argument(value))
@_with_eywa
async def import_cmd(eywa: Any, folder: Path) -> None:
    """Adopt handoff files from FOLDER (e.g. ~/.eywa/handoffs, or hand-edited files).

    A handoff without its transcript is also indexed by its own text; forgotten sessions are left out.
    """
    from memory.handoffs.adopt import WORKERS

    report = await eywa.import_dir(folder, workers=WORKERS)  # a worker process reads while this one writes
    click.echo(f"imported {report.imported} handoff(s)")
    for path, why in report.rejected:
        click.echo(f"  rejected {path}: {why}", err=True)


@memory_group.command("export")
@click.argument("folder", type=click.Path(), callback=lambda _ctx, _param, value: folder_argument(value))
@_with_eywa
async def export_cmd(eywa: Any, folder: Path) -> None:
    """Write every handoff as FOLDER/YYYY/MM/DD/<session>.md (the format `import` reads)."""
    n = await eywa.export_dir(folder)
    click.echo(f"exported {n} handoff(s) to {folder}")


# Structured facts (memory/facts): `script`, `rebuild`, `facts load|export|show`.
from memory.facts.cli import facts_group, rebuild_cmd, script_cmd  # noqa: E402

memory_group.add_command(script_cmd)
memory_group.add_command(rebuild_cmd)
memory_group.add_command(facts_group)

# The way out of a damaged database: `recover`.
from memory.cli.recover import recover_cmd  # noqa: E402

memory_group.add_command(recover_cmd)

# The memory service's outbox: `sync`.
memory_group.add_command(sync_cmd)

# Claude Code integration: `hooks install|uninstall`, `hook` (what the hooks call) and `mcp`.
from memory.cli.claude import hook_cmd, hooks_group, mcp_cmd  # noqa: E402

memory_group.add_command(hooks_group)
memory_group.add_command(hook_cmd)
memory_group.add_command(mcp_cmd)

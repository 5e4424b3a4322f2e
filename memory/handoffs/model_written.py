"""The model-written handoff: one ``claude-agent-sdk`` query with a JSON schema, no tools, bounded in time.

The owner's Claude Code login does the work (``env`` is passed through to the CLI). Invalid output is
retried once; then ``ExtractionError`` tells the caller to use the deterministic fallback, which
``extract_handoff`` does. What each attempt cost (tokens, USD, as the CLI reports them) goes to ``on_spend``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import tempfile
from collections.abc import AsyncGenerator, Callable, Mapping
from contextlib import aclosing
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from memory.errors import ExtractionError
from memory.handoffs.deterministic import base_handoff, extract_fallback
from memory.handoffs.format import normalize_keyword
from memory.models import Handoff, Transcript
from memory.sources.worktrees import is_worktree, project_root, worktree_projects
from memory.spend import Spend, spend_of

if TYPE_CHECKING:
    from claude_agent_sdk import ClaudeAgentOptions

__all__ = ["HANDOFF_SCHEMA", "SYSTEM_PROMPT", "extract_handoff", "extract_with_llm", "finish_background"]

logger = logging.getLogger(__name__)

_ATTEMPTS = 2  # the first try and one retry
_BACKGROUND: set[asyncio.Task[Any]] = set()  # timed-out runs still stopping their CLI process
_LIST_FIELDS = ("what_happened", "insights", "key_files", "open_threads")

SpendSink = Callable[[Spend], None]


def _strings(max_items: int) -> dict[str, Any]:
    return {"type": "array", "items": {"type": "string"}, "maxItems": max_items}


HANDOFF_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "headline": {"type": "string", "minLength": 3, "maxLength": 120},
        "projects": _strings(5),
        "keywords": _strings(10),
        "substance": {"type": "integer", "enum": [0, 1, 2]},
        "what_happened": _strings(8),
        "insights": _strings(8),
        "key_files": _strings(15),
        "open_threads": _strings(8),
    },
    "required": ["headline", "projects", "keywords", "substance", *_LIST_FIELDS],
    "additionalProperties": False,
}

SYSTEM_PROMPT = """\
You write handoffs: what the next coding session needs to know to continue where a past Claude Code
session left off. You receive the session rendered as markdown. Answer only through the structured
output tool, with these fields:

- headline: the main outcome, action first, 5 to 10 words.
- projects: the project or repository names the work was in (from paths and context), lowercase.
- keywords: 5 to 7 routing terms someone would search for later: specific, singular,
  lowercase-hyphenated (good: bm25-search, handoff-schema, telegram-voice-notes; bad: python, code,
  development, bugfix).
- substance: 0 when no real work happened (greetings, a question with no follow-through, an empty or
  aborted session), 1 for a single task, 2 for multi-step work with real progress.
- what_happened: 2 to 5 short items in order: what was done and why, not which tools ran.
- insights: decisions, learnings and the user's corrections ("wrong belief -> what is true").
- key_files: files created or changed that matter, paths relative to the project.
- open_threads: unfinished work, unanswered questions, failing tests; empty when done.

For substance 0 leave the lists empty. Be terse: the whole answer stays under 600 tokens. Never copy
tool output, code or secrets into the answer.
"""


def _prompt(t: Transcript, base: Handoff, markdown: str, max_input_chars: int) -> str:
    if len(markdown) > max_input_chars:
        # Requests open a session and open threads end it: keep both ends.
        head = max_input_chars * 2 // 5
        tail = max_input_chars - head
        skipped = len(markdown) - head - tail
        markdown = f"{markdown[:head]}\n\n[… {skipped} characters of the session left out …]\n\n{markdown[-tail:]}"
    facts = [
        f"session: {t.session_id}",
        f"date: {base.date}",
        f"duration: {base.duration_min:g} minutes",
        f"working directory: {t.cwd}" if t.cwd else "",
        f"project folder: {project_root(t.cwd)} (the session ran in a worktree of it)" if is_worktree(t.cwd) else "",
        f"title: {t.title}" if t.title else "",
    ]
    header = "\n".join(f for f in facts if f)
    return f"{header}\n\n<session>\n{markdown}\n</session>\n\nWrite the handoff for this session."


def _options(model: str, env: Mapping[str, str], cwd: Path) -> ClaudeAgentOptions:
    # Imported here: the SDK costs ~1.4 s to import, and hooks and --no-llm runs never need it.
    from claude_agent_sdk import ClaudeAgentOptions

    return ClaudeAgentOptions(
        model=model,
        system_prompt=SYSTEM_PROMPT,
        tools=[],  # no built-in tools: the structured output tool is the only one offered
        setting_sources=[],  # ignore the owner's settings, hooks and CLAUDE.md
        # One model turn per attempt: our own retry is the second chance, so attempts stay countable.
        max_turns=1,
        output_format={"type": "json_schema", "schema": HANDOFF_SCHEMA},
        env=dict(env),
        cwd=cwd,
        # Keep extraction runs out of the projects folder that ingest reads.
        extra_args={"no-session-persistence": None},
    )


async def _ask(prompt: str, options: ClaudeAgentOptions, on_spend: SpendSink | None = None) -> Any:
    """The structured output of one query; ``ValueError`` when there is none. Its cost goes to ``on_spend``."""
    from claude_agent_sdk import ClaudeSDKError, ResultMessage, query

    result: ResultMessage | None = None
    failure = ""
    try:
        # query() is an async generator typed as an iterator; closing it on cancel stops the CLI process.
        stream = cast(AsyncGenerator[Any, None], query(prompt=prompt, options=options))
        async with aclosing(stream) as messages:
            async for message in messages:
                if isinstance(message, ResultMessage):
                    result = message
                    if on_spend is not None:
                        on_spend(
                            spend_of(
                                str(options.model or ""), message.usage, message.total_cost_usd, message.duration_ms
                            )
                        )
    except ClaudeSDKError as exc:
        failure = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if result is not None and result.structured_output is not None:
        return result.structured_output
    if result is not None and result.result and not result.is_error:
        try:
            return json.loads(result.result)
        except json.JSONDecodeError:
            pass
    if failure:
        raise ValueError(f"claude failed: {failure}")
    raise ValueError(f"no structured output (result {result.subtype if result else 'missing'})")


def _clean_list(value: Any, field: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{field} is not a list of strings")
    # Paths keep their spelling; prose is folded to one line per item.
    keep = field == "key_files"
    return [v.strip() if keep else " ".join(v.split()) for v in value if v.strip()]


def _validate(payload: Any) -> dict[str, Any]:
    """Checked and normalised fields of a model answer; ``ValueError`` says what is wrong."""
    if not isinstance(payload, dict):
        raise ValueError("output is not a JSON object")
    missing = [k for k in HANDOFF_SCHEMA["required"] if k not in payload]
    if missing:
        raise ValueError(f"missing fields: {', '.join(missing)}")
    headline = payload["headline"]
    if not isinstance(headline, str) or len(headline.split()) < 2:
        raise ValueError("headline is not a phrase")
    substance = payload["substance"]
    if isinstance(substance, bool) or substance not in (0, 1, 2):
        raise ValueError(f"invalid substance {substance!r}")
    fields: dict[str, Any] = {"headline": " ".join(headline.split()), "substance": int(substance)}
    for name in ("projects", "keywords"):
        terms = (normalize_keyword(v) for v in _clean_list(payload[name], name))
        fields[name] = list(dict.fromkeys(v for v in terms if v))
    if int(substance) > 0 and not fields["keywords"]:
        raise ValueError("no keywords")
    fields["keywords"] = fields["keywords"][:7]
    for name in _LIST_FIELDS:
        fields[name] = _clean_list(payload[name], name)
    return fields


async def _attempts(
    session_id: str,
    prompt: str,
    model: str,
    env: Mapping[str, str],
    cwd: Path | None,
    reasons: list[str],
    on_spend: SpendSink | None = None,
) -> dict[str, Any] | None:
    """Validated fields of the first good answer in ``_ATTEMPTS`` tries, or None (``reasons`` says why)."""
    with tempfile.TemporaryDirectory(prefix="macupos-extract-") as scratch:
        options = _options(model, env, cwd or Path(scratch))
        for attempt in range(1, _ATTEMPTS + 1):
            try:
                return _validate(await _ask(prompt, options, on_spend))
            except ValueError as exc:
                logger.info("handoff attempt %d for %s rejected: %s", attempt, session_id, exc)
                reasons.append(f"attempt {attempt}: {exc}")
    return None


def _settle(task: asyncio.Task[Any]) -> None:
    _BACKGROUND.discard(task)
    if not task.cancelled() and task.exception() is not None:
        logger.warning("stopping a timed-out extraction failed: %s", task.exception())


async def finish_background(timeout_s: float = 20.0) -> None:
    """Wait for timed-out extractions to finish stopping their CLI processes (call before exiting)."""
    if _BACKGROUND:
        await asyncio.wait(set(_BACKGROUND), timeout=timeout_s)


async def extract_with_llm(
    t: Transcript,
    markdown: str,
    *,
    model: str,
    env: Mapping[str, str],
    timeout_s: float,
    cwd: Path | None = None,
    max_input_chars: int = 60_000,
    on_spend: SpendSink | None = None,
) -> Handoff:
    """A handoff written by the model; ``ExtractionError`` after two invalid answers or on timeout.

    ``timeout_s`` bounds the whole call, retry included. ``cwd`` is where the CLI runs (a fresh temporary
    folder when None, so no project settings leak in). Each attempt's cost goes to ``on_spend``.
    """
    base = base_handoff(t)
    prompt = _prompt(t, base, markdown, max_input_chars)
    reasons: list[str] = []
    # The SDK gives a CLI up to 5 s to exit after its input closes; a timed-out run is stopped in the
    # background instead, so the caller gets its answer (the fallback) at the deadline.
    task = asyncio.create_task(_attempts(t.session_id, prompt, model, env, cwd, reasons, on_spend))
    try:
        async with asyncio.timeout(timeout_s):
            fields = await asyncio.shield(task)
    except TimeoutError:
        reasons.append(f"timed out after {timeout_s:g}s")
        fields = None
    finally:
        if not task.done():
            task.cancel()
            _BACKGROUND.add(task)
            task.add_done_callback(_settle)
    if fields is None:
        raise ExtractionError(t.session_id, "; ".join(reasons))
    return replace(base, **fields, source="llm")


async def extract_handoff(
    t: Transcript,
    markdown: str,
    *,
    use_llm: bool,
    model: str,
    env: Mapping[str, str],
    timeout_s: float,
    idf: Callable[[str], float] | None = None,
    subagent_titles: Mapping[str, str] | None = None,
    on_spend: SpendSink | None = None,
) -> Handoff:
    """The model's handoff when ``use_llm`` and it succeeds, else the deterministic one (``source`` says which).

    Where the model left projects or key files empty, the deterministic ones fill in: they come from
    facts (cwd, tool inputs), not judgement.
    """
    fallback = extract_fallback(t, idf=idf, subagent_titles=subagent_titles or {})
    if not use_llm:
        return fallback
    try:
        h = await extract_with_llm(t, markdown, model=model, env=env, timeout_s=timeout_s, on_spend=on_spend)
    except ExtractionError as exc:
        logger.warning("%s; using the deterministic handoff", exc)
        return fallback
    h.projects = h.projects or fallback.projects
    if is_worktree(t.cwd):  # the main folder's project, never the worktree's folders (memory.sources.worktrees)
        h.projects = worktree_projects(h.projects, t.cwd, fallback.projects[:1])
    if h.substance > 0:
        h.key_files = h.key_files or fallback.key_files
    return h

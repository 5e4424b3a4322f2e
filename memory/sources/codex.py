"""Codex CLI rollouts (``~/.codex/sessions/YYYY/MM/DD/rollout-<ts>-<uuid>.jsonl``) → `Transcript(kind=CODEX)`.

Each line is ``{"timestamp", "type", "payload"}``. ``response_item`` lines carry the conversation
(messages, reasoning summaries, tool calls and their outputs); ``event_msg`` lines repeat the user
and agent messages for the UI, so they are used only when a file has no ``response_item`` message
at all (and counted as skipped otherwise). Injected context (``<environment_context>``,
``<user_instructions>``, AGENTS.md, developer messages) becomes ``is_meta`` entries. Legacy rollouts
(a bare session-meta object first, then bare response items) are understood too.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memory.models import Block, BlockKind, Entry, SessionKind, Transcript
from memory.sources.jsonl import ReadStats, TextClipper, identity, iter_json_lines, type_name

__all__ = ["parse_codex_file"]

_META_PREFIXES = (
    "<environment_context>",
    "<user_instructions>",
    "<user_shell_command>",
    "<INSTRUCTIONS>",
    "# AGENTS.md instructions",
    "<permissions instructions>",
)
_RESPONSE_TYPES = frozenset(
    {
        "message",
        "reasoning",
        "function_call",
        "function_call_output",
        "local_shell_call",
        "custom_tool_call",
        "custom_tool_call_output",
        "web_search_call",
    }
)
_UUID_TAIL = re.compile(r"([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})$")
_TITLE_CHARS = 120


def _s(d: dict[str, Any], key: str) -> str:
    value = d.get(key)
    return value if isinstance(value, str) else ""


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    out = []
    for item in content if isinstance(content, list) else ():
        if isinstance(item, dict) and isinstance(item.get("text"), str):
            out.append(item["text"])
    return out


def _output_text(output: Any) -> tuple[str, bool]:
    """A tool output (plain string, JSON string ``{"output", "metadata"}``, or ``{"content", "success"}``)."""
    if isinstance(output, str):
        stripped = output.lstrip()
        if stripped.startswith("{"):
            try:
                decoded = json.loads(output)
            except (json.JSONDecodeError, RecursionError):
                return output, False
            if isinstance(decoded, dict) and isinstance(decoded.get("output"), str):
                meta = decoded.get("metadata")
                code = meta.get("exit_code") if isinstance(meta, dict) else None
                return decoded["output"], isinstance(code, int) and code != 0
        return output, False
    if isinstance(output, dict):
        text = "\n".join(_texts(output.get("content"))) if not isinstance(output.get("content"), str) else ""
        text = _s(output, "content") or text or _s(output, "output")
        return text, output.get("success") is False
    return "", False


class _Rollout:
    def __init__(self, clip: TextClipper) -> None:
        self.clip = clip
        self.entries: list[Entry] = []
        self.events: list[Entry] = []  # event_msg user/agent messages, the fallback
        self.event_counts: Counter[str] = Counter()
        self.skipped: Counter[str] = Counter()
        self.meta: dict[str, str] = {}
        self.has_messages = False
        self.first_ts = ""
        self.last_ts = ""

    def text_block(self, kind: BlockKind, text: str) -> Block:
        clipped, cut = self.clip.prose(text)
        return Block(kind, clipped, truncated_chars=cut)

    def feed(self, rec: dict[str, Any], line_no: int) -> None:
        kind = rec.get("type")
        payload = rec.get("payload")
        if not isinstance(kind, str):  # a list or object where the name belongs: an unknown kind, never a crash
            kind = type_name(kind) if kind else None
        if payload is None and "type" in rec and kind in _RESPONSE_TYPES:
            kind, payload = "response_item", rec  # legacy: bare response items
        elif payload is None and "type" not in rec and "id" in rec:
            kind, payload = "session_meta", rec  # legacy: bare session meta first line
        ts = _s(rec, "timestamp") or (_s(payload, "timestamp") if isinstance(payload, dict) else "")
        if ts:
            self.first_ts = min(self.first_ts or ts, ts)
            self.last_ts = max(self.last_ts, ts)
        if not isinstance(payload, dict):
            self.skipped[type_name(kind or rec.get("record_type"))] += 1
            return
        if kind == "session_meta":
            self._session_meta(payload)
        elif kind == "turn_context":
            for key in ("model", "cwd"):
                if _s(payload, key):
                    self.meta.setdefault(key, self.clip.redact(_s(payload, key)))
            if _s(payload, "model"):
                self.meta["model"] = self.clip.redact(_s(payload, "model"))  # the newest turn's model wins
        elif kind == "response_item":
            self._response_item(payload, ts, line_no)
        elif kind == "event_msg":
            self._event(payload, ts, line_no)
        elif kind == "compacted":
            text = _s(payload, "message")
            block = self.text_block(BlockKind.TEXT, text)
            self.entries.append(Entry("user", ts, (block,), line_no=line_no, is_compact_summary=True))
        else:
            self.skipped[type_name(kind)] += 1

    def _session_meta(self, p: dict[str, Any]) -> None:
        for src, dst in (("id", "id"), ("cwd", "cwd"), ("cli_version", "version"), ("timestamp", "started")):
            if _s(p, src):
                # A folder name can carry a token too; the id and timestamp are kept as they are.
                self.meta.setdefault(dst, self.clip.redact(_s(p, src)) if dst in ("cwd", "version") else _s(p, src))
        git = p.get("git")
        if isinstance(git, dict) and _s(git, "branch"):
            self.meta.setdefault("branch", self.clip.redact(_s(git, "branch")))

    def _response_item(self, p: dict[str, Any], ts: str, line_no: int) -> None:
        kind = p.get("type")
        role, meta, subtype = "assistant", False, ""
        blocks: tuple[Block, ...] = ()
        if kind == "message":
            texts = _texts(p.get("content"))
            role = _s(p, "role") or "user"
            meta = role in ("developer", "system") or (
                role == "user" and bool(texts) and all(t.lstrip().startswith(_META_PREFIXES) for t in texts)
            )
            if role in ("developer", "system"):
                role, subtype = "system", _s(p, "role")
            elif not meta:
                self.has_messages = True
            blocks = tuple(self.text_block(BlockKind.TEXT, t) for t in texts)
        elif kind == "reasoning":
            texts = _texts(p.get("summary")) or _texts(p.get("content"))
            blocks = tuple(self.text_block(BlockKind.THINKING, t) for t in texts)
        elif kind in ("function_call", "custom_tool_call", "local_shell_call", "web_search_call"):
            blocks = (self._tool_use(p),)
        elif kind in ("function_call_output", "custom_tool_call_output"):
            text, is_error = _output_text(p.get("output"))
            clipped, cut = self.clip.text(text)
            role = "user"  # as in Claude transcripts, results come back on the user side
            blocks = (
                Block(BlockKind.TOOL_RESULT, clipped, tool_id=_s(p, "call_id"), is_error=is_error, truncated_chars=cut),
            )
        else:
            self.skipped[f"response_item/{type_name(kind)}"] += 1
            return
        if blocks:
            self.entries.append(Entry(role, ts, blocks, line_no=line_no, subtype=subtype, is_meta=meta))

    def _tool_use(self, p: dict[str, Any]) -> Block:
        kind = _s(p, "type")
        name = _s(p, "name") or {"local_shell_call": "local_shell", "web_search_call": "web_search"}.get(kind, kind)
        raw: Any
        if kind == "function_call":
            try:
                raw = json.loads(_s(p, "arguments") or "{}")
            except (json.JSONDecodeError, RecursionError):  # kept as the text it is
                raw = _s(p, "arguments")
            if not isinstance(raw, dict):
                raw = {"arguments": raw}
        elif kind == "custom_tool_call":
            raw = {"input": p.get("input", "")}
        else:
            raw = p.get("action") if isinstance(p.get("action"), dict) else {}
        tool_input, cut = self.clip.value(raw)
        clipped_name, _ = self.clip.text(name)
        return Block(
            BlockKind.TOOL_USE,
            tool_name=clipped_name,
            tool_id=_s(p, "call_id") or _s(p, "id"),
            tool_input=tool_input,
            truncated_chars=cut,
        )

    def _event(self, p: dict[str, Any], ts: str, line_no: int) -> None:
        kind = type_name(p.get("type"))
        self.event_counts[kind] += 1
        if kind in ("user_message", "agent_message") and _s(p, "message"):
            role = "user" if kind == "user_message" else "assistant"
            block = self.text_block(BlockKind.TEXT, _s(p, "message"))
            self.events.append(Entry(role, ts, (block,), line_no=line_no))


def _title(entries: list[Entry]) -> str:
    for e in entries:
        if e.role == "user" and not e.is_meta and not e.is_compact_summary:
            for b in e.blocks:
                if b.kind is BlockKind.TEXT and b.text.strip():
                    flat = re.sub(r"\s+", " ", b.text).strip()
                    return flat if len(flat) <= _TITLE_CHARS else flat[: _TITLE_CHARS - 1].rstrip() + "…"
    return ""


def parse_codex_file(
    path: Path,
    *,
    redact: Callable[[str], str] = identity,
    tool_output_limit: int = 2000,
    on_bytes: Callable[[int], None] | None = None,
) -> Transcript:
    """Parse one Codex rollout. Raises ``OSError`` only when the file cannot be read; bad lines are problems.
    ``on_bytes`` is told how far the read has got, every few megabytes."""
    reader = ReadStats(str(path), on_bytes=on_bytes)
    rollout = _Rollout(TextClipper(redact, tool_output_limit))
    with path.open("rb") as fh:
        for line in iter_json_lines(fh, reader):
            try:
                rollout.feed(line.obj, line.line_no)
            except RecursionError:  # a value nested too deep for the walks that clip it: this line only
                reader.problem(line.line_no, "json nested too deeply")
    entries = rollout.entries
    used_events = not rollout.has_messages and bool(rollout.events)
    if used_events:
        # No response_item messages (an older or trimmed rollout): the UI events are the only copy.
        entries = sorted([*entries, *rollout.events], key=lambda e: e.line_no)
        for e in rollout.events:
            rollout.event_counts["user_message" if e.role == "user" else "agent_message"] -= 1
    skipped = rollout.skipped
    skipped.update({f"event_msg/{k}": n for k, n in rollout.event_counts.items() if n > 0})
    meta = rollout.meta
    match = _UUID_TAIL.search(path.stem)
    raw_id = meta.get("id") or (match.group(1) if match else path.stem)
    return Transcript(
        session_id=f"codex-{raw_id}",
        kind=SessionKind.CODEX,
        source_path=str(path),
        entries=entries,
        cwd=meta.get("cwd", ""),
        git_branch=meta.get("branch", ""),
        title=_title(entries),  # built from already redacted entries
        model=meta.get("model", ""),
        version=meta.get("version", ""),
        started_at=meta.get("started") or rollout.first_ts,
        ended_at=rollout.last_ts,
        problems=reader.problems,
        skipped_types=skipped,
        lines_read=reader.lines_read,
        bytes_read=reader.bytes_read,
    )

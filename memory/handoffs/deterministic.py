"""The deterministic handoff: what a session did, derived from its transcript without a model.

Used with ``--no-llm``, when no model is reachable, and for subagent runs. Same transcript (and the same
``idf``) → the same handoff, on any machine.
"""

from __future__ import annotations

import datetime as dt
import re
import shlex
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from pathlib import PurePosixPath, PureWindowsPath
from typing import Any

from memory.handoffs.format import normalize_keyword
from memory.models import BlockKind, Entry, Handoff, SessionKind, Transcript
from memory.redact.redactor import MARKER_RE
from memory.sources.worktrees import project_root
from memory.timeutil import parse_iso

__all__ = ["base_handoff", "extract_fallback", "user_requests"]

_NO_TITLES: Mapping[str, str] = {}


def _wordset(text: str) -> frozenset[str]:
    return frozenset(text.split())


_MAX_ITEM = 160
_MAX_WHAT = 8
_MAX_FILES = 12
_MAX_KEYWORDS = 7
_EDIT_TOOLS = frozenset({"Write", "Edit", "MultiEdit", "NotebookEdit"})
_PATH_KEYS = ("file_path", "path", "notebook_path")

# Lines the CLI injects on the user's behalf (slash commands, their output, caveats, continuations).
_META_PREFIXES = (
    "<command-",
    "<local-command",
    "<bash-input>",
    "<bash-stdout>",
    "<bash-stderr>",
    "<user-prompt-submit-hook>",
    "caveat:",
    "[request interrupted",
    "this session is being continued from a previous conversation",
)
_REMINDER = re.compile(r"<system-reminder>.*?(?:</system-reminder>|\Z)", re.DOTALL)
_GREETING_WORDS = _wordset(
    "hi hello hey hiya yo thanks thank you thx ty ok okay cool great nice bye good morning evening there world "
    "test ping yes yep sure please continue go ahead done"
)
_CORRECTION = re.compile(
    r"^(?:no[,.!:;]|no\s+(?!problem)|nope\b|actually\b|don'?t\b|do not\b|instead\b|wrong\b|that'?s not\b|"
    r"not quite\b|stop\b|never\b)",
    re.IGNORECASE,
)
_POLITE = re.compile(
    r"^(?:(?:please|pls|ok(?:ay)?|so|now|hey|hi|hello)[,!.]?\s+|(?:can|could|would|will) you\s+(?:please\s+)?|"
    r"i (?:want|need|would like) (?:you )?to\s+|let'?s\s+|help me\s+)+",
    re.IGNORECASE,
)
# Up to its last character that belongs to it: "(see https://x.y/z)." keeps its ")."
_URL = re.compile(r"https?://[^\s<>\"'`)\]]*[^\s<>\"'`)\].,;:!?]")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]*(?:'[a-z]+)?(?:[.\-/][A-Za-z0-9_]+)*")
_PATHLIKE = re.compile(r"^(?:~|\.{1,2})?/?(?:[\w.@+-]+/)*[\w@+-]+\.[A-Za-z0-9]{1,8}$|^(?:~|\.{0,2})/[\w.@+/-]+$")
_SYSTEM_DIRS = ("/dev/", "/proc/", "/sys/", "/usr/", "/bin/", "/sbin/", "/lib", "/etc/")
# Folders that hold projects rather than being one.
_CONTAINERS = _wordset(
    "home users root tmp var opt mnt srv workspace workspaces work projects project code src repos repo dev "
    "git github gitlab documents desktop downloads sites private volumes data"
)
_SHORT_TERMS = _wordset("ai ml ui ux api cli mcp llm gpu tg db os ci cd io js ts go qa kb sql css")
_GENERIC_STEMS = _wordset("index main init __init__ readme test tests utils util setup package config mod lib")
_STOPWORDS = _wordset(
    """a about above after again against all also am an and any are aren't as at be because been before being below
    between both but by can can't cannot could couldn't did didn't do does doesn't doing don't down during each few for
    from further had hadn't has hasn't have haven't having he her here hers herself him himself his how i if in into is
    isn't it it's its itself just let let's like me more most much must my myself need no nor not now of off on once
    only or other ought our ours ourselves out over own same shall she should shouldn't so some such than that that's
    the their theirs them themselves then there there's these they this those through to too under until up upon us
    very was wasn't we were weren't what when where which while who whom why will with won't would wouldn't you your
    yours yourself yourselves i'll i'm i've you'll you're you've we'll we're we've it'll please thanks thank okay ok
    yes yeah sure want wants wanted make makes made use used using uses get gets got see look looks looking know think
    go going done do does run runs running ran add added adding new now one two first last next still even just really
    file files code function functions thing things way something anything everything work works working worked fix
    fixed fixing change changes changed update updated check checked try tried help show let's lets well good great
    right left back same each every many may might seem seems time also via able around without within again okay
    hello hi hey world test tests testing true false none null self return import from def class print string value
    values data type types line lines text number name names call calls called set sets list lists error errors
    issue issues problem problems question answer sorry wait"""
)


# -- identity fields ----------------------------------------------------------------------------------


def base_handoff(t: Transcript) -> Handoff:
    """A handoff with only the facts read off the transcript: id, date, duration, model, kind, parent, branch."""
    stamps = sorted(s for s in (_parse_ts(e.timestamp) for e in t.entries) if s is not None)
    start = stamps[0] if stamps else _parse_ts(t.started_at)
    end = stamps[-1] if stamps else _parse_ts(t.ended_at)
    minutes = round((end - start).total_seconds() / 60, 1) if start and end and end > start else 0.0
    models = [e.model for e in t.entries if e.model and not e.model.startswith("<")]
    return Handoff(
        session_id=t.session_id,
        date=start.isoformat() if start else t.started_at,
        headline="",
        duration_min=minutes,
        model=t.model or (models[-1] if models else ""),
        kind=t.kind,
        parent_id=t.parent_id,
        source="fallback",
        extra={"branch": t.git_branch} if t.git_branch else {},  # an optional key of the file (handoff_format)
    )


def _parse_ts(value: str) -> dt.datetime | None:
    if not value:
        return None
    try:
        parsed = parse_iso(value)
    except ValueError:
        return None
    return parsed.astimezone(dt.UTC).replace(microsecond=0)


# -- user requests ------------------------------------------------------------------------------------


def user_requests(t: Transcript) -> list[tuple[int, str]]:
    """(entry index, text) of what the owner typed, in order: no tool results, meta lines or summaries."""
    out: list[tuple[int, str]] = []
    for i, e in enumerate(t.entries):
        if e.role != "user" or e.is_meta or e.is_compact_summary:
            continue
        text = _REMINDER.sub("", "\n".join(b.text for b in e.blocks if b.kind is BlockKind.TEXT)).strip()
        if text and not text.lower().startswith(_META_PREFIXES):
            out.append((i, text))
    return out


def _is_greeting(text: str) -> bool:
    words = re.findall(r"[a-z']+", text.lower())
    return all(w in _GREETING_WORDS for w in words)


def _condense(text: str, limit: int = _MAX_ITEM) -> str:
    text = " ".join(_URL.sub("<url>", text).split())
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0]
    return cut.rstrip(",;:") + " …"


def _unclip(text: str) -> str:
    """A title clipped by the CLI ("... CSS class mat...") loses its fragment of a last word."""
    if text.endswith(("...", "…")):
        return text.rstrip(".…").rsplit(" ", 1)[0]
    return text


def _headline(t: Transcript, requests: list[str]) -> str:
    source = t.title.strip() or (requests[0] if requests else "") or (t.summaries[0] if t.summaries else "")
    if not source:
        return "Session without requests"
    first_line = _unclip(next((ln for ln in source.splitlines() if ln.strip()), source).strip())
    sentence = re.split(r"(?<=[.!?])\s", " ".join(_URL.sub("", first_line).split()), maxsplit=1)[0]
    sentence = _POLITE.sub("", sentence).strip(" \t`*_#>\"'")
    words = sentence.rstrip(".!?:;,").split()[:10]
    if not words:
        return "Session without requests"
    return " ".join([words[0][:1].upper() + words[0][1:], *words[1:]])


# -- files and projects -------------------------------------------------------------------------------


def _tool_uses(t: Transcript) -> Iterable[tuple[str, dict[str, Any]]]:
    for e in t.entries:
        for b in e.blocks:
            if b.kind is BlockKind.TOOL_USE:
                yield b.tool_name, b.tool_input


def _command_paths(command: str) -> list[str]:
    try:
        words = shlex.split(command, comments=True)
    except ValueError:
        words = command.split()
    return [w for w in words if not w.startswith("-") and "://" not in w and _PATHLIKE.match(w)]


def _touched(t: Transcript) -> tuple[list[str], set[str]]:
    """Paths from tool inputs in first-touch order, and the subset that was edited."""
    seen: dict[str, None] = {}
    edited: set[str] = set()
    for name, data in _tool_uses(t):
        found = [str(data[k]) for k in _PATH_KEYS if isinstance(data.get(k), str) and data[k]]
        if isinstance(data.get("command"), str):
            found.extend(_command_paths(data["command"]))
        for p in found:
            if p.startswith(_SYSTEM_DIRS) or p in {"/", ".", "..", t.cwd, t.cwd.rstrip("/")}:
                continue
            seen.setdefault(p, None)
            if name in _EDIT_TOOLS:
                edited.add(p)
    return list(seen), edited


def _relative(path: str, cwd: str) -> str:
    if cwd and path.startswith(cwd.rstrip("/") + "/"):
        return path[len(cwd.rstrip("/")) + 1 :]
    return path


def _projects(t: Transcript, paths: list[str]) -> list[str]:
    found: list[str] = []
    cwd = project_root(t.cwd).rstrip("/")  # a worktree's session works on its main folder's project
    if cwd:
        # Transcripts written on Windows carry backslash paths.
        found.append(PureWindowsPath(cwd).name if "\\" in cwd else PurePosixPath(cwd).name)
    roots: list[str] = []
    for p in paths:
        parts = PurePosixPath(p).parts
        if ".git" in parts[1:]:
            root = project_root(str(PurePosixPath(*parts[: parts.index(".git")])))
            roots.append(root)
            found.append(PurePosixPath(root).name)
    for p in paths:
        inside = [r for r in (cwd, *roots) if r and p.startswith(r + "/")]
        if inside or not p.startswith(("/", "~")):
            continue
        skip_user = False
        for part in PurePosixPath(p).parts[1:-1]:
            low = part.lower()
            if skip_user:
                skip_user = False
                continue
            if low in ("home", "users"):
                skip_user = True
                continue
            if part.startswith("."):
                break  # a dot folder holds tool state (~/.claude/...), not projects
            if low in _CONTAINERS:
                continue
            found.append(part)
            break
    out: dict[str, None] = {}
    for name in found:
        norm = normalize_keyword(name)
        if norm and norm not in _CONTAINERS:
            out.setdefault(norm, None)
    return list(out)[:4]


# -- keywords -----------------------------------------------------------------------------------------


def _terms(text: str) -> Iterable[tuple[str, bool]]:
    """(term, is_identifier) for each distinctive-looking token of ``text``."""
    # Redaction markers say a secret was here, nothing about the session: never a keyword.
    for raw in _WORD.findall(_URL.sub(" ", MARKER_RE.sub(" ", text)).replace("\u2019", "'")):
        raw = raw.strip("._-/")
        if "/" in raw:
            raw = raw.rsplit("/", 1)[-1]
        code_like = bool(re.search(r"[a-z][A-Z]|_|\w\.\w", raw))
        if code_like and "." in raw:
            raw = raw.split(".")[0] if raw.count(".") == 1 else raw  # file.py → file
        term = normalize_keyword(raw) if code_like or "-" in raw else raw.lower()
        if not term or term in _STOPWORDS or term in _GENERIC_STEMS or term.isdigit():
            continue
        if (len(term) < 3 and term not in _SHORT_TERMS) or len(term) > 40:
            continue
        yield term, code_like


def _keywords(
    t: Transcript, requests: list[str], files: list[str], projects: list[str], idf: Callable[[str], float] | None
) -> list[str]:
    tf: Counter[str] = Counter()
    code: set[str] = set()
    weighted: list[tuple[str, int]] = [(r, 3) for r in requests]
    weighted.extend(
        (b.text, 1) for e in t.entries if e.role == "assistant" for b in e.blocks if b.kind is BlockKind.TEXT
    )
    weighted.extend((PurePosixPath(f).name, 2) for f in files)
    for text, weight in weighted:
        for term, is_code in _terms(text):
            tf[term] += weight
            if is_code:
                code.add(term)
    ignore = set(projects)

    def score(term: str) -> float:
        rarity = idf(term) if idf is not None else 1.0
        return tf[term] * rarity * (1.5 if term in code else 1.0)

    ranked = sorted((term for term in tf if term not in ignore), key=lambda term: (-score(term), term))
    return ranked[:_MAX_KEYWORDS]


# -- the handoff --------------------------------------------------------------------------------------


def _last_todos(t: Transcript) -> list[str]:
    todos: list[Any] = []
    for name, data in _tool_uses(t):
        if name == "TodoWrite" and isinstance(data.get("todos"), list):
            todos = data["todos"]
    out: list[str] = []
    for item in todos:
        if isinstance(item, Mapping) and item.get("status") != "completed":
            content = str(item.get("content") or item.get("activeForm") or "").strip()
            if content:
                out.append(f"TODO: {_condense(content)}")
    return out


def _open_threads(t: Transcript, reqs: list[tuple[int, str]]) -> list[str]:
    threads: list[str] = []
    if reqs:
        last_i, last_text = reqs[-1]
        answered = any(
            e.role == "assistant" and any(b.kind in (BlockKind.TEXT, BlockKind.TOOL_USE) for b in e.blocks)
            for e in t.entries[last_i + 1 :]
        )
        if not answered and not _is_greeting(last_text):
            threads.append(f"Unanswered: {_condense(last_text)}")
    threads.extend(_last_todos(t))
    tail = _ending_error(t.entries)
    if tail:
        threads.append(f"Ended with an error: {_condense(tail)}")
    return threads


def _ending_error(entries: list[Entry]) -> str:
    """The error the session ended on, if its last tool result or system line was one."""
    for e in reversed(entries):
        if e.role == "system" and e.subtype == "api_error":
            return next((b.text for b in e.blocks if b.text), "API error")
        results = [b for b in e.blocks if b.kind is BlockKind.TOOL_RESULT]
        if results:
            last = results[-1]
            return (last.text.strip().splitlines() or ["tool error"])[0] if last.is_error else ""
        if any(b.kind is BlockKind.TEXT and b.text.strip() for b in e.blocks):
            return ""  # someone spoke after the last error: it is not where the session ended
    return ""


def _what_happened(t: Transcript, reqs: list[tuple[int, str]], titles: Mapping[str, str]) -> list[str]:
    events: list[str] = []
    req_at = dict(reqs)
    seen_agents: set[str] = set()
    for i, e in enumerate(t.entries):
        if i in req_at and not _is_greeting(req_at[i]):
            item = _condense(req_at[i])
            if not events or events[-1] != item:
                events.append(item)
        elif e.subagent_ref and e.subagent_ref not in seen_agents:
            seen_agents.add(e.subagent_ref)
            events.append(f"Subagent: {_condense(titles.get(e.subagent_ref) or e.subagent_ref)}")
    if len(events) > _MAX_WHAT:
        hidden = len(events) - (_MAX_WHAT - 1)
        events = [*events[: _MAX_WHAT - 3], f"(… {hidden} more …)", *events[-2:]]
    return events


def extract_fallback(
    t: Transcript,
    *,
    idf: Callable[[str], float] | None = None,
    subagent_titles: Mapping[str, str] = _NO_TITLES,
) -> Handoff:
    """Derive a handoff from the transcript alone. ``idf(term)`` scores rarity over the corpus (1.0 if None)."""
    h = base_handoff(t)
    reqs = user_requests(t)
    real = [text for _, text in reqs if not _is_greeting(text)]
    if not real and t.kind is SessionKind.SUBAGENT and t.title.strip():
        real = [_unclip(t.title.strip())]  # a subagent's task description is its request
    paths, edited = _touched(t)
    files = list(dict.fromkeys(_relative(p, t.cwd) for p in paths))
    tool_calls = sum(1 for _ in _tool_uses(t))
    h.headline = _headline(t, real)
    h.projects = _projects(t, paths)
    h.keywords = _keywords(t, real, files, h.projects, idf)
    if not real:
        h.substance = 0
    elif len(real) >= 3 or tool_calls >= 10 or len(edited) >= 3:
        h.substance = 2
    else:
        h.substance = 1
    h.what_happened = _what_happened(t, reqs, subagent_titles)
    h.insights = [f"Correction: {_condense(text)}" for text in real if _CORRECTION.match(text)]
    h.key_files = files[:_MAX_FILES]
    h.open_threads = _open_threads(t, reqs)
    if h.substance == 0 and not t.title.strip():
        h.headline = "No real work: " + (_condense(reqs[0][1], 40) if reqs else "empty session")
    return h

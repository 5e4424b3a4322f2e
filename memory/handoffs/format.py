"""``Handoff`` ↔ markdown with YAML frontmatter: the readable, hand-editable artifact of a session.

Output is deterministic (sorted keys, fixed section order) and round-trips exactly. Input is lenient:
files written by the public eywa-mcp project (``duration`` like ``"45m"``, ``## What Happened`` with
free text, ``None.`` placeholders) and hand-edited files (missing optional fields, odd spacing) load
with defaults. Unknown frontmatter keys and unknown body sections are kept in ``Handoff.extra`` and
written back.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from memory.errors import HandoffFormatError
from memory.handoffs import safe_yaml
from memory.handoffs.fields import (
    EMPTY_MARKERS,
    date_from_path,
    date_value,
    duration,
    list_field,
    shown,
    substance,
    text,
)
from memory.handoffs.yaml_subset import dump_subset
from memory.models import Handoff, SessionKind

if TYPE_CHECKING:
    from memory.redact.redactor import Redactor

__all__ = [
    "PREAMBLE_KEY",
    "SECTIONS_KEY",
    "from_markdown",
    "normalize_keyword",
    "normalized",
    "redacted",
    "to_markdown",
]

# Key in Handoff.extra holding body sections we do not model ({title: text}); written to the body, not YAML.
SECTIONS_KEY = "_sections"
# Key in Handoff.extra holding free text before the first section (a hand-written note under the title).
PREAMBLE_KEY = "_preamble"
_BODY_KEYS = frozenset({SECTIONS_KEY, PREAMBLE_KEY})

_SECTIONS: tuple[tuple[str, str], ...] = (
    ("what_happened", "What happened"),
    ("insights", "Insights"),
    ("key_files", "Key files"),
    ("open_threads", "Open threads"),
)

# Section titles of other writers (eywa-mcp, hand edits), compared after _slug().
_SECTION_SYNONYMS: dict[str, str] = {
    "what-happened": "what_happened",
    "summary": "what_happened",
    "progress": "what_happened",
    "insights": "insights",
    "decisions": "insights",
    "learnings": "insights",
    "corrections": "insights",
    "decisions-and-insights": "insights",
    "key-files": "key_files",
    "files": "key_files",
    "files-touched": "key_files",
    "open-threads": "open_threads",
    "open-loops": "open_threads",
    "next-steps": "open_threads",
    "todo": "open_threads",
    "todos": "open_threads",
}

_KEY_SYNONYMS: dict[str, str] = {
    "id": "session_id",
    "session": "session_id",
    "duration_minutes": "duration_min",
    "duration": "duration_min",
    "title": "headline",
    "project": "projects",
    "tags": "keywords",
    "decisions": "insights",
    "open_loops": "open_threads",
    "files": "key_files",
}

_KNOWN_KEYS = frozenset(
    {"session_id", "date", "duration_min", "model", "headline", "projects", "keywords", "substance", "kind"}
    | {"parent_id", "source", "what_happened", "insights", "key_files", "open_threads"}
)


_FRONTMATTER = re.compile(r"\A\ufeff?\s*---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", re.DOTALL)
_BULLET = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+(.*)$")


def normalize_keyword(s: str) -> str:
    """``"parseClaudeFile"`` → ``"parse-claude-file"``, ``"BM25 Search"`` → ``"bm25-search"``.

    Lowercase, camelCase split, every run of other characters one hyphen; idempotent.
    """
    s = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "-", s.strip())
    return re.sub(r"[^a-z0-9]+", "-", s.lower()).strip("-")


# -- writing ------------------------------------------------------------------------------------------


def to_markdown(h: Handoff) -> str:
    """The handoff as markdown: YAML frontmatter, ``# headline``, then one bullet list per section."""
    return _render(h)[0]


def _render(h: Handoff) -> tuple[str, dict[str, Any] | None]:
    """(the markdown, the frontmatter mapping its YAML was written from when the YAML reads back as exactly
    that mapping, else None). The subset writer's output always does; PyYAML's can fold a line separator
    (``\x85``, ``\u2028``) in a quoted string into a space."""
    front: dict[str, Any] = {k: v for k, v in h.extra.items() if k not in _BODY_KEYS}
    front.update(
        session_id=h.session_id,
        date=h.date,
        duration_min=h.duration_min,
        model=h.model,
        headline=h.headline,
        projects=list(h.projects),
        keywords=list(h.keywords),
        substance=h.substance,
        kind=h.kind.value,
        parent_id=h.parent_id,
        source=h.source,
    )
    simple = dump_subset(front)
    parts = [f"---\n{safe_yaml.dump(front) if simple is None else simple}---\n", f"# {_one_line(h.headline)}\n"]
    preamble = str(h.extra.get(PREAMBLE_KEY) or "").strip()
    if preamble:
        parts.append(f"{preamble}\n")
    for attr, title in _SECTIONS:
        items: list[str] = getattr(h, attr)
        if items:
            parts.append(f"## {title}\n\n" + "".join(_bullet(i) for i in items))
    extra_sections = h.extra.get(SECTIONS_KEY)
    if isinstance(extra_sections, Mapping):
        for title, text in extra_sections.items():
            parts.append(f"## {_one_line(str(title))}\n\n{str(text).strip()}\n")
    return "\n".join(parts), (front if simple is not None else None)


def normalized(h: Handoff, redactor: Redactor, *, path: Path | None = None) -> tuple[Handoff, str]:
    """``h`` as its file will say it, and that file: fields redacted, written, the text redacted, read back.

    Reading back is what an import stores (the stored fields and the index see only what the file says).
    When redacting the whole text changed nothing, the frontmatter read back is the mapping just written
    (YAML gives back exactly the plain data it was given), so only the body is parsed again, and not even
    that when :func:`_plain_body` can tell what it reads. Fields that one pass finds nothing to redact in
    (:meth:`Redactor.unchanged`, most handoffs) are not redacted one by one.
    """
    lists = (h.projects, h.keywords, h.what_happened, h.insights, h.key_files, h.open_threads)
    if redactor.unchanged([h.headline, h.model, *(item for items in lists for item in items)]):
        written = replace(h, extra=redactor.redact_obj(dict(h.extra))) if h.extra else h
    else:
        written = redacted(h, redactor.redact_obj)
    draft, front = _render(written)
    markdown = redactor(draft)
    m = _FRONTMATTER.match(markdown)
    if front is None or markdown != draft or m is None or "\x00" in markdown:
        return from_markdown(markdown, path=path), markdown
    loaded = {k: front[k] for k in sorted(front)}  # the order yaml.dump wrote them in
    body = markdown[m.end() :]
    return _from_parts(loaded, body, path=path, default_date=None, parsed=_plain_body(written)), markdown


def redacted(h: Handoff, redact: Callable[[Any], Any]) -> Handoff:
    """The handoff with every field of free text redacted (``redact`` walks strings, lists and dicts).

    Redact fields before :func:`to_markdown`, not only its output: YAML then quotes a value that became a
    ``[REDACTED:…]`` marker, which unquoted would read back as a list. Ids, dates and kinds are kept.
    """
    return replace(
        h,
        headline=redact(h.headline),
        model=redact(h.model),
        projects=redact(list(h.projects)),
        keywords=redact(list(h.keywords)),
        what_happened=redact(list(h.what_happened)),
        insights=redact(list(h.insights)),
        key_files=redact(list(h.key_files)),
        open_threads=redact(list(h.open_threads)),
        extra=redact(dict(h.extra)),
    )


def _one_line(s: str) -> str:
    return " ".join(s.split())


def _bullet(item: str) -> str:
    lines = item.strip().splitlines() or [""]
    return f"- {lines[0]}\n" + "".join(f"  {line}\n" if line.strip() else "\n" for line in lines[1:])


# -- reading ------------------------------------------------------------------------------------------


def from_markdown(text: str, *, path: Path | None = None, default_date: str | None = None) -> Handoff:
    """Parse a handoff file (ours, eywa-mcp's, or hand-edited); raise ``HandoffFormatError`` on junk.

    A missing ``session_id`` falls back to the file stem; a missing ``date`` to ``default_date``, then to the
    ``YYYY/MM/DD`` folders of ``path``.
    """
    if "\x00" in text:
        raise HandoffFormatError(path, "binary content")
    m = _FRONTMATTER.match(text)
    if m is None:
        raise HandoffFormatError(path, "no YAML frontmatter (a file must start with '---')")
    try:
        loaded = safe_yaml.load(m.group(1))  # plain data only: no aliases, tags or deep nesting
    except safe_yaml.StrictYamlError as exc:
        raise HandoffFormatError(path, f"refused YAML frontmatter: {exc}") from exc
    except yaml.YAMLError as exc:
        raise HandoffFormatError(path, f"invalid YAML frontmatter: {exc}") from exc
    if loaded is None:
        loaded = {}
    if not isinstance(loaded, dict):
        raise HandoffFormatError(path, "frontmatter is not a mapping")
    return _from_parts(loaded, text[m.end() :], path=path, default_date=default_date)


_Body = tuple[str, str, dict[str, list[str]], dict[str, str]]  # title, preamble, sections, unknown sections


def _from_parts(
    loaded: dict[Any, Any], body: str, *, path: Path | None, default_date: str | None, parsed: _Body | None = None
) -> Handoff:
    """The handoff of a frontmatter mapping and a body; ``parsed``: what :func:`_parse_body` reads in
    ``body``, when the caller knows it (:func:`_plain_body`)."""
    front, extra = _canonical_keys(loaded)
    title, preamble, sections, unknown_sections = _parse_body(body) if parsed is None else parsed

    session_id = text(front.get("session_id")) or (path.stem if path else "")
    if not session_id:
        raise HandoffFormatError(path, "no session_id and no file name to take it from")
    headline = text(front.get("headline")) or title
    if not headline:
        raise HandoffFormatError(path, "no headline (neither frontmatter 'headline' nor a '# ' title)")
    date = date_value(front.get("date")) or default_date or date_from_path(path)
    if not date and "date" not in front:
        # An explicit empty date is a session without timestamps (ours write that); a missing one is junk.
        raise HandoffFormatError(path, "no date")

    lists: dict[str, list[str]] = {}
    for attr, _ in _SECTIONS:
        lists[attr] = sections.get(attr) or _section_field(front.get(attr))
    if unknown_sections:
        extra[SECTIONS_KEY] = unknown_sections
    if preamble:
        extra[PREAMBLE_KEY] = preamble
    try:
        kind = SessionKind(text(front.get("kind")) or SessionKind.MAIN.value)
    except ValueError as exc:
        raise HandoffFormatError(path, f"unknown kind {shown(front.get('kind'))}") from exc
    return Handoff(
        session_id=session_id,
        date=date,
        headline=headline,
        duration_min=duration(front.get("duration_min"), path),
        model=text(front.get("model")),
        projects=list_field(front.get("projects")),
        keywords=list_field(front.get("keywords")),
        substance=substance(front.get("substance"), path),
        what_happened=lists["what_happened"],
        insights=lists["insights"],
        key_files=lists["key_files"],
        open_threads=lists["open_threads"],
        kind=kind,
        parent_id=text(front.get("parent_id")),
        source=text(front.get("source")) or "import",
        extra=extra,
    )


def _canonical_keys(loaded: Mapping[Any, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Split frontmatter into known fields (synonyms mapped, our own names winning) and extra keys."""
    front: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for raw_key, value in loaded.items():
        key = str(raw_key)
        if key in _KNOWN_KEYS:
            front[key] = value
    for raw_key, value in loaded.items():
        key = str(raw_key)
        if key in _KNOWN_KEYS:
            continue
        canonical = _KEY_SYNONYMS.get(key.strip().lower().replace("-", "_").replace(" ", "_"))
        if canonical is not None and canonical not in front:
            front[canonical] = value
        else:
            extra[key] = value
    return front, extra


def _plain_body(h: Handoff) -> _Body | None:
    """What :func:`_parse_body` reads in the body :func:`_render` writes for ``h``, worked out without
    reading it, when that is certain: a title, no free text or other sections, and every item one line
    that reads back as itself. None otherwise (the body is read). An import renders and reads back every
    handoff; reading the body again took a twentieth of its reading worker's CPU."""
    title = _one_line(h.headline)
    if not title or PREAMBLE_KEY in h.extra or SECTIONS_KEY in h.extra:
        return None
    sections: dict[str, list[str]] = {}
    for attr, _ in _SECTIONS:
        items: list[str] = getattr(h, attr)
        for item in items:
            if not (isinstance(item, str) and _plain_item(item)):
                return None
        if items:
            sections[attr] = list(items)
    return title, "", sections, {}


def _plain_item(item: str) -> bool:
    """Whether ``- item`` is one bullet line that :func:`_section_items` reads back as ``item``."""
    if not item or item.splitlines() != [item] or item.lower() in EMPTY_MARKERS:
        return False
    m = _BULLET.match(f"- {item}")
    return m is not None and m.group(1).strip() == item


def _parse_body(body: str) -> _Body:
    """(title, free text before the first section, known sections, unknown sections)."""
    title = ""
    sections: dict[str, list[str]] = {}
    unknown: dict[str, str] = {}
    current: str | None = None
    buffer: list[str] = []
    before: list[str] = []  # lines before the first section, the title aside

    def flush() -> None:
        if current is None:
            return
        attr = _SECTION_SYNONYMS.get(_slug(current))
        if attr is not None:
            sections.setdefault(attr, []).extend(_section_items("\n".join(buffer)))
        elif "\n".join(buffer).strip():
            unknown[current] = "\n".join(buffer).strip()

    for line in body.splitlines():
        stripped = line.strip()
        if stripped.startswith("# ") and not title and current is None:
            title = _one_line(stripped[2:])
        elif stripped.startswith("## "):
            flush()
            current, buffer = _one_line(stripped[3:]), []
        elif current is not None:
            buffer.append(line.rstrip())
        else:
            before.append(line.rstrip())
    flush()
    return title, "\n".join(before).strip(), sections, unknown


def _slug(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


def _section_field(value: Any) -> list[str]:
    """A section-like field given in frontmatter: a YAML list, or text in the body's bullet form."""
    if isinstance(value, list | tuple):
        return list_field(value)
    return _section_items(text(value))


def _section_items(text: str) -> list[str]:
    """Items of a section: bullets (indented lines continue one), else paragraphs (eywa-mcp's free text)."""
    items: list[list[str]] = []
    mode = ""  # "bullet" | "para" | ""
    blanks = 0
    for line in text.splitlines():
        if not line.strip():
            if mode == "para":
                mode = ""
            blanks += 1
            continue
        indented = line.startswith((" ", "\t"))
        bullet = _BULLET.match(line)
        if mode == "bullet" and indented:
            items[-1].extend([""] * blanks)
            items[-1].append((line[2:] if line.startswith("  ") else line.strip()).rstrip())
        elif bullet:
            items.append([bullet.group(1).strip()])
            mode = "bullet"
        elif mode == "para":
            items[-1].append(line.strip())
        else:
            items.append([line.strip()])
            mode = "para"
        blanks = 0
    joined = ("\n".join(lines).strip() for lines in items)
    return [j for j in joined if j and j.lower() not in EMPTY_MARKERS]

"""Which transcript files to read for the given paths (or the default folders), what kind each one is, and
its parse (parse_source).

Kinds: ``claude`` (a main Claude Code session), ``claude-subagent`` (``…/<parent>/subagents/*.jsonl``
or a flat ``agent-*.jsonl``), ``codex`` (``rollout-*.jsonl``) and ``loglines`` (a ``.json`` export
whose top level has a ``loglines`` key). Folders are walked recursively; symlinked folders are
followed once each, so a link back up the tree cannot loop. A file named explicitly is taken
whatever its folder; a missing path is reported, never raised.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from memory.models import Transcript
from memory.sources.claude import parse_claude_file
from memory.sources.codex import parse_codex_file

__all__ = ["DiscoveryResult", "SourceFile", "SourceKind", "classify", "discover", "parse_source"]

SourceKind = Literal["claude", "claude-subagent", "codex", "loglines"]
_PEEK_BYTES = 4096


@dataclass(frozen=True, slots=True)
class SourceFile:
    path: Path
    kind: SourceKind
    parent_hint: str = ""  # for subagents: the parent session named by the folder layout
    agent_hint: str = ""  # for subagents: the agent id named by the file name


@dataclass(slots=True)
class DiscoveryResult:
    files: list[SourceFile] = field(default_factory=list)  # sorted by path
    missing: list[Path] = field(default_factory=list)
    unreadable: list[tuple[Path, str]] = field(default_factory=list)


def _is_loglines(path: Path) -> bool:
    """Cheap check on the head of the file: a JSON object with a ``loglines`` key near its start."""
    try:
        with path.open("rb") as fh:
            head = fh.read(_PEEK_BYTES)
    except OSError:
        return False
    head = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    return head.startswith(b"{") and b'"loglines"' in head


def classify(path: Path) -> SourceFile | None:
    """The kind of one file by its name and place, or None when it is not a transcript."""
    name = path.name
    if name.endswith(".meta.json"):
        return None
    if name.endswith(".jsonl"):
        if name.startswith("rollout-"):
            return SourceFile(path, "codex")
        if path.parent.name == "subagents":
            return SourceFile(path, "claude-subagent", path.parent.parent.name, path.stem.removeprefix("agent-"))
        if name.startswith("agent-"):
            return SourceFile(path, "claude-subagent", "", path.stem.removeprefix("agent-"))
        return SourceFile(path, "claude")
    if name.endswith(".json") and _is_loglines(path):
        return SourceFile(path, "loglines")
    return None


def _walk(root: Path, result: DiscoveryResult, seen_dirs: set[tuple[int, int]]) -> Iterator[Path]:
    try:
        st = root.stat()
    except OSError as exc:
        result.unreadable.append((root, exc.strerror or str(exc)))
        return
    key = (st.st_dev, st.st_ino)
    if key in seen_dirs:
        return  # reached again through a symlink: already walked
    seen_dirs.add(key)
    try:
        with os.scandir(root) as it:
            children = sorted(it, key=lambda d: d.name)
    except OSError as exc:
        result.unreadable.append((root, exc.strerror or str(exc)))
        return
    for child in children:
        path = Path(child.path)
        try:
            is_dir = child.is_dir(follow_symlinks=True)
            is_file = not is_dir and child.is_file(follow_symlinks=True)
        except OSError:
            continue  # a dangling or unreadable link: nothing to read there
        if is_dir:
            yield from _walk(path, result, seen_dirs)
        elif is_file:
            yield path


def discover(paths: Sequence[Path], *, claude_projects_dir: Path, codex_sessions_dir: Path) -> DiscoveryResult:
    """Files to ingest under `paths` (files or folders); no paths = the Claude Code and Codex folders.

    The default folders may be absent (Codex never installed): that is not reported as missing.
    """
    result = DiscoveryResult()
    explicit = bool(paths)
    # Absolute: a session's stored source path must lead to its file from any working directory.
    roots = [p.absolute() for p in paths] if explicit else [claude_projects_dir, codex_sessions_dir]
    found: dict[Path, SourceFile] = {}
    seen_dirs: set[tuple[int, int]] = set()
    for root in roots:
        if not root.exists():
            if explicit:
                result.missing.append(root)
            continue
        if root.is_dir():
            for path in _walk(root, result, seen_dirs):
                src = classify(path)
                if src is not None:
                    found.setdefault(_identity(path), src)
            continue
        try:
            with root.open("rb"):
                pass
        except OSError as exc:
            result.unreadable.append((root, exc.strerror or str(exc)))
            continue
        src = classify(root)
        if src is None and root.suffix == ".json":
            result.unreadable.append((root, "not a transcript (no loglines key)"))
            continue
        found.setdefault(_identity(root), src or SourceFile(root, "claude"))
    result.files = sorted(found.values(), key=lambda s: s.path)
    return result


def _identity(path: Path) -> Path:
    # The same file reached twice (an explicit path inside a listed folder, or via a link) is read once.
    try:
        return path.resolve()
    except OSError:
        return path


def parse_source(
    src: SourceFile,
    redact: Callable[[str], str],
    limit: int,
    on_bytes: Callable[[int], None] | None = None,
) -> list[Transcript]:
    """The transcripts of one discovered file, redacted, tool output clipped to ``limit`` characters."""
    if src.kind == "codex":
        return [parse_codex_file(src.path, redact=redact, tool_output_limit=limit, on_bytes=on_bytes)]
    return parse_claude_file(
        src.path,
        redact=redact,
        tool_output_limit=limit,
        parent_hint=src.parent_hint,
        agent_hint=src.agent_hint,
        on_bytes=on_bytes,
    )

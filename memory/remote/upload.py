"""Which transcript files a memory-service client sends, under which names, and what it remembers it sent.

A file's upload name is stable (``claude/<project folder>/<session>.jsonl``, ``codex/YYYY/MM/DD/rollout-…``,
``files/<hash of its path>/…`` for one elsewhere), so the service reads a grown file as the same file. A
file of a private project (memory.redact.privacy, by the ``cwd`` its lines carry) is never sent. ``sent.json``
in the outbox records each name's source size and mtime at its last good send: an unchanged file is not
redacted and sent again by every ``memory ingest``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memory.redact.privacy import Privacy
from memory.settings import MemorySettings
from memory.sources.discover import SourceFile
from memory.storage.files import write_atomic

__all__ = ["SentIndex", "Stamp", "transcript_cwd", "upload_name"]

_CWD_LINES = 200  # a transcript's first lines name its folder; a file that does not is not judged private


def upload_name(src: SourceFile, settings: MemorySettings) -> str:
    """The name the service keeps this file under: the same file always gets the same name."""
    path = src.path.absolute()
    for root, prefix in ((settings.claude_projects_dir, "claude"), (settings.codex_sessions_dir, "codex")):
        with contextlib.suppress(ValueError):
            return f"{prefix}/{path.relative_to(root.absolute()).as_posix()}"
    # Elsewhere: the parts memory reads (a subagent's parent folder), under a hash of the whole path.
    digest = hashlib.sha256(str(path).encode("utf-8", "surrogateescape")).hexdigest()[:16]
    keep = 3 if src.kind == "claude-subagent" and path.parent.name == "subagents" else 1
    tail = "/".join(path.parts[-keep:])
    return f"files/{digest}/{tail}"


def _cwd_of(value: Any) -> str:
    if not isinstance(value, dict):
        return ""
    cwd = value.get("cwd")
    if isinstance(cwd, str) and cwd:
        return cwd
    payload = value.get("payload")  # a Codex rollout's session_meta
    return _cwd_of(payload) if isinstance(payload, dict) else ""


def transcript_cwd(path: Path) -> str:
    """The working folder the transcript's first lines name ("" when none does, or it cannot be read)."""
    try:
        with path.open("rb") as fh:
            if path.name.endswith(".json"):  # a loglines export: its entries carry cwd
                return ""
            for n, raw in enumerate(fh):
                if n >= _CWD_LINES:
                    break
                if b'"cwd"' not in raw:
                    continue
                with contextlib.suppress(ValueError, RecursionError):
                    if cwd := _cwd_of(json.loads(raw)):
                        return cwd
    except OSError:
        return ""
    return ""


def is_private(path: Path, privacy: Privacy) -> bool:
    return bool(privacy) and privacy.covers(transcript_cwd(path))


@dataclass(frozen=True, slots=True)
class Stamp:
    size: int
    mtime_ns: int

    @classmethod
    def of(cls, path: Path) -> Stamp:
        st = path.stat()
        return cls(st.st_size, st.st_mtime_ns)


class SentIndex:
    """``outbox/sent.json``: upload name → the source's (size, mtime_ns) when it was last sent whole."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / "sent.json"

    def load(self) -> dict[str, Stamp]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            return {str(k): Stamp(int(v[0]), int(v[1])) for k, v in data.items()}
        except (OSError, ValueError, TypeError, KeyError, IndexError, AttributeError):
            return {}  # lost or damaged: files are sent again, which the service takes as a no-op

    def record(self, sent: dict[str, Stamp]) -> None:
        if not sent:
            return
        merged = self.load() | sent
        write_atomic(self.path, json.dumps({k: [v.size, v.mtime_ns] for k, v in sorted(merged.items())}) + "\n")

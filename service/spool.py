"""Where an uploaded file lives in its tenant's spool: a name the client chose, made safe.

The same name always maps to the same file (so a grown transcript is read again incrementally, and an
unchanged one not at all), two names never share one (a hash of the whole name is in the path), and no
name can reach outside the spool. What the memory reads from a path is kept: the file name's kind
(``rollout-*.jsonl`` is Codex, ``agent-*.jsonl`` a subagent, ``.json`` a loglines export) and, for
``…/<parent>/subagents/agent-<id>.jsonl``, the parent session the folder names.

A name may hold a secret (a token pasted into a path): the parts kept in the path are taken from the name
redacted, so neither the spool, the database's source paths nor a log line naming the file holds it. The
hash is of the name as given (two names never share a file); 96 bits of SHA-256 do not give a secret back.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from pathlib import Path

from service.errors import BadRequest

__all__ = ["MAX_NAME", "name_parts", "safe_part", "spool_path"]

MAX_NAME = 1024
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_SEPARATOR = re.compile(r"[\\/]+")
_KINDS = (".jsonl", ".json")  # the extensions the memory reads a file's kind from


def safe_part(part: str, fallback: str = "upload") -> str:
    """One path part made a safe file name: [A-Za-z0-9._-], no leading dot, at most 120 characters."""
    cleaned = _UNSAFE.sub("_", part).lstrip(".")[:120]
    return cleaned or fallback


def name_parts(name: str) -> list[str]:
    """The parts of a client's file name (either slash), without empty, `.` and `..` parts; BadRequest when
    it is too long, holds a NUL or names no file."""
    if not name or len(name) > MAX_NAME:
        raise BadRequest(f"give the file's name as ?name= (1-{MAX_NAME} characters)")
    if "\x00" in name:
        raise BadRequest("the file name holds a NUL character")
    parts = _split(name)
    if not parts:
        raise BadRequest("the file name has no file in it")
    return parts


def _split(name: str) -> list[str]:
    return [p for p in _SEPARATOR.split(name) if p not in ("", ".", "..")]


def _as_is(text: str) -> str:
    return text


def spool_path(spool: Path, name: str, redact: Callable[[str], str] = _as_is) -> Path:
    """The spooled file of the client's ``name``; ``redact`` (the tenant's redactor) cleans the parts kept."""
    parts = name_parts(name)
    shown = redact(name)
    if shown != name:
        kind = next((ext for ext in _KINDS if parts[-1].endswith(ext)), "")
        parts = _split(shown) or ["upload"]
        if not parts[-1].endswith(kind):  # "password=x.jsonl": the value taken with its extension
            parts[-1] += kind
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:24]
    folder = spool / "transcripts" / digest
    base = safe_part(parts[-1])
    if len(parts) >= 3 and parts[-2] == "subagents":
        return folder / safe_part(parts[-3], "parent") / "subagents" / base
    return folder / base

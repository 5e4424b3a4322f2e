"""A copy's facts event files (``facts/events/<origin>.jsonl``) beside the rows in ``macupos.facts_events``.

Other origins' lines come down from the database and are appended to their files; this copy's own file is
the one the facts engine appends to, and the database has it up to an offset: what lies past it is sent with
the write that made it, or cut away when that write was not committed.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

__all__ = ["EventLine", "append_lines", "cut_back", "file_size", "lines_since"]

EventLine = tuple[str, int, str, str]  # (id, at_ms, origin, the line)


def append_lines(folder: Path, lines: dict[str, list[str]]) -> None:
    """Append each origin's lines to its file, flushed to disk."""
    folder.mkdir(parents=True, exist_ok=True)
    for origin, found in lines.items():
        with (folder / f"{origin}.jsonl").open("a", encoding="utf-8") as fh:
            fh.write("".join(line + "\n" for line in found))
            fh.flush()
            os.fsync(fh.fileno())


def file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def cut_back(path: Path, offset: int) -> None:
    """Cut a file back to ``offset`` bytes (nothing to do when it is no longer)."""
    if path.exists() and path.stat().st_size > offset:
        with path.open("rb+") as fh:
            fh.truncate(offset)
            os.fsync(fh.fileno())


def lines_since(path: Path, offset: int, applied: set[str]) -> tuple[list[EventLine], int]:
    """Whole lines of ``path`` past ``offset`` whose event ids are in ``applied``, and the offset after them."""
    try:
        with path.open("rb") as fh:
            fh.seek(offset)
            data = fh.read()
    except FileNotFoundError:
        return [], offset
    whole = data[: data.rfind(b"\n") + 1]
    out = []
    for raw in whole.split(b"\n"):
        try:
            event = json.loads(raw)
        except ValueError:
            continue
        if isinstance(event, dict) and event.get("id") in applied:
            out.append((str(event["id"]), int(event["at_ms"]), str(event["origin"]), raw.decode("utf-8")))
    return out, offset + len(whole)

"""What crosses the wire for `RemoteEywa` (memory.remote.client): a transcript file checked before it is sent,
an ingest answer counted into the report, an export archive unpacked under a folder."""

from __future__ import annotations

import gzip
import stat
import tarfile
from pathlib import Path, PurePosixPath
from typing import Any

from memory.errors import DestinationError, SourceUnreadableError
from memory.ingest import IngestReport
from memory.models import LineProblem
from memory.remote.http import RemoteMemoryError
from memory.remote.outbox import Entry
from memory.storage.files import write_atomic
from memory.storage.mirror import sync_folders

__all__ = ["check_file", "count", "size", "unpack_handoffs"]

EXPORT_MAX_FILE = 1024 * 1024  # a handoff in an export is at most what an upload may be


def size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:  # gone since it was found: reported when it is read
        return 0


def check_file(path: Path) -> None:
    """SourceUnreadableError unless ``path`` is a regular file (as the local ``extract`` checks)."""
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        raise SourceUnreadableError(path, exc.strerror or str(exc)) from exc
    if not stat.S_ISREG(mode):
        raise SourceUnreadableError(
            path, "a folder, not a transcript file" if stat.S_ISDIR(mode) else "not a regular file"
        )


def count(report: IngestReport, entry: Entry, answer: dict[str, Any]) -> None:
    counts = answer.get("counts", {})
    report.sessions_new += int(counts.get("new", 0))
    report.sessions_updated += int(counts.get("updated", 0))
    report.sessions_unchanged += int(counts.get("unchanged", 0))
    report.handoffs_extracted += int(answer.get("handoffs_extracted", 0))
    report.bytes_read += int(answer.get("bytes", 0))
    report.session_ids += [str(s) for s in answer.get("sessions", [])]
    for reason, n in answer.get("lines_skipped", {}).items():
        report.lines_skipped[str(reason)] += int(n)
    for p in answer.get("first_problems", [])[:20]:
        report.problems.append(LineProblem(entry.source, int(p.get("line", 0)), str(p.get("reason", ""))))


def unpack_handoffs(fh: Any, root: Path) -> int:
    """The ``handoffs/`` members of an export archive, written under ``root``; a member that is not a
    regular file, climbs out, or is too big is skipped."""
    n = 0
    folders: set[Path] = set()
    try:
        with tarfile.open(fileobj=fh, mode="r:gz") as archive:
            for member in archive:
                rel = PurePosixPath(member.name)
                parts = rel.parts[1:]
                if not member.isreg() or rel.parts[:1] != ("handoffs",) or member.size > EXPORT_MAX_FILE:
                    continue
                if not parts or rel.suffix != ".md" or any(p in (".", "..") or p.startswith(".") for p in parts):
                    continue
                src = archive.extractfile(member)
                if src is None:
                    continue
                path = root.joinpath(*parts)
                try:
                    write_atomic(path, src.read().decode("utf-8", "replace"), sync=False)
                except OSError as exc:
                    raise DestinationError(path, exc.strerror or str(exc)) from exc
                folders.add(path.parent)
                n += 1
    except (tarfile.TarError, EOFError, gzip.BadGzipFile) as exc:
        raise RemoteMemoryError(f"memory service: the export is not a readable gzip tar archive ({exc})") from exc
    if n:
        sync_folders(root, folders)
    return n

"""Reading a tree of handoff files without being led outside it or made to read without bound.

The tree is walked without following symbolic links: a link named ``*.md`` and a link to a folder are reported,
never read (a link could lead anywhere: ``~/.ssh``, ``/dev/zero``, back up the tree). Hidden names (temp files,
``.git``) are passed over. Each file is opened with ``O_NOFOLLOW`` and must be a regular file of at most
:data:`MAX_HANDOFF_BYTES` and UTF-8. Used by ``memory import`` (memory.handoffs.adopt) and by the remote
client, which sends what it reads.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from memory.errors import SourceUnreadableError

__all__ = ["MAX_HANDOFF_BYTES", "read_handoff_file", "walk_tree"]

# eywa-mcp's handoffs are 1-3 KB and a long hand-written one is tens of KB; a megabyte is no handoff,
# and the cap bounds what one file can cost (its text, parse and index stay a few MB of memory).
MAX_HANDOFF_BYTES = 1024 * 1024
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


def walk_tree(root: Path) -> Iterator[tuple[Path, str | None]]:
    """``(path, None)`` for each ``*.md`` file to read under ``root``, ``(path, why)`` for each one (or
    link, or unreadable folder) to report instead; in sorted path order, as ``sorted(root.rglob("*.md"))``."""
    stack: list[Iterator[os.DirEntry[str]]] = []

    def listing(folder: Path) -> str | None:
        try:
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            return f"cannot list the folder: {exc.strerror or exc}"
        stack.append(iter(entries))
        return None

    if (why := listing(root)) is not None:
        yield root, why
    while stack:
        entry = next(stack[-1], None)
        if entry is None:
            stack.pop()
            continue
        if entry.name.startswith("."):
            continue  # temp files of an atomic writer, .git and the like
        path = Path(entry.path)
        try:
            if entry.is_symlink():
                if entry.name.endswith(".md"):
                    yield path, "a symbolic link: not followed (import reads only files inside the folder given)"
                elif entry.is_dir():
                    yield path, "a symbolic link to a folder: not followed (import stays inside the folder given)"
            elif entry.is_dir(follow_symlinks=False):
                if (why := listing(path)) is not None:
                    yield path, why
            elif entry.name.endswith(".md"):
                yield path, None if entry.is_file(follow_symlinks=False) else "not a regular file"
        except OSError as exc:
            yield path, exc.strerror or str(exc)


def read_handoff_file(path: Path, limit: int = MAX_HANDOFF_BYTES) -> str:
    """The text of a handoff file (newlines made ``\\n``, as ``read_text`` does); ``SourceUnreadableError``
    when it is a link, not a regular file, over ``limit`` bytes, or not UTF-8."""
    try:
        fd = os.open(path, _OPEN_FLAGS)  # O_NOFOLLOW: a file swapped for a link since the walk is refused too
    except OSError as exc:
        why = "a symbolic link: not followed" if exc.errno == errno.ELOOP else exc.strerror or str(exc)
        raise SourceUnreadableError(path, why) from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):  # O_NONBLOCK: a FIFO is refused here instead of waited on
            raise SourceUnreadableError(path, "not a regular file")
        data = _read_upto(fd, info.st_size, limit + 1) if info.st_size <= limit else b""
    finally:
        os.close(fd)
    if info.st_size > limit or len(data) > limit:
        size = max(info.st_size, len(data))
        raise SourceUnreadableError(path, f"{size:,} bytes: over the {limit:,}-byte limit of a handoff file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SourceUnreadableError(path, f"not UTF-8 text (byte {exc.start})") from exc
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _read_upto(fd: int, size: int, most: int) -> bytes:
    """Up to ``most`` bytes of ``fd`` to its end: first the ``size`` its stat gave (and one more, so a file
    that grew since is seen), then small reads. One read of ``most`` allocated a megabyte a file."""
    chunks: list[bytes] = []
    total = 0
    want = size + 1
    while total < most and (chunk := os.read(fd, min(want, most - total))):
        chunks.append(chunk)
        total += len(chunk)
        want = 1 << 16
    return b"".join(chunks)

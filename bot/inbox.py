"""The project's inbox, ``<project>/.macupos/inbox/``: where files sent in the chat are saved, and nowhere else.

A sent file name is the sender's text, so it is made into one plain name first (:func:`safe_name`): NFKC
folds look-alikes (a fullwidth ``．`` becomes ``.``), and only letters, digits, spaces and ``._-+()[]@,=#``
are kept — every separator, control, format or symbol character becomes ``_`` — with no leading dot or
dash, no trailing dot or space, no Windows device name, and at most :data:`MAX_NAME_BYTES` bytes.

Writing does not trust the tree either (:func:`save`): each folder is opened relative to its parent with
``O_NOFOLLOW``, so a planted symbolic link at ``.macupos`` or ``inbox`` is refused rather than followed, and
the file is created with ``O_CREAT | O_EXCL | O_NOFOLLOW``: an existing name (a file, or a link placed there)
is never opened; the next free name (``name-2.ext`` …) is taken instead. ``.macupos/.gitignore`` keeps the
inbox out of the project's commits.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import unicodedata
from pathlib import Path

from bot.errors import InboxError
from memory.storage import write_all

__all__ = ["INBOX", "MAX_NAME_BYTES", "safe_name", "save"]

INBOX = Path(".macupos") / "inbox"
MAX_NAME_BYTES = 120
_KEPT = frozenset(" ._-+()[]@,=#")
_MAX_EXT = 16
_DEVICES = frozenset(
    ["con", "prn", "aux", "nul", "conin$", "conout$"]
    + [f"{p}{n}" for p in ("com", "lpt") for n in [*"0123456789", "¹", "²", "³"]]
)
_RUNS = re.compile(r"_{2,}| {2,}")
_EDGE_START = re.compile(r"^[ .\-]+")  # no hidden file, no "..", nothing a shell tool takes for an option
_EDGE_END = re.compile(r"[ .]+$")  # Windows drops trailing dots and spaces: "a.txt." would alias "a.txt"
_GITIGNORE = "# Files sent to the bot in Telegram: the owner's, kept out of commits.\n*\n"
_TRIES = 1000


def _clip(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` UTF-8 bytes, at a character boundary."""
    data = text.encode("utf-8")
    return text if len(data) <= limit else data[:limit].decode("utf-8", "ignore")


def safe_name(raw: str, fallback: str = "file") -> str:
    """One file name made from an untrusted one; never empty, never a path, never special."""
    text = unicodedata.normalize("NFKC", raw)
    kept = "".join(ch if ch in _KEPT or unicodedata.category(ch)[0] in "LN" else "_" for ch in text)
    kept = _EDGE_END.sub("", _EDGE_START.sub("", _RUNS.sub(lambda m: m.group(0)[0], kept)))
    stem, dot, ext = kept.rpartition(".")
    if not dot or not stem or not ext.isalnum() or len(ext) > _MAX_EXT:
        stem, ext = kept, ""
    if stem.split(".")[0].rstrip(" ").lower() in _DEVICES:
        stem = f"_{stem}"  # CON, nul.txt … name devices on Windows, whatever the extension
    suffix = f".{ext}" if ext else ""
    stem = _EDGE_END.sub("", _clip(stem, MAX_NAME_BYTES - len(suffix.encode("utf-8"))))
    name = f"{stem}{suffix}" if stem else ""
    return name or fallback


def _candidates(name: str) -> list[str]:
    stem, dot, ext = name.rpartition(".")
    if not dot or not stem:
        stem, ext = name, ""
    suffix = f".{ext}" if ext else ""
    names = [name]
    for n in range(2, _TRIES + 1):
        tail = f"-{n}{suffix}"
        names.append(_clip(stem, MAX_NAME_BYTES - len(tail.encode("utf-8"))) + tail)
    names.append(f"{secrets.token_hex(8)}{suffix}")
    return names


def _open_dir(parent: int, name: str) -> int:
    """The folder ``name`` under the open folder ``parent``, created when missing, never through a link."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(name, 0o700, dir_fd=parent)
    try:
        return os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
    except OSError as exc:  # ELOOP: a symbolic link; ENOTDIR: a file sits where the folder belongs
        raise InboxError(name, f"not a plain folder ({exc.strerror or exc})") from exc


def _write_new(folder: int, name: str, data: bytes) -> str | None:
    """Create ``name`` in ``folder`` and write ``data``; None when the name is taken (a file or a link)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(name, flags, 0o600, dir_fd=folder)
    except FileExistsError:
        return None
    try:
        write_all(fd, data)
    except OSError:
        os.close(fd)
        os.unlink(name, dir_fd=folder)  # no half-written file left behind
        raise
    os.close(fd)
    return name


def save(project_dir: Path, name: str, data: bytes) -> Path:
    """Save ``data`` as a new file in the project's inbox under ``safe_name(name)`` (or the next free variant).

    Returns the file's path relative to ``project_dir``. Raises InboxError when the inbox cannot be used.
    Blocking: call it in a worker thread.
    """
    wanted = safe_name(name)
    try:
        root = os.open(project_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise InboxError(project_dir, exc.strerror or str(exc)) from exc
    opened = [root]
    try:
        macupos = _open_dir(root, INBOX.parts[0])
        opened.append(macupos)
        try:
            fd = os.open(".gitignore", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=macupos)
        except FileExistsError:
            pass
        else:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(_GITIGNORE)
        inbox = _open_dir(macupos, INBOX.parts[1])
        opened.append(inbox)
        for candidate in _candidates(wanted):
            written = _write_new(inbox, candidate, data)
            if written is not None:
                return INBOX / written
        raise InboxError(INBOX, f"no free name for {wanted!r}")
    except OSError as exc:
        raise InboxError(INBOX, exc.strerror or str(exc)) from exc
    finally:
        for fd in reversed(opened):
            os.close(fd)

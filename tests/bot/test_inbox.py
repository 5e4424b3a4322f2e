"""The inbox writer against hostile file names and planted links: real files in a temporary project, 0 escapes."""

from __future__ import annotations

import itertools
import os
import unicodedata
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.errors import InboxError
from bot.inbox import INBOX, MAX_NAME_BYTES, safe_name, save
from tests.fuzzing import fuzz_settings

_PREFIXES = [
    "", "../", "../../", "..\\..\\", "/", "/etc/", "~/", "./", ".git/", ".macupos/", "inbox/../../", "\x00",
    "．．／", "∕", "..∕..∕", "\uff0e\uff0e\u2215", "\u2024\u2024/", "\u202e", "-", "--", " ", ".", "...",
]  # fmt: skip
_STEMS = [
    "passwd", "CON", "nul", "aux.txt", "LPT1", "com¹", "..", ".", ".git", ".gitignore", "", " ", "a\nb", "x\r\ny",
    "tab\there", "bell\x07", "del\x7f", "zero\u200bwidth", "a" * 400, "я" * 200, "名" * 100, "🙂" * 60,
    "report.pdf\x00.exe", "hooks/pre-commit", "C:\\Windows\\win.ini", "file:name?*<>|\"",
]  # fmt: skip
_SUFFIXES = ["", ".txt", ".", "..", "/", "\\", ".." + "/" * 3, " .", ".tar.gz", ".x" * 40, "\n.sh"]


def hostile_names() -> list[str]:
    """Every prefix × stem × a rotating suffix: over 500 names built to escape, hide or confuse."""
    names = [p + s + _SUFFIXES[i % len(_SUFFIXES)] for i, (p, s) in enumerate(itertools.product(_PREFIXES, _STEMS))]
    return list(dict.fromkeys(names))


def tree(root: Path) -> set[Path]:
    return {Path(dirpath, name) for dirpath, dirs, files in os.walk(root) for name in (*dirs, *files)}


def assert_plain(name: str) -> None:
    assert name and name not in (".", "..")
    assert "/" not in name and "\\" not in name and "\x00" not in name
    assert not name.startswith((".", "-", " ")) and not name.endswith((".", " "))
    assert all(unicodedata.category(ch)[0] != "C" for ch in name)  # no control or format characters
    assert len(name.encode("utf-8")) <= MAX_NAME_BYTES
    assert name.split(".")[0].lower() not in {"con", "nul", "aux", "prn", "lpt1", "com1"}


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    """(project, outside): a project folder and a sibling folder holding a file nothing may touch."""
    project, outside = tmp_path / "project", tmp_path / "outside"
    project.mkdir()
    outside.mkdir()
    (outside / "passwd").write_text("untouched\n")
    (project / "README.md").write_text("the project\n")
    return project, outside


def test_over_500_hostile_names_all_land_inside_the_inbox_as_plain_new_files(layout: tuple[Path, Path]) -> None:
    project, outside = layout
    names = hostile_names()
    assert len(names) >= 500
    inbox = (project / INBOX).resolve(strict=False)
    before = tree(project.parent)
    written: list[Path] = []
    for n, name in enumerate(names):
        data = f"{n}:{name!r}".encode()
        rel = save(project, name, data)
        path = project / rel
        assert path.resolve().parent == inbox, (name, rel)
        assert not path.is_symlink() and path.is_file() and path.read_bytes() == data
        assert_plain(rel.name)
        written.append(path)
    assert len(set(written)) == len(names)  # every save a new file: collisions got new names
    created = tree(project.parent) - before
    escapes = [p for p in created if not (p.resolve().is_relative_to(project / ".macupos"))]
    assert escapes == []
    assert {p for p in created if p.is_file()} == {*written, project / ".macupos" / ".gitignore"}
    assert (outside / "passwd").read_text() == "untouched\n" and sorted(os.listdir(outside)) == ["passwd"]


@fuzz_settings(max_examples=500)
@given(st.text(min_size=0, max_size=300))
def test_any_text_becomes_one_plain_name(raw: str) -> None:
    assert_plain(safe_name(raw))


def test_readable_names_are_kept_as_sent() -> None:
    assert safe_name("отчёт 2024 (final).pdf") == "отчёт 2024 (final).pdf"
    assert safe_name("screenshot_2024-05-01.png") == "screenshot_2024-05-01.png"
    assert safe_name("../../etc/passwd") == "_.._etc_passwd"
    assert safe_name("\uff0e\uff0e\u2215secret") == "_secret"  # fullwidth dots fold to "..", then go
    assert safe_name("CON.txt") == "_CON.txt" and safe_name("..") == "file"


def test_a_planted_link_with_the_wanted_name_is_never_followed(layout: tuple[Path, Path]) -> None:
    project, outside = layout
    save(project, "warmup.txt", b"x")  # the inbox exists
    inbox = project / INBOX
    (inbox / "notes.txt").symlink_to(outside / "passwd")
    (inbox / "dangling.txt").symlink_to(outside / "created-through-link")
    first = save(project, "notes.txt", b"new notes")
    second = save(project, "dangling.txt", b"new")
    assert (first.name, second.name) == ("notes-2.txt", "dangling-2.txt")
    assert (inbox / "notes-2.txt").read_bytes() == b"new notes"
    assert (outside / "passwd").read_text() == "untouched\n"
    assert not (outside / "created-through-link").exists()


@pytest.mark.parametrize("where", [".macupos", ".macupos/inbox"])
def test_a_link_in_place_of_an_inbox_folder_is_refused(layout: tuple[Path, Path], where: str) -> None:
    project, outside = layout
    target = project / where
    target.parent.mkdir(parents=True, exist_ok=True)
    target.symlink_to(outside, target_is_directory=True)
    with pytest.raises(InboxError, match="not a plain folder"):
        save(project, "a.txt", b"data")
    assert sorted(os.listdir(outside)) == ["passwd"]


def test_a_file_in_place_of_the_inbox_is_refused(layout: tuple[Path, Path]) -> None:
    project, _ = layout
    (project / ".macupos").mkdir()
    (project / ".macupos" / "inbox").write_text("not a folder")
    with pytest.raises(InboxError):
        save(project, "a.txt", b"data")


def test_the_inbox_is_kept_out_of_commits_and_an_existing_gitignore_is_left_alone(layout: tuple[Path, Path]) -> None:
    project, _ = layout
    save(project, "a.txt", b"1")
    assert (project / ".macupos" / ".gitignore").read_text().splitlines()[-1] == "*"
    (project / ".macupos" / ".gitignore").write_text("# mine\n")
    save(project, "b.txt", b"2")
    assert (project / ".macupos" / ".gitignore").read_text() == "# mine\n"

"""discover(): which files are transcripts, of which kind, in a stable order."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from memory.sources.discover import SourceFile, discover
from tests.memory.conftest import TRANSCRIPTS


def touch(path: Path, text: str = "{}\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Path]:
    claude = tmp_path / "claude" / "projects"
    codex = tmp_path / "codex" / "sessions"
    touch(claude / "-home-me-app" / "aaa.jsonl")
    touch(claude / "-home-me-app" / "aaa" / "subagents" / "agent-x1.jsonl")
    touch(claude / "-home-me-app" / "aaa" / "subagents" / "agent-x1.meta.json", '{"description": "d"}')
    touch(claude / "-home-me-app" / "agent-flat9.jsonl")
    touch(claude / "-home-me-app" / "notes.txt", "not a transcript")
    touch(claude / "exports" / "export.json", json.dumps({"loglines": [{"type": "user"}]}))
    touch(claude / "exports" / "settings.json", json.dumps({"theme": "dark"}))
    touch(codex / "2025" / "10" / "29" / "rollout-2025-10-29T00-59-38-abc.jsonl")
    return claude, codex


# Sorted as paths (part by part), so a session's folder sorts before its file "aaa.jsonl".
def kinds(files: list[SourceFile], root: Path) -> list[tuple[str, str, str, str]]:
    return [(str(f.path.relative_to(root)), f.kind, f.parent_hint, f.agent_hint) for f in files]


def test_default_folders_are_walked_and_classified(tree: tuple[Path, Path], tmp_path: Path) -> None:
    claude, codex = tree
    result = discover([], claude_projects_dir=claude, codex_sessions_dir=codex)
    assert kinds(result.files, tmp_path) == [
        ("claude/projects/-home-me-app/aaa/subagents/agent-x1.jsonl", "claude-subagent", "aaa", "x1"),
        ("claude/projects/-home-me-app/aaa.jsonl", "claude", "", ""),
        ("claude/projects/-home-me-app/agent-flat9.jsonl", "claude-subagent", "", "flat9"),
        ("claude/projects/exports/export.json", "loglines", "", ""),
        ("codex/sessions/2025/10/29/rollout-2025-10-29T00-59-38-abc.jsonl", "codex", "", ""),
    ]
    assert result.missing == [] and result.unreadable == []


def test_absent_default_folders_are_not_missing(tmp_path: Path) -> None:
    result = discover([], claude_projects_dir=tmp_path / "no-claude", codex_sessions_dir=tmp_path / "no-codex")
    assert (result.files, result.missing, result.unreadable) == ([], [], [])


def test_explicit_paths_missing_and_files_taken_whatever_their_folder(tmp_path: Path) -> None:
    odd = touch(tmp_path / "somewhere" / "session.log", "{}\n")
    rollout = touch(tmp_path / "elsewhere" / "rollout-1.jsonl")
    gone = tmp_path / "gone.jsonl"
    result = discover([odd, rollout, gone], claude_projects_dir=tmp_path / "c", codex_sessions_dir=tmp_path / "x")
    assert [(f.path, f.kind) for f in result.files] == [(rollout, "codex"), (odd, "claude")]
    assert result.missing == [gone]


def test_explicit_json_without_loglines_is_reported_not_taken(tree: tuple[Path, Path], tmp_path: Path) -> None:
    claude, codex = tree
    settings = claude / "exports" / "settings.json"
    result = discover([settings], claude_projects_dir=claude, codex_sessions_dir=codex)
    assert result.files == []
    assert [p for p, _ in result.unreadable] == [settings]


def test_a_file_reached_twice_is_listed_once(tree: tuple[Path, Path]) -> None:
    claude, codex = tree
    main = claude / "-home-me-app" / "aaa.jsonl"
    result = discover([claude, main], claude_projects_dir=claude, codex_sessions_dir=codex)
    assert [f.path for f in result.files].count(main) == 1


def test_symlink_loops_are_not_followed_forever(tmp_path: Path) -> None:
    root = tmp_path / "root"
    touch(root / "a" / "s.jsonl")
    os.symlink(root, root / "a" / "loop")
    os.symlink(tmp_path / "nowhere", root / "dangling")
    result = discover([root], claude_projects_dir=root, codex_sessions_dir=root)
    assert [f.path for f in result.files] == [root / "a" / "s.jsonl"]


def test_fixture_tree_has_every_kind() -> None:
    data = TRANSCRIPTS
    result = discover([data], claude_projects_dir=data, codex_sessions_dir=data)
    by_kind = {f.path.name: f.kind for f in result.files}
    assert by_kind["sample_session.json"] == "loglines"
    assert by_kind["agent-showcol1.jsonl"] == "claude-subagent"
    assert "agent-showcol1.meta.json" not in by_kind
    assert by_kind["dag_compact_after_rewind.jsonl"] == "claude"
    assert [f.path for f in result.files] == sorted(f.path for f in result.files)

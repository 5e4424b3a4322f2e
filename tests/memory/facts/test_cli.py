"""`macupos memory script | rebuild | facts …` through a real subprocess."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.cli_env import cli_env, run_macupos


def _run(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_macupos(cli_env(home, HOME=str(home)), "memory", *args)


def test_script_prints_the_response_and_errors_exit_1_with_the_line(tmp_path: Path) -> None:
    home = tmp_path / "home"
    done = _run(home, "script", "remember editor user Fact predicate favorite-editor object Helix\nrespond stored")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "stored\n"
    done = _run(home, "script", "recall user", "--as-of", "2100-01-01")
    assert "object Helix" in done.stdout and "state Active" in done.stdout
    done = _run(home, "script", "set a 1\nremember editor user Fact predicate x object y")
    assert done.returncode == 1
    assert "error: memory 'editor' already exists" in done.stderr and "(line 2)" in done.stderr


def test_script_from_a_file(tmp_path: Path) -> None:
    script = tmp_path / "s.tcl"
    script.write_text("remember a user Fact predicate p object o\nworld\n")
    done = _run(tmp_path / "home", "script", "--file", str(script))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("memories 1 ")


def test_export_load_show_and_rebuild(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _run(home, "script", "remember editor user Fact predicate favorite-editor object Helix", "--as-of", "2026-01-01")
    exported = _run(home, "facts", "export")
    assert exported.returncode == 0 and "remember editor user Fact" in exported.stdout
    snap = tmp_path / "snap.tcl"
    snap.write_text(exported.stdout.replace("object Helix", "object Kakoune"))
    loaded = _run(home, "facts", "load", str(snap))
    assert loaded.returncode == 0, loaded.stderr
    assert "replaced 1" in loaded.stdout
    shown = _run(home, "facts", "show", "--as-of", "2026-01-02")
    assert '"Kakoune"' in shown.stdout and len(shown.stdout.splitlines()) <= 12
    rebuilt = _run(home, "rebuild")
    assert rebuilt.returncode == 0 and "1 memories" in rebuilt.stdout
    assert "Kakoune" in _run(home, "facts", "export").stdout


def test_a_file_that_is_not_utf8_is_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.tcl"
    bad.write_bytes(b"\xff\xfe remember x")
    for args in (("script", "--file", str(bad)), ("facts", "load", str(bad))):
        r = _run(tmp_path, *args)
        assert r.returncode == 1 and "not UTF-8 text" in r.stderr and "Traceback" not in r.stderr

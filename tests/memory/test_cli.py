"""`macupos memory …` as a user runs it: a real subprocess, its exit code, stdout and stderr."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from tests.cli_env import cli_env, run_macupos


def macupos(
    home: Path, *args: str, stdin: str | None = None, timeout: float = 120, extra_env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    env = cli_env(home / "data", home=home, **(extra_env or {}))
    return run_macupos(env, "memory", *args, stdin=stdin, timeout=timeout)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path


def test_ingest_then_get_show_list_stats(home: Path, transcripts: Path) -> None:
    r = macupos(home, "ingest", str(transcripts), "--json")
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    assert summary["sessions_new"] >= 15 and summary["lines_skipped"]
    # Two fixtures hold a session with id "s1": the copy that goes further wins, and the run says so.
    assert [c["session_id"] for c in summary["session_id_clashes"]] == ["s1"]

    r = macupos(home, "list", "--json", "--limit", "100")
    rows = json.loads(r.stdout)
    assert any(row["session_id"] == "test-session-id" for row in rows)
    tokyo = macupos(home, "list", "--limit", "100", extra_env={"MACUPOS_TIMEZONE": "Asia/Tokyo"}).stdout
    dated = next(row for row in rows if row["session_id"] == "test-session-id")
    local = datetime.fromisoformat(dated["date"]).astimezone(ZoneInfo("Asia/Tokyo")).strftime("%Y-%m-%d %H:%M")
    assert any(line.startswith(local) and "test-session-id" in line for line in tokyo.splitlines())

    r = macupos(home, "show", "test-session-id", "--markdown")
    assert r.returncode == 0 and "hello world function" in r.stdout.lower()
    again = macupos(home, "show", "test-session-id", "--markdown")
    assert again.stdout == r.stdout

    r = macupos(home, "show", "test-session-id", "--handoff")
    assert r.returncode == 0 and r.stdout.startswith("---\n")

    r = macupos(home, "get", "hello function", "--json", "--as-of", "2026-01-01T00:00:00Z", "--explain")
    assert r.returncode == 0, r.stderr
    results = json.loads(r.stdout)
    assert results and set(results[0]) >= {"session_id", "score", "date", "headline", "projects", "kind"}

    r = macupos(home, "get", "hello function", "--as-of", "2026-01-01T00:00:00Z")
    assert r.returncode == 0 and "---" in r.stdout

    r = macupos(home, "stats", "--json")
    stats = json.loads(r.stdout)
    assert stats["handoffs"] >= 15 and stats["schema_version"] >= 1
    plain = macupos(home, "stats").stdout
    assert f"handoffs: {stats['handoffs']}" in plain and "sessions: main " in plain and "{" not in plain


def test_queries_file_answers_one_line_per_query(home: Path, transcripts: Path, tmp_path: Path) -> None:
    assert macupos(home, "ingest", str(transcripts / "simonw"), "--quiet").returncode == 0
    qfile = tmp_path / "q.jsonl"
    qfile.write_text(
        json.dumps({"query": "hello function", "as_of": "2026-01-01T00:00:00Z"})
        + "\n"
        + "not json\n"
        + json.dumps({"query": "x", "as_of": "yesterday-ish"})
        + "\n"
        + json.dumps({"query": "goodbye", "max": 1, "days_back": 10000})
        + "\n"
        + json.dumps({"query": 5})
        + "\n"
        + json.dumps({"query": "hello", "max": "three"})
        + "\n"
        + json.dumps({"query": "hello", "days_back": -3})
        + "\n"
        + '{"query": "hello", "days_back": 1'
        + "9" * 400
        + "}\n"
    )
    with qfile.open("ab") as f:
        f.write(b'\xff\xfe{"query": "hello"}\n')  # not UTF-8: a bad line like any other
    r = macupos(home, "get", "--queries", str(qfile), "--explain")
    assert r.returncode == 0, r.stderr
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    assert len(lines) == 9
    assert "positive number of days" in lines[6]["error"] and lines[7]["error"].startswith("invalid query line")
    assert lines[8]["error"].startswith("invalid query line")  # a number too large for a float
    assert lines[0]["results"] and "explain" in lines[0]["results"][0]
    assert lines[1]["error"].startswith("invalid query line")
    assert lines[2]["error"].startswith("invalid query line")
    assert len(lines[3]["results"]) <= 1
    assert "query must be a string" in lines[4]["error"] and "max must be" in lines[5]["error"]
    both = macupos(home, "get", "hello", "--queries", str(qfile))
    assert both.returncode == 2 and "give no QUERY" in both.stderr


def test_missing_path_is_a_clear_error(home: Path) -> None:
    r = macupos(home, "ingest", str(home / "nope"))
    assert r.returncode != 0
    assert "missing" in r.stderr and "Traceback" not in r.stderr


def test_non_sqlite_database_is_a_clear_error(home: Path) -> None:
    (home / "data").mkdir()
    (home / "data" / "memory.db").write_text("not a database at all\n")
    r = macupos(home, "stats")
    assert r.returncode == 3  # a storage fault (docs/exit-codes.md)
    assert "not a Macupos memory database" in r.stderr and "Traceback" not in r.stderr


def _planted_db(home: Path, sql: str) -> Path:
    """The home's memory.db made by another hand: a new SQLite file ``sql`` ran on."""
    path = home / "data" / "memory.db"
    path.parent.mkdir()
    conn = sqlite3.connect(path)
    conn.execute(sql)
    conn.close()
    return path


def test_newer_schema_is_a_clear_error(home: Path) -> None:
    _planted_db(home, "PRAGMA user_version = 999")
    r = macupos(home, "get", "anything")
    assert r.returncode == 1
    assert "newer than this Macupos understands" in r.stderr and "Traceback" not in r.stderr


def test_another_programs_sqlite_file_is_left_untouched(home: Path) -> None:
    db = _planted_db(home, "CREATE TABLE their_notes(body TEXT)")
    before = db.read_bytes()
    r = macupos(home, "stats")
    assert r.returncode == 3  # a storage fault (docs/exit-codes.md)
    assert "another program" in r.stderr and "Traceback" not in r.stderr
    assert db.read_bytes() == before  # not even switched to WAL
    assert not (home / "data" / "memory.db-wal").exists()


@pytest.mark.parametrize(
    ("extra_env", "config", "expected"),
    [
        ({"MACUPOS_TIMEZONE": "Mars/Olympus"}, "", "MACUPOS_TIMEZONE (or [memory] timezone): not an IANA timezone"),
        ({"MACUPOS_MEMORY_WINDOW_DAYS": "abc"}, "", "MACUPOS_MEMORY_WINDOW_DAYS (or [memory] window_days): not a"),
        ({}, "[memory]\ntool_output_limit = 'lots'\n", "[memory] tool_output_limit: not a number"),
        ({}, "x = [\n", "not a readable TOML file"),
        ({}, "[memory]\nown_secrets = 42\n", "own_secrets): not a list of strings"),
    ],
)
def test_a_bad_setting_is_named_in_one_line(home: Path, extra_env: dict[str, str], config: str, expected: str) -> None:
    if config:
        (home / "data").mkdir()
        (home / "data" / "config.toml").write_text(config)
    r = macupos(home, "stats", extra_env=extra_env)
    assert r.returncode == 1
    assert expected in r.stderr and "Traceback" not in r.stderr


def test_utc_needs_no_timezone_database(home: Path) -> None:
    r = macupos(home, "stats", extra_env={"PYTHONTZPATH": str(home / "no-tzdata")})
    assert r.returncode == 0, r.stderr


def _import_handoffs(home: Path, dates: dict[str, str]) -> None:
    """`macupos import` of a tree of one-line handoffs, one per session id, dated as given."""
    tree = home / "tree"
    tree.mkdir()
    for sid, date in dates.items():
        (tree / f"{sid}.md").write_text(f"---\nsession_id: {sid}\ndate: '{date}'\nheadline: {sid} work\n---\n")
    assert macupos(home, "import", str(tree)).returncode == 0


def test_an_undated_or_date_only_handoff_lists_and_forgets_cleanly(home: Path) -> None:
    _import_handoffs(home, {"dated-only": "2025-07-09", "undated": ""})
    listed = macupos(home, "list", extra_env={"MACUPOS_TIMEZONE": "America/Los_Angeles"}).stdout
    assert any(line.startswith("2025-07-09 ") and "dated-only" in line for line in listed.splitlines())
    assert any(line.startswith("undated") and "undated" in line[16:] for line in listed.splitlines())
    assert (home / "data" / "handoffs" / "unknown" / "undated.md").is_file()
    assert macupos(home, "forget", "undated").returncode == 0
    assert not (home / "data" / "handoffs" / "unknown" / "undated.md").exists()


def test_export_to_a_file_is_a_clear_error(home: Path) -> None:
    (home / "a-file").write_text("")
    r = macupos(home, "export", str(home / "a-file"))
    assert r.returncode == 1
    assert "cannot write to" in r.stderr and "not a folder" in r.stderr and "Traceback" not in r.stderr


def test_unknown_session_is_a_clear_error(home: Path) -> None:
    r = macupos(home, "show", "no-such-session")
    assert r.returncode == 1 and "no session or handoff" in r.stderr


def test_bad_as_of_is_a_usage_error(home: Path) -> None:
    r = macupos(home, "get", "x", "--as-of", "yesterday-ish")
    assert r.returncode == 2 and "ISO-8601" in r.stderr


@pytest.mark.parametrize("days", ["-5", "0", "nan", "soon"])
def test_days_back_that_is_not_a_positive_number_is_a_usage_error(home: Path, days: str) -> None:
    r = macupos(home, "get", "x", "--days-back", days)
    assert r.returncode == 2 and "not a positive number of days" in r.stderr


@pytest.mark.parametrize("command", ["export", "import"])
def test_an_empty_folder_name_is_a_usage_error_not_the_current_folder(home: Path, command: str) -> None:
    r = macupos(home, command, "")
    assert r.returncode == 2 and "an empty folder name" in r.stderr
    assert not list((home / "data").glob("20*"))


def test_extreme_dates_list_in_any_timezone(home: Path) -> None:
    # Year 1 and year 9999 cannot be shifted into every timezone: listed as undated, never a traceback.
    _import_handoffs(home, {"ancient": "0001-01-01T00:00:00+00:00", "far": "9999-12-31T23:30:00+00:00"})
    utc = macupos(home, "list").stdout.splitlines()
    assert any(line.startswith("0001-01-01 00:00  ancient") for line in utc)
    for zone, stuck in (("America/New_York", "ancient"), ("Asia/Tokyo", "far")):
        r = macupos(home, "list", extra_env={"MACUPOS_TIMEZONE": zone})
        assert r.returncode == 0 and "Traceback" not in r.stderr
        assert any(line.startswith("undated") and stuck in line for line in r.stdout.splitlines())


def test_hooks_install_into_a_missing_project_folder_is_a_usage_error(home: Path) -> None:
    typo = home / "typo" / "project"
    r = macupos(home, "hooks", "install", "--scope", "project", "--project-dir", str(typo))
    assert r.returncode == 2 and "does not exist" in r.stderr
    assert not (home / "typo").exists()


def test_list_project_matches_the_name_as_get_does(home: Path) -> None:
    tree = home / "tree"
    tree.mkdir()
    (tree / "p.md").write_text(
        "---\nsession_id: p1\ndate: '2026-01-02'\nheadline: work\nprojects: [example-project]\n---\n"
    )
    (tree / "q.md").write_text("---\nsession_id: q1\ndate: '2026-01-03'\nheadline: other\nprojects: [elsewhere]\n---\n")
    assert macupos(home, "import", str(tree)).returncode == 0
    for name in ("example-project", "Example Project", "EXAMPLE-PROJECT"):
        rows = json.loads(macupos(home, "list", "--json", "--project", name).stdout)
        assert [r["session_id"] for r in rows] == ["p1"], name

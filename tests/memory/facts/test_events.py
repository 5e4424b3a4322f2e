"""The event log: fsynced appends, idempotent replay, rebuild equality, half-written lines, origins."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from memory.facts.api import FactsApi
from memory.facts.events import EventLog, new_event, read_events

from .conftest import days, facts_rows, ok, open_api

SCRIPT = """
remember editor user Fact predicate favorite-editor object Helix confidence 0.9
remember jordan user Fact predicate has-dog object Corgi
remember prefs user UserPreference code_style black active_project macupos
link jordan user owned-by 0.8
"""


async def _busy_history(api: FactsApi) -> None:
    await ok(api, SCRIPT, days(0))
    await ok(api, "recall user", days(10))
    await ok(api, "forget prefs", days(20))
    await ok(api, "consolidate", days(200))
    await ok(api, "revive editor", days(201))
    await ok(api, "sweep", days(201))
    await ok(api, "sweep", days(220))


async def test_every_change_is_one_line_in_this_origins_file(api: FactsApi) -> None:
    await ok(api, SCRIPT, days(0))
    files = list(api.events_dir.glob("*.jsonl"))
    assert [f.name for f in files] == [f"{api.origin}.jsonl"]
    lines = files[0].read_text().splitlines()
    assert [json.loads(x)["op"] for x in lines] == ["remember", "remember", "remember", "link"]
    first = json.loads(lines[0])
    assert set(first) == {"id", "at_ms", "origin", "op", "args"} and first["origin"] == api.origin
    assert (api.folder / ".origin").read_text().strip() == api.origin
    assert ".origin" in (api.folder / ".gitignore").read_text()


async def test_replaying_twice_is_a_no_op(api: FactsApi) -> None:
    await _busy_history(api)
    before = facts_rows(api.engine.facts_dir.parent / "memory.db")
    assert await api.replay_new() == 0
    assert await api.replay_new() == 0
    assert facts_rows(api.engine.facts_dir.parent / "memory.db") == before


async def test_rebuild_from_the_log_gives_the_same_state(api: FactsApi) -> None:
    await _busy_history(api)
    db = api.engine.facts_dir.parent / "memory.db"
    before = facts_rows(db)
    assert before
    applied = await api.rebuild()
    assert applied == len(list(read_events(api.events_dir)))
    assert facts_rows(db) == before


async def test_a_fresh_home_replaying_copied_events_reaches_the_same_state(api: FactsApi, tmp_path: Path) -> None:
    await _busy_history(api)
    other = tmp_path / "other"
    shutil.copytree(api.events_dir, other / "facts" / "events")
    clone = await open_api(other)
    try:
        assert facts_rows(other / "memory.db") == facts_rows(api.engine.facts_dir.parent / "memory.db")
        assert clone.origin != api.origin  # a new installation gets its own file
    finally:
        await clone.close()


async def test_events_from_another_origin_are_applied_by_replay_new(api: FactsApi, tmp_path: Path) -> None:
    log = EventLog(api.events_dir, "otherclone")
    fields = {"predicate": "lives-in", "object": "Tokyo"}
    args = {"id": "loc", "subject": "user", "type": "Fact", "fields": fields, "now_ms": 1, "provenance": "x"}
    event = new_event("otherclone", "remember", args, log.next_at_ms())
    log.append([event])
    assert await api.replay_new() == 1
    assert (await api.get("loc")) is not None
    log.append([event])  # the same event again (a merge duplicated it): still applied once
    assert await api.replay_new() == 0


async def test_a_half_written_last_line_is_skipped_on_read_and_repaired_before_the_next_append(
    api: FactsApi,
) -> None:
    await ok(api, "remember a user Fact predicate p object o", days(0))
    path = api.events_dir / f"{api.origin}.jsonl"
    whole = path.read_bytes()
    with path.open("ab") as fh:
        fh.write(b'{"id": "dead", "at_ms": 5, "orig')  # a crash mid-append
    assert [e.args.get("id") for e in read_events(api.events_dir)] == ["a"]
    assert await api.replay_new() == 0
    await api.close()
    reopened = await open_api(api.engine.facts_dir.parent)
    try:
        await ok(reopened, "remember b user Fact predicate p object o", days(1))
        data = path.read_bytes()
        assert data.startswith(whole) and b"dead" not in data and data.endswith(b"\n")
        assert [e.args["id"] for e in read_events(api.events_dir)] == ["a", "b"]
        assert await reopened.rebuild() == 2
    finally:
        await reopened.close()


def test_a_complete_last_event_without_newline_is_kept(tmp_path: Path) -> None:
    log = EventLog(tmp_path, "o")
    event = new_event("o", "forget", {"id": "x"}, 7)
    (tmp_path / "o.jsonl").write_text(event.to_line().rstrip("\n"))
    assert log.repair() is True
    assert [e.id for e in read_events(tmp_path)] == [event.id]
    assert (tmp_path / "o.jsonl").read_text().endswith("\n")


async def test_events_committed_to_the_log_but_not_the_database_are_applied_at_open(
    api: FactsApi, tmp_path: Path
) -> None:
    # Simulates a crash between the fsynced append and the commit: the log is the source of truth.
    log = EventLog(api.events_dir, api.origin)
    fields = {"predicate": "p", "object": "o"}
    args = {"id": "late", "subject": "user", "type": "Fact", "fields": fields, "now_ms": 1, "provenance": ""}
    log.append([new_event(api.origin, "remember", args, log.next_at_ms())])
    await api.close()
    reopened = await open_api(api.engine.facts_dir.parent)
    try:
        assert await reopened.get("late") is not None
    finally:
        await reopened.close()


async def test_events_committed_after_a_bulk_script_replay_after_it(tmp_path: Path) -> None:
    # A bulk script stamps 1 ms per event, ahead of the clock; a second process's forget, committed after
    # it, must replay after it too, or a rebuild brings the forgotten memory back.
    home = tmp_path / "home"
    first, second = await open_api(home), await open_api(home)
    try:
        await ok(first, "for {set i 0} {$i < 300} {incr i} {remember m$i user Fact predicate p object o}", None)
        await ok(second, "forget m299", None)
        await second.rebuild()
        assert await second.get("m299") is None and (await second.world())["memories"] == 299
    finally:
        await first.close()
        await second.close()

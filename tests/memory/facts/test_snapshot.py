"""The readable snapshot: replayable lines, round trips, hand edits, and when it is written."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory.facts.api import FactsApi
from memory.facts.model import FactsError
from memory.facts.snapshot import parse_snapshot
from memory.facts.tclwords import quote, split_command

from .conftest import days, facts_rows, ok, open_api

TRICKY = 'a "quoted" $value [with] {braces} \\ and\nnewline — 柯基犬'


def test_quoted_words_parse_back_exactly() -> None:
    for word in ["plain", "", "two words", TRICKY, "#hash", "}", "{", "a;b", "\t\x01"]:
        words, comment = split_command(f"remember {quote(word)} x ;# from {quote(word)}")
        assert words == ["remember", word, "x"]
        assert split_command(comment)[0] == ["from", word]


async def test_export_then_load_into_a_fresh_home_gives_the_same_state(api: FactsApi, tmp_path: Path) -> None:
    await ok(
        api,
        f"""
remember editor user Fact predicate favorite-editor object Helix confidence 0.9
remember tricky user Fact predicate note object {quote(TRICKY)}
remember jordan user Fact predicate has-dog object Corgi
remember jordan-age jordan Fact predicate age object 9-years confidence 0.95
remember prefs user UserPreference code_style black active_project macupos
link jordan user owned-by 0.8
""",
        days(0),
    )
    await ok(api, "recall user", days(3))
    await ok(api, "consolidate", days(70))
    text = await api.export_snapshot()
    assert "remember editor user Fact predicate favorite-editor object Helix confidence 0.9 ;#" in text
    assert "link jordan user owned-by 0.8 ;#" in text
    fresh_home = tmp_path / "fresh"
    fresh = await open_api(fresh_home)
    try:
        report = await fresh.load_snapshot(text)
        assert (report.added, report.replaced, report.rejected) == (6, 0, [])
        mine = facts_rows(api.engine.facts_dir.parent / "memory.db")
        theirs = facts_rows(fresh_home / "memory.db")
        assert mine == theirs
        assert await fresh.export_snapshot() == text
        again = await fresh.load_snapshot(text)
        assert (again.added, again.unchanged) == (0, 6)
    finally:
        await fresh.close()


async def test_a_hand_edited_line_replaces_the_memory_and_a_new_line_adds_one(api: FactsApi) -> None:
    await ok(api, "remember editor user Fact predicate favorite-editor object Helix", days(0))
    text = (await api.export_snapshot()).replace("object Helix", "object {Helix IDE}")
    text += "remember loc user Fact predicate lives-in object Tokyo\n"
    report = await api.load_snapshot(text)
    assert (report.added, report.replaced, report.unchanged) == (1, 1, 0)
    assert (await api.get("editor")).fields["object"] == "Helix IDE"  # type: ignore[union-attr]
    assert (await api.get("loc")) is not None


async def test_bad_lines_are_reported_with_their_line_number(api: FactsApi) -> None:
    report = await api.load_snapshot("# comment\nremember x user Nope a b\nremember y user Fact predicate p object o\n")
    assert report.added == 1 and report.rejected[0][0] == 2
    with pytest.raises(FactsError, match="line 1"):
        parse_snapshot("remember x [exec ls] Fact\n")


async def test_the_snapshot_is_written_every_50_events_and_at_close(tmp_path: Path) -> None:
    home = tmp_path / "h"
    api = await open_api(home)
    snap = home / "facts" / "snapshot.tcl"
    await ok(api, "\n".join(f"remember m{i} user Fact predicate p object o" for i in range(49)), days(0))
    assert not snap.exists()
    await ok(api, "remember m49 user Fact predicate p object o", days(0))
    assert snap.read_text().count("\nremember ") == 50
    await ok(api, "remember last user Fact predicate p object o", days(0))
    assert "remember last" not in snap.read_text()
    await api.close()
    assert "remember last" in snap.read_text()
    assert not list((home / "facts").glob("*.tmp"))


async def test_a_refused_replacement_leaves_the_stored_memory_as_it_was(api: FactsApi) -> None:
    await ok(api, "remember editor user Fact predicate favorite-editor object Helix confidence 0.9", days(0))
    await ok(api, "remember laptop user Fact predicate owns object thinkpad", days(0))
    await ok(api, "remember laptop-os laptop Fact predicate runs object linux", days(0))
    before = await api.export_snapshot()
    typo = before.replace("confidence 0.9", "confidence 9").replace("object thinkpad", "object framework")
    report = await api.load_snapshot(typo)
    assert [line for line, _ in report.rejected] == [3, 4] and (report.replaced, report.added) == (0, 0)
    assert await api.export_snapshot() == before  # nothing forgotten on the way
    assert (await api.get("editor")) is not None and (await api.get("laptop")) is not None


async def test_an_unedited_export_loads_back_unchanged_whatever_its_numbers(api: FactsApi) -> None:
    await ok(api, "remember x user Fact predicate p object o confidence 0.123456789", days(0))
    await ok(api, "link user eywa works-on 0.3333333333333333", days(0))
    text = await api.export_snapshot()
    assert "confidence 0.123456789 ;#" in text
    report = await api.load_snapshot(text)
    assert (report.unchanged, report.replaced, report.added) == (2, 0, 0)
    assert await api.export_snapshot() == text


async def test_a_line_with_an_impossible_access_count_is_refused_not_a_crash(api: FactsApi) -> None:
    report = await api.load_snapshot(
        "remember a10 user Fact predicate p object o ;# access 99999999999999999999999\n"
        "remember b10 user Fact predicate p object o\n"
    )
    assert [line for line, _ in report.rejected] == [1] and report.added == 1

"""The ingest pipeline end to end over the transcript fixtures: real files, a real SQLite database."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memory.facade import Eywa
from memory.handoffs.extraction import extract_pending
from memory.handoffs.format import from_markdown
from memory.ingest import IngestReport
from memory.settings import MemorySettings


def user_line(session_id: str, uuid: str, timestamp: str, content: object) -> str:
    """One user message of a Claude Code transcript, as its JSONL line (without the newline)."""
    message = {"role": "user", "content": content}
    return json.dumps(
        {"type": "user", "timestamp": timestamp, "sessionId": session_id, "uuid": uuid, "message": message}
    )


async def test_every_fixture_ingests_and_yields_handoffs(settings: MemorySettings, transcripts: Path) -> None:
    async with await Eywa.open(settings) as eywa:
        report = await eywa.ingest([transcripts], use_llm=False)
        stats = await eywa.stats()
    assert report.files_seen >= 20
    assert not report.unreadable
    assert report.sessions_new >= 15
    # Each session is counted once, though the fixtures hold session "s1" in two files.
    assert report.sessions_new + report.sessions_updated == sum(stats["sessions"].values())
    assert report.extract_failed == 0
    assert stats["sessions"].get("subagent", 0) >= 2
    assert stats["handoffs"] == report.handoffs_extracted
    assert report.lines_skipped  # the malformed fixtures are reported, not fatal
    assert any(p.path.endswith("session-badjson.jsonl") and p.line_no == 2 for p in report.problems)
    assert report.types_skipped.get("weird-new-type") == 1


async def test_same_files_twice_change_nothing(settings: MemorySettings, transcripts: Path) -> None:
    async with await Eywa.open(settings) as eywa:
        await eywa.ingest([transcripts], use_llm=False)
        before = await _snapshot(eywa)
        again = await eywa.ingest([transcripts], use_llm=False)
        after = await _snapshot(eywa)
        stats = await eywa.stats()
    assert again.sessions_new == 0 and again.sessions_updated == 0
    assert again.sessions_unchanged == sum(stats["sessions"].values())  # "s1", in two files, counted once
    assert again.files_unchanged == again.files_seen
    assert again.handoffs_extracted == 0
    assert before == after


async def test_grown_file_updates_only_its_session(settings: MemorySettings, transcripts: Path) -> None:
    path = transcripts / "simonw" / "sample_session.jsonl"
    async with await Eywa.open(settings) as eywa:
        await eywa.ingest([transcripts], use_llm=False)
        line = user_line("test-session-id", "msg-100", "2025-12-24T10:05:00.000Z", "Now add a farewell docstring")
        with path.open("a", encoding="utf-8") as fh:
            fh.write(line + "\n")
        report = await eywa.ingest([transcripts], use_llm=False)
        view = await eywa.show("test-session-id")
    assert report.sessions_updated == 1 and report.sessions_new == 0
    assert report.files_unchanged == report.files_seen - 1
    assert report.handoffs_extracted == 1
    assert view.session is not None and "farewell docstring" in view.session.markdown


async def test_a_grown_file_reports_only_its_new_bad_lines(settings: MemorySettings, tmp_path: Path) -> None:
    def grow_line(n: int, text: str) -> str:
        return user_line("grow", f"u{n}", f"2025-12-24T10:0{n}:00.000Z", text)

    path = tmp_path / "grow.jsonl"
    path.write_text(grow_line(1, "start the work") + "\n{not json\n")
    async with await Eywa.open(settings) as eywa:
        first = await eywa.ingest([path], use_llm=False)
        with path.open("a", encoding="utf-8") as fh:
            fh.write(grow_line(2, "carry on") + "\n{also not json\n")
        second = await eywa.ingest([path], use_llm=False)
    assert [p.line_no for p in first.problems] == [2]
    assert [p.line_no for p in second.problems] == [4] and sum(second.lines_skipped.values()) == 1


async def test_progress_moves_inside_a_long_file(settings: MemorySettings, tmp_path: Path) -> None:
    path = tmp_path / "long.jsonl"
    filler = "x" * 4000
    with path.open("w", encoding="utf-8") as fh:
        for n in range(3000):  # ~12 MB
            message = {"role": "user", "content": filler}
            line = {"type": "user", "sessionId": "long", "uuid": f"u{n}", "message": message}
            fh.write(json.dumps(line) + "\n")
    size = path.stat().st_size
    calls: list[tuple[int, int]] = []
    async with await Eywa.open(settings) as eywa:
        await eywa.ingest([path], use_llm=False, extract=False, progress=lambda d, t, _: calls.append((d, t)))
    assert all(t == size for _, t in calls) and calls[-1][0] == size
    inside = [d for d, _ in calls if d < size]
    assert len(inside) >= 2 and inside == sorted(inside)


async def test_half_written_last_line_is_tolerated_then_completed(settings: MemorySettings, transcripts: Path) -> None:
    path = transcripts / "simonw" / "sample_session.jsonl"
    line = user_line("test-session-id", "msg-101", "2025-12-24T10:06:00.000Z", "live tail line")
    with path.open("a", encoding="utf-8") as fh:
        fh.write(line[:40])  # the CLI is mid-write
    async with await Eywa.open(settings) as eywa:
        first = await eywa.ingest([path], use_llm=False)
        assert first.sessions_new == 1
        with path.open("a", encoding="utf-8") as fh:
            fh.write(line[40:] + "\n")
        second = await eywa.ingest([path], use_llm=False)
        view = await eywa.show("test-session-id")
    assert second.sessions_updated == 1
    assert view.session is not None and "live tail line" in view.session.markdown


async def test_subagents_are_linked_and_never_ground_alone(settings: MemorySettings, transcripts: Path) -> None:
    async with await Eywa.open(settings) as eywa:
        await eywa.ingest([transcripts / "daaain_new"], use_llm=False)
        async with eywa.db.conn.execute(
            "SELECT session_id, parent_id FROM sessions WHERE kind = 'subagent' ORDER BY session_id"
        ) as cur:
            subs = [tuple(r) for r in await cur.fetchall()]
        grounding = await eywa.get("", as_of=None, days_back=100_000)
        postings_of_subs = 0
        for sid, _ in subs:
            async with eywa.db.conn.execute("SELECT count(*) FROM postings WHERE session_id = ?", (sid,)) as cur:
                row = await cur.fetchone()
                postings_of_subs += row[0] if row else 0
    assert subs, "the fixtures hold subagent runs"
    assert all(parent for _, parent in subs)
    assert postings_of_subs == 0
    assert all(r.kind != "subagent" for r in grounding.results)


async def test_secrets_never_reach_the_database_or_mirror(settings: MemorySettings, tmp_path: Path) -> None:
    key = "sk-ant-api03-" + "A1b2C3d4E5f6G7h8I9j0" * 4
    own = "correct-horse-battery-staple"
    # Tokens in a folder name, a branch name and a tool input's key are secrets too.
    folder_token, branch_token = "glpat-0948VGZiHXJnB8dE3xKJ", "ghp_" + "abcdEFGH1234" * 3
    key_token = "sk-proj-iK2ZWeqhFWCEPyYngFb51yBMWXaSCrUZoL8g5ubbbPIa84yR"
    settings = MemorySettings(
        home=settings.home,
        claude_config_dir=settings.claude_config_dir,
        codex_home=settings.codex_home,
        llm_enabled=False,
        own_secrets=(own,),
    )
    path = tmp_path / "secret.jsonl"
    lines = [
        {
            "type": "user",
            "uuid": "u1",
            "sessionId": "sec",
            "timestamp": "2026-01-01T00:00:00Z",
            "cwd": f"/srv/{folder_token}/app",
            "gitBranch": f"feat/{branch_token}",
            "message": {"role": "user", "content": f"use ANTHROPIC_API_KEY={key} and the vault phrase {own}"},
        },
        {
            "type": "assistant",
            "uuid": "a1",
            "parentUuid": "u1",
            "sessionId": "sec",
            "timestamp": "2026-01-01T00:01:00Z",
            "message": {
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": "t1",
                        "name": "Bash",
                        "input": {
                            "command": f"curl https://deploy:{own}@example.test/x -H 'x-api-key: {key}'",
                            key_token: "v",
                        },
                    }
                ],
            },
        },
    ]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    async with await Eywa.open(settings) as eywa:
        await eywa.ingest([path], use_llm=False)
        export = tmp_path / "export"
        await eywa.export_dir(export)
    secrets = [key, own, folder_token, branch_token, key_token]
    await _assert_absent(settings.db_path, secrets)
    for f in [*settings.handoffs_dir.rglob("*.md"), *export.rglob("*.md")]:
        text = f.read_text()
        assert not [s for s in secrets if s in text]


async def _assert_absent(db_path: Path, needles: list[str]) -> None:
    for f in db_path.parent.glob(db_path.name + "*"):
        blob = f.read_bytes()
        for n in needles:
            assert n.encode() not in blob, f"{n[:12]}… found in {f.name}"


async def test_forget_removes_and_stays_forgotten(settings: MemorySettings, transcripts: Path) -> None:
    async with await Eywa.open(settings) as eywa:
        await eywa.ingest([transcripts / "simonw"], use_llm=False)
        removed = await eywa.forget("test-session-id")
        await eywa.ingest([transcripts / "simonw"], use_llm=False, force=True)
        listed = [r.session_id for r in await eywa.list_handoffs(limit=100)]
        hits = await eywa.search("hello world function")
    assert "test-session-id" in removed
    assert "test-session-id" not in listed
    assert all(h.session_id != "test-session-id" for h in hits)
    assert not list(settings.handoffs_dir.rglob("test-session-id.md"))


async def test_forget_takes_the_subagents_mirror_files_and_an_import_does_not_bring_them_back(
    settings: MemorySettings, transcripts: Path, tmp_path: Path
) -> None:
    parent = "88a8d761-7b9a-4bf1-a8ca-c1febe6bf358"  # a session with an inline sidechain (one subagent)
    async with await Eywa.open(settings) as eywa:
        await eywa.ingest([transcripts / "daaain_new" / "sidechain_integrated_trimmed.jsonl"], use_llm=False)
        await eywa.export_dir(tmp_path / "before")
        mirrored = sorted(p.name for p in settings.handoffs_dir.rglob(f"{parent}*.md"))
        removed = await eywa.forget(parent)
        report = await eywa.import_dir(tmp_path / "before")
        listed = [r.session_id for r in await eywa.list_handoffs(limit=100)]
    assert len(mirrored) == 2 and len(removed) == 2  # the session and its subagent
    assert not list(settings.handoffs_dir.rglob(f"{parent}*.md"))
    assert report.imported == 0 and all("was forgotten" in why for _, why in report.rejected)
    assert not set(removed) & set(listed)


async def test_an_imported_handoff_without_a_transcript_is_recalled_by_its_text(
    settings: MemorySettings, tmp_path: Path
) -> None:
    from memory.handoffs.format import to_markdown
    from memory.models import Handoff

    h = Handoff(
        session_id="eywa-import-1",
        date="2026-03-02T10:00:00+00:00",
        headline="Index tuning for the search service",
        projects=["search-service"],
        keywords=["postings"],
        substance=2,
        insights=["Skip pointers help long posting lists more than caching does."],
        source="import",
    )
    (tmp_path / "tree").mkdir()
    (tmp_path / "tree" / "eywa-import-1.md").write_text(to_markdown(h))
    async with await Eywa.open(settings) as eywa:
        report = await eywa.import_dir(tmp_path / "tree")
        hits = await eywa.search("skip pointers")
        grounded = await eywa.get("skip pointers caching")
    assert report.imported == 1
    assert [hit.session_id for hit in hits] == ["eywa-import-1"]
    assert [r.session_id for r in grounded.results] == ["eywa-import-1"]


async def test_export_then_import_round_trips(settings: MemorySettings, transcripts: Path, tmp_path: Path) -> None:
    async with await Eywa.open(settings) as eywa:
        await eywa.ingest([transcripts], use_llm=False)
        n = await eywa.export_dir(tmp_path / "tree")
        originals = {r.session_id: r.markdown for r in await eywa.list_handoffs(limit=1000)}
    other = MemorySettings(
        home=tmp_path / "other", claude_config_dir=tmp_path / "c2", codex_home=tmp_path / "x2", llm_enabled=False
    )
    async with await Eywa.open(other) as eywa2:
        report = await eywa2.import_dir(tmp_path / "tree")
        imported = {r.session_id: r for r in await eywa2.list_handoffs(limit=1000)}
    assert report.imported == n and not report.rejected
    assert set(originals) <= set(imported)
    some = next(iter(originals))
    assert imported[some].headline in originals[some]


async def _snapshot(eywa: Eywa) -> list[object]:
    queries = [
        "SELECT session_id, content_sha, extract_state FROM sessions ORDER BY 1",
        "SELECT session_id, markdown, ts FROM handoffs ORDER BY 1",
        "SELECT path, sha256, session_ids FROM sources ORDER BY 1",
        "SELECT * FROM postings ORDER BY 1, 2, 3, 4",
        "SELECT * FROM term_df ORDER BY 1, 2",
    ]
    out: list[object] = []
    for sql in queries:
        async with eywa.db.conn.execute(sql) as cur:
            out.append([tuple(r) for r in await cur.fetchall()])
    return out


@pytest.mark.slow
def test_100_mb_transcript_ingests_within_300_mb_rss(tmp_path: Path) -> None:
    from bench.synth_transcript import write_transcript

    big = tmp_path / "big.jsonl"
    write_transcript(big, 100 * 1024 * 1024)
    code = (
        "import re, sys\n"
        "from macupos.cli import main\n"
        "try:\n"
        "    main(['memory', 'ingest', sys.argv[1], '--quiet', '--no-llm'])\n"
        "except SystemExit as e:\n"
        "    assert not e.code, e.code\n"
        # VmHWM, not ru_maxrss: Linux carries ru_maxrss over from the forking parent (pytest) through exec.
        "print(int(re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1)) // 1024)\n"
    )
    env = {**os.environ, "MACUPOS_HOME": str(tmp_path / "home"), "HOME": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-c", code, str(big)], env=env, capture_output=True, text=True, timeout=600, check=False
    )
    assert out.returncode == 0, out.stderr
    peak_mb = int(out.stdout.split()[-1])
    assert peak_mb <= 300, f"peak RSS {peak_mb} MB"


async def test_linked_codex_rollout_becomes_a_subagent_of_its_claude_session(
    settings: MemorySettings, transcripts: Path
) -> None:
    codex = Path(__file__).parent / "fixtures" / "codex"
    async with await Eywa.open(settings) as eywa:
        await eywa.ingest([transcripts / "simonw", codex], use_llm=False)
        async with eywa.db.conn.execute("SELECT session_id FROM sessions WHERE kind = 'codex' ORDER BY 1") as cur:
            rollout = str((await cur.fetchone())[0])  # type: ignore[index]
        await eywa.link(rollout, parent_id="test-session-id")
        view = await eywa.show("test-session-id")
        async with eywa.db.conn.execute("SELECT count(*) FROM postings WHERE session_id = ?", (rollout,)) as cur:
            postings = (await cur.fetchone())[0]  # type: ignore[index]
        await eywa.ingest([codex], use_llm=False, force=True)  # a re-read keeps the link
        again = await eywa.show(rollout)
    assert rollout in view.subagents
    assert postings == 0
    assert again.session is not None and again.session.parent_id == "test-session-id"


async def test_sessions_whose_ids_differ_only_in_unsafe_characters_keep_their_own_files(
    settings: MemorySettings, tmp_path: Path
) -> None:
    folder = tmp_path / "clash"
    folder.mkdir()
    for name in ("notes v1", "notes_v1"):
        line = {
            "type": "user",
            "uuid": "u1",
            "timestamp": "2026-02-03T00:00:00Z",
            "message": {"role": "user", "content": f"from {name} about the walrus"},
        }
        (folder / f"{name}.jsonl").write_text(json.dumps(line) + "\n")
    async with await Eywa.open(settings) as eywa:
        await eywa.ingest([folder], use_llm=False)
        exported = await eywa.export_dir(tmp_path / "export")
        files = sorted((tmp_path / "export").rglob("*.md"))
        assert exported == 2 and len(files) == 2
        await eywa.forget("notes v1")
        left = [from_markdown(p.read_text()).session_id for p in settings.handoffs_dir.rglob("*.md")]
    assert left == ["notes_v1"]


async def test_an_import_that_changes_a_handoffs_date_moves_its_file(settings: MemorySettings, tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    async with await Eywa.open(settings) as eywa:
        for date in ("2026-01-03", "2026-03-02"):
            (tree / "s3.md").write_text(f"---\nsession_id: s3\ndate: {date}\nheadline: dated {date}\n---\nbody\n")
            await eywa.import_dir(tree)
        files = [p.relative_to(settings.handoffs_dir).as_posix() for p in settings.handoffs_dir.rglob("*.md")]
        assert files == ["2026/03/02/s3.md"]
        await eywa.forget("s3")
    assert not list(settings.handoffs_dir.rglob("*.md"))


async def test_a_lone_surrogate_in_a_transcript_is_replaced_and_loses_nothing_else(
    settings: MemorySettings, tmp_path: Path
) -> None:
    # "\ud83d" alone is valid JSON (a broken emoji, as JavaScript writes it) but not encodable as UTF-8.
    def line(sid: str, text: str) -> str:
        return user_line(sid, "u1", "2026-11-29T21:00:00Z", [{"type": "text", "text": text}]) + "\n"

    (tmp_path / "a.jsonl").write_text(line("broken-emoji", "fix surrogate \ud83d broken"))
    (tmp_path / "b.jsonl").write_text(line("fine", "a perfectly ordinary session about walruses"))
    async with await Eywa.open(settings) as eywa:
        report = await eywa.ingest([tmp_path / "a.jsonl", tmp_path / "b.jsonl"], use_llm=False)
        broken = await eywa.show("broken-emoji")
        fine = await eywa.show("fine")
    assert report.sessions_new == 2 and not report.unreadable
    assert broken.session is not None and "fix surrogate \ufffd broken" in broken.session.markdown
    assert fine.session is not None


async def test_one_extraction_run_gives_each_session_the_handoff_it_gets_on_its_own(
    settings: MemorySettings, transcripts: Path
) -> None:
    # A run looks each term's document frequency up once for all its sessions; one session at a time
    # looks them all up again. The handoffs (keywords ranked by that IDF among them) must not differ.
    async with await Eywa.open(settings) as eywa:
        await eywa.ingest([transcripts], use_llm=False)
        together = await _handoffs(eywa)
        for session_id in together:
            await extract_pending(eywa.db, settings, IngestReport(), use_llm=False, session_ids=[session_id])
        alone = await _handoffs(eywa)
    assert len(together) >= 15
    assert alone == together


async def _handoffs(eywa: Eywa) -> dict[str, str]:
    async with eywa.db.conn.execute("SELECT session_id, markdown FROM handoffs") as cur:
        return {str(sid): str(md) async for sid, md in cur}


async def test_a_session_in_two_files_stays_with_the_copy_that_goes_further_whatever_is_read_again(
    settings: MemorySettings, tmp_path: Path
) -> None:
    # A run stopped between the two files, or one that re-reads only one of them, must not hand the session
    # to the other copy: the next plain run skips both files as unchanged and would never take it back.
    folder = tmp_path / "twins"
    folder.mkdir()

    def line(n: int, text: str) -> str:
        return user_line("twin", f"u{n}", f"2026-02-03T00:0{n}:00Z", text)

    live, stale = folder / "a-live.jsonl", folder / "b-copy.jsonl"  # the stale copy sorts last
    stale.write_text(line(1, "the narwhal session, first message") + "\n")
    live.write_text(stale.read_text() + line(2, "and a later message about the walrus") + "\n")
    async with await Eywa.open(settings) as eywa:
        await eywa.ingest([folder], use_llm=False)
        kept = (await eywa.show("twin")).session
        again = await eywa.ingest([stale], use_llm=False, force=True)
        after = (await eywa.show("twin")).session
        with live.open("a") as fh:  # the live copy grows; a plain run reads only it
            fh.write(line(3, "a third message about the dugong") + "\n")
        grown = await eywa.ingest([folder], use_llm=False)
        now = (await eywa.show("twin")).session
        live.unlink()  # with the further copy gone, the other one is the session's when it is read again
        alone = await eywa.ingest([stale], use_llm=False, force=True)
        last = (await eywa.show("twin")).session
    assert kept is not None and "walrus" in kept.markdown and kept.source_path == str(live)
    assert after is not None and after.markdown == kept.markdown and after.source_path == str(live)
    assert again.clashes == [("twin", str(live), str(stale))] and again.sessions_unchanged == 1
    assert now is not None and "dugong" in now.markdown and grown.sessions_updated == 1
    assert last is not None and "walrus" not in last.markdown and alone.sessions_updated == 1 and not alone.clashes


async def test_a_relative_path_is_stored_as_one_that_leads_to_the_file_from_anywhere(
    settings: MemorySettings, transcripts: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(transcripts.parent)
    async with await Eywa.open(settings) as eywa:
        await eywa.ingest([Path(transcripts.name) / "simonw"], use_llm=False)
        view = await eywa.show("test-session-id")
    assert view.session is not None and Path(view.session.source_path).is_absolute()
    assert Path(view.session.source_path).is_file()

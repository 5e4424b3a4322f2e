"""`RemoteEywa` and `RemoteFacts` against a real memory service: the same methods and dataclasses as the
local memory, transcripts redacted before they leave, errors as one typed line without the key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memory.errors import SessionNotFoundError, SettingsError
from memory.factory import open_facts, open_memory
from memory.remote.client import RemoteEywa
from memory.remote.facts import RemoteFacts, tcl_word
from memory.remote.http import RemoteMemoryError, RemoteUnsupportedError
from memory.settings import MemorySettings
from tests.memory.remote_harness import client_settings, remote_service
from tests.service.conftest import Server, claude_lines, transcript_bytes

SECRET = "ghp_" + "Z7x9Qm2Lk4Vb8Nc1Rt6Yp3Ws5Hd0Jf2Ga7Ke"  # a GitHub token's shape: the redactor knows it


def write_session(settings: MemorySettings, session_id: str, *words: str, day: str = "2026-03-02") -> Path:
    """A Claude Code transcript where Claude Code keeps it (the projects folder of the client)."""
    path = settings.claude_projects_dir / "-srv-app" / f"{session_id}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(transcript_bytes(session_id, *words, day=day))
    return path


def spooled(srv: Server, tenant: str = "alice") -> list[Path]:
    return sorted(p for p in (srv.home / "tenants" / tenant / "spool" / "transcripts").rglob("*") if p.is_file())


def test_settings_take_the_service_from_the_environment_or_the_config_and_never_show_the_key(tmp_path: Path) -> None:
    key = "mpk_0123456789ab_" + "k" * 43
    env = {"HOME": str(tmp_path), "MACUPOS_HOME": str(tmp_path / "h")}
    s = MemorySettings.from_env(env | {"MACUPOS_MEMORY_URL": "https://mem.example.com/", "MACUPOS_API_KEY": key})
    assert s.remote and s.memory_url == "https://mem.example.com" and s.api_key == key
    assert key not in repr(s)
    (tmp_path / "h").mkdir()
    (tmp_path / "h" / "config.toml").write_text(f'[memory]\nurl = "http://127.0.0.1:8750"\napi_key = "{key}"\n')
    assert MemorySettings.from_env(env).memory_url == "http://127.0.0.1:8750"
    assert not MemorySettings.from_env(env | {"MACUPOS_HOME": str(tmp_path / "other")}).remote
    for url, key_value, why in (
        ("http://127.0.0.1:8750", "", "is required"),
        ("ftp://x", key, "not an http"),
        ("https://user:pw@mem.example.com", key, "must not hold a user"),
        ("https://mem.example.com/?a=1", key, "query"),
        ("https://mem.example.com", key + " x", "spaces"),
    ):
        with pytest.raises(SettingsError) as caught:
            MemorySettings.from_env(
                env | {"MACUPOS_HOME": str(tmp_path / "o"), "MACUPOS_MEMORY_URL": url, "MACUPOS_API_KEY": key_value}
            )
        assert why in str(caught.value) and key not in str(caught.value) and "pw" not in str(caught.value)


async def test_ingest_sends_redacted_transcripts_and_recall_answers_like_the_local_memory(tmp_path: Path) -> None:
    async with remote_service(tmp_path) as (srv, settings):
        write_session(settings, "s1", "zebra", "quokka", f"token {SECRET}")
        write_session(settings, "s2", "walrus", "penguin", day="2026-03-03")
        async with await open_memory(settings) as eywa:
            assert isinstance(eywa, RemoteEywa)
            report = await eywa.ingest()
            assert (report.files_seen, report.sessions_new, report.handoffs_extracted) == (2, 2, 2)
            assert sorted(report.session_ids) == ["s1", "s2"] and eywa.outbox.entries() == []

            g = await eywa.get("zebra")
            assert g.results[0].session_id == "s1" and "zebra" in g.markdowns["s1"]
            assert "[[RECALLED" in g.text and g.results[0].explanation.matched
            hits = await eywa.search("walrus", 5)
            assert [h.session_id for h in hits] == ["s2"]
            view = await eywa.show("s1")
            assert view.session is not None and "quokka" in view.session.markdown
            assert view.handoff is not None and view.handoff.session_id == "s1"
            rows = await eywa.list_handoffs(limit=1)
            assert [r.session_id for r in rows] == ["s2"]
            after = await eywa.list_handoffs(limit=5, after=(rows[0].ts, rows[0].session_id))
            assert [r.session_id for r in after] == ["s1"]
            stats = await eywa.stats()
            assert stats["tenant"] == "alice" and stats["handoffs"] == 2 and stats["outbox"] == 0
            assert "database" not in stats and settings.api_key not in json.dumps(stats)
        spool = b"".join(p.read_bytes() for p in spooled(srv))
        assert b"zebra" in spool and SECRET.encode() not in spool  # redacted before it left


async def test_an_unchanged_file_is_not_sent_again_and_a_grown_one_is_sent_under_its_name(tmp_path: Path) -> None:
    async with remote_service(tmp_path) as (srv, settings):
        path = write_session(settings, "s1", "zebra")
        async with await RemoteEywa.open(settings) as eywa:
            await eywa.ingest()
            again = await eywa.ingest()
            assert (again.files_seen, again.files_unchanged) == (1, 1)
            assert eywa.last_flush is not None and eywa.last_flush.sent == []
            with path.open("ab") as fh:
                fh.write(
                    ("\n".join(claude_lines("s1", [("and the narwhal?", "narwhal done")], start=5)) + "\n").encode()
                )
            grown = await eywa.ingest([path])
            assert (grown.sessions_new, grown.sessions_updated) == (0, 1)
            assert (await eywa.search("narwhal", 3))[0].session_id == "s1"
        assert len(spooled(srv)) == 1  # the same name: the same file on the server


async def test_forget_show_and_extract_say_what_the_service_says(tmp_path: Path) -> None:
    async with remote_service(tmp_path) as (_, settings):
        path = write_session(settings, "s1", "zebra")
        async with await RemoteEywa.open(settings) as eywa:
            rows = await eywa.extract(transcript_path=path)
            assert [r.session_id for r in rows] == ["s1"] and "zebra" in rows[0].markdown
            with pytest.raises(RemoteUnsupportedError, match="send its transcript again"):
                await eywa.extract("s1")
            with pytest.raises(RemoteUnsupportedError):
                await eywa.link("codex-x", parent_id="s1")
            assert await eywa.forget("s1") == ["s1"]
            with pytest.raises(SessionNotFoundError):
                await eywa.show("s1")
            with pytest.raises(SessionNotFoundError):
                await eywa.forget("nope")


async def test_export_and_import_round_trip_through_the_service(tmp_path: Path) -> None:
    async with remote_service(tmp_path) as (_, settings):
        write_session(settings, "s1", "zebra")
        async with await RemoteEywa.open(settings) as eywa:
            await eywa.ingest()
            out = tmp_path / "export"
            assert await eywa.export_dir(out) == 1
            (file,) = list(out.rglob("*.md"))
            assert file.relative_to(out).parts[:3] == ("2026", "03", "02")
            text = file.read_text()
            file.write_text(text.replace("headline: Look at zebra", "headline: The zebra was a horse, look", 1))
            (out / "2026" / "junk.md").write_text("not a handoff")
            report = await eywa.import_dir(out)
            assert report.imported == 1 and len(report.rejected) == 1
            handoff = (await eywa.show("s1")).handoff
            assert handoff is not None and handoff.headline.startswith("The zebra was a horse")
            bad = tmp_path / "file"
            bad.write_text("x")
            with pytest.raises(Exception, match="not a folder"):
                await eywa.export_dir(bad)


async def test_facts_scripts_and_the_tier_run_on_the_service(tmp_path: Path) -> None:
    async with remote_service(tmp_path) as (_, settings):
        facts = await open_facts(settings)
        try:
            assert isinstance(facts, RemoteFacts)
            odd = 'Helix {neo}vim $HOME [x] "q" ; # \\ end\nline'
            await facts.remember("editor", "user", "Fact", {"predicate": "favorite-editor", "object": odd})
            result = await facts.run_script("respond [dict get [lindex [recall editor] 0] object]")
            assert result.ok and result.text == odd  # every Tcl special character arrived as it was
            failed = await facts.run_script("set x 1\nnosuchcommand")
            assert not failed.ok and failed.line == 2 and failed.text.startswith("error: ")
            tier = await facts.tiered_injection()
            assert any("favorite-editor" in line for line in tier)
            assert "favorite-editor" in await facts.export_snapshot()
            assert (await facts.world())["memories"] == 1
            with pytest.raises(RemoteUnsupportedError, match="memory rebuild"):
                await facts.rebuild()
        finally:
            await facts.close()


def test_tcl_words_keep_their_text() -> None:
    assert tcl_word("") == "{}" and tcl_word("plain-word_1.2") == "plain-word_1.2"
    assert tcl_word("a b") == "a\\ b" and tcl_word("$x[y]") == "\\$x\\[y\\]" and tcl_word("a\nb") == "a\\nb"


async def test_a_bad_key_is_one_line_naming_the_fix_and_never_the_key(tmp_path: Path) -> None:
    async with remote_service(tmp_path) as (srv, _):
        bogus = "mpk_000000000000_" + "x" * 43
        async with await RemoteEywa.open(client_settings(tmp_path, srv.url, bogus)) as eywa:
            with pytest.raises(RemoteMemoryError) as caught:
                await eywa.get("zebra")
        err = caught.value
        assert err.status == 401 and "unknown or revoked" in str(err) and "macupos serve keys create" in str(err)
        assert bogus not in str(err) and "\n" not in str(err)

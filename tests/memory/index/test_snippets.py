"""Detail recall's snippets: FTS5's own over a short session, a bounded passage of the best window over a huge
one (snippet() over a whole 10 MB session took minutes), with the ranking of bm25 over whole sessions."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from memory.index import postings as index
from memory.index.content_term import fts_quote
from memory.index.retrieval import search_content
from memory.index.snippets import SNIPPET_TEXT_MAX, passages, window_texts
from memory.storage.database import Database

FILLER = "the exporter streams rows to the warehouse, retries on timeouts and logs each batch it wrote. " * 30


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    database = await Database.open(tmp_path / "m.db")
    yield database
    await database.close()


def rendered(session_id: str, turns: list[str], *, started: str = "2026-03-02") -> str:
    """A body shaped as memory/render/markdown.py writes it: a header, then one ``## `` heading a turn."""
    head = f"# Session {session_id}\n\n- session: `{session_id}`\n- started: {started} 10:00:00 +00:00\n"
    heading = ("User", "Assistant")
    return head + "".join(f"\n## {heading[i % 2]} · 10:00:00\n\n{t}\n" for i, t in enumerate(turns))


async def put(db: Database, session_id: str, body: str, *, kind: str = "main", parent_id: str = "") -> None:
    async with db.write() as conn:
        await index.index_content(conn, session_id=session_id, kind=kind, parent_id=parent_id, body=body)


async def bm25_order(db: Database, query: str) -> list[tuple[str, float]]:
    """Sessions and scores as bm25 over whole sessions ranks them: what search answered before snippets changed."""
    match = " OR ".join(fts_quote(w) for w in query.split())
    rows = await db.conn.execute_fetchall(
        "SELECT session_id, bm25(content) FROM content WHERE content MATCH ? ORDER BY rank LIMIT 10", (match,)
    )
    return [(str(s), -float(b)) for s, b in rows]


async def content_row(db: Database, session_id: str) -> int:
    [(row,)] = await db.conn.execute_fetchall("SELECT row FROM content_rows WHERE session_id = ?", (session_id,))
    return int(row)


async def test_a_short_session_keeps_the_snippet_fts5_gives_its_whole_text(db: Database) -> None:
    body = rendered("short", ["fix the flaky timeout in the schema migration", "done: the schema test passes"])
    assert len(body) <= SNIPPET_TEXT_MAX
    await put(db, "short", body)
    [hit] = await search_content(db.conn, "schema timeout")
    [(whole,)] = await db.conn.execute_fetchall(
        "SELECT snippet(content, 3, '[', ']', '…', 16) FROM content WHERE content MATCH ?", ('"schema" OR "timeout"',)
    )
    assert hit.snippet == whole and "[timeout]" in whole


async def test_a_huge_session_is_snippeted_from_a_bounded_passage_of_its_best_window(db: Database) -> None:
    # 2 MB in which "timeouts" and "the" occur ~40,000 times each: snippet() over it all is quadratic in them.
    turns = [f"turn {i}: {FILLER}" for i in range(720)]
    turns[500] += " and then a quokka ate the timeout schema."
    await put(db, "huge", rendered("huge", turns))
    await put(db, "small", rendered("small", ["a quokka, once", "a timeout, once"]))

    hits = await search_content(db.conn, "quokka timeouts")
    assert [(h.session_id, h.score) for h in hits] == await bm25_order(db, "quokka timeouts")  # ranking unchanged
    huge = next(h for h in hits if h.session_id == "huge")
    assert "[quokka]" in huge.snippet and huge.snippet.startswith("…") and huge.snippet.endswith("…")

    # What snippet() reads: the session's two best windows (four turns each), in passages of bounded size.
    windows = await window_texts(db.conn, "huge", await content_row(db, "huge"), '"quokka" OR "timeouts"')
    assert len(windows) in (1, 2) and "quokka" in windows[0].text
    assert all(len(w.text) < 4 * (len(FILLER) + 100) for w in windows)
    found = passages(windows, ["quokka", "timeouts"])
    assert found and all(len(p.text) <= SNIPPET_TEXT_MAX for p in found)


async def test_one_giant_turn_is_narrowed_to_where_the_words_are(db: Database) -> None:
    # One heading over 2 MB (thousands of tool calls in one assistant turn, or a session indexed before windows
    # existed): its one window is narrowed before it is cut into passages.
    text = "\n".join(f"line {i}: {FILLER[:400]}" for i in range(5000))
    at = text.index("\n", int(len(text) * 0.8))
    text = text[:at] + "\nthe happy quokka logged a timeout here." + text[at:]
    await put(db, "giant", rendered("giant", [text]))

    [hit] = await search_content(db.conn, "quokkas happiness")  # stems: the text says "quokka", "happy"
    assert "[quokka]" in hit.snippet and "[happy]" in hit.snippet

    [window] = await window_texts(db.conn, "giant", await content_row(db, "giant"), '"quokkas" OR "happiness"')
    assert len(window.text) > 2_000_000
    found = passages([window], ["quokkas", "happiness"])
    assert sum(len(p.text) for p in found) <= 4 * SNIPPET_TEXT_MAX
    assert any("happy quokka" in p.text for p in found)


async def test_a_long_subagent_is_snippeted_from_its_own_text(db: Database) -> None:
    parent = rendered("p", [f"parent turn {i}: {FILLER}" for i in range(12)])
    child = rendered("p/agent-1", [f"agent turn {i}: {FILLER}" for i in range(12)])
    child = child.replace("agent turn 9:", "agent turn 9: the frobnicator warehouse")
    await put(db, "p", parent)
    await put(db, "p/agent-1", child, kind="subagent", parent_id="p")

    hits = {h.session_id: h for h in await search_content(db.conn, "frobnicator warehouse")}
    assert set(hits) == {"p", "p/agent-1"}
    assert hits["p/agent-1"].parent_id == "p" and "[frobnicator]" in hits["p/agent-1"].snippet
    assert "[warehouse]" in hits["p"].snippet and "frobnicator" not in hits["p"].snippet


async def test_a_window_matched_only_by_its_date_gives_way_to_one_the_text_matches(db: Database) -> None:
    # The first window is indexed with the session's date in words ("Monday 8 May 2023"), the text is not.
    turns = [f"turn {i}: {FILLER}" for i in range(12)]
    turns[9] += " as the may release notes say. " + FILLER * 2  # a longer window: the dated one ranks first
    await put(db, "dated", rendered("dated", turns, started="2023-05-08"))

    [first, _] = await window_texts(db.conn, "dated", await content_row(db, "dated"), '"may"')
    assert "may" not in first.text.lower()  # the best window has the word only in its date
    [hit] = await search_content(db.conn, "May")
    assert "[may]" in hit.snippet

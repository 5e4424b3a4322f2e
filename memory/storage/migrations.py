"""Numbered, append-only schema migrations. Never edit a released entry: add the next one."""

from __future__ import annotations

import sqlite3

__all__ = ["MIGRATIONS", "split_sql"]

# Each entry upgrades the schema from version i to i + 1 (PRAGMA user_version).
MIGRATIONS: tuple[str, ...] = (
    # 1: sessions, handoffs, inverted indexes, full-text content
    """
    CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);

    -- One row per transcript file ingested: enough to skip an unchanged file and to resume a grown one.
    CREATE TABLE sources(
        path TEXT PRIMARY KEY,
        size INTEGER NOT NULL,
        mtime_ns INTEGER NOT NULL,
        sha256 TEXT NOT NULL,
        session_ids TEXT NOT NULL,          -- JSON list
        lines_skipped INTEGER NOT NULL DEFAULT 0,
        ingested_at TEXT NOT NULL
    );

    CREATE TABLE sessions(
        session_id TEXT PRIMARY KEY,
        kind TEXT NOT NULL,                 -- main | subagent | codex
        parent_id TEXT NOT NULL DEFAULT '',
        source_path TEXT NOT NULL,
        cwd TEXT NOT NULL DEFAULT '',
        git_branch TEXT NOT NULL DEFAULT '',
        title TEXT NOT NULL DEFAULT '',
        model TEXT NOT NULL DEFAULT '',
        started_at TEXT NOT NULL DEFAULT '',
        ended_at TEXT NOT NULL DEFAULT '',
        duration_min REAL NOT NULL DEFAULT 0,
        n_entries INTEGER NOT NULL DEFAULT 0,
        markdown TEXT NOT NULL,
        content_sha TEXT NOT NULL,
        extract_state TEXT NOT NULL DEFAULT 'pending',   -- pending | done | failed
        updated_at TEXT NOT NULL
    );
    CREATE INDEX sessions_parent ON sessions(parent_id);
    CREATE INDEX sessions_extract ON sessions(extract_state);

    CREATE TABLE handoffs(
        session_id TEXT PRIMARY KEY,
        kind TEXT NOT NULL,
        parent_id TEXT NOT NULL DEFAULT '',
        ts REAL NOT NULL,                   -- epoch seconds of `date`, for recency
        date TEXT NOT NULL,
        duration_min REAL NOT NULL DEFAULT 0,
        substance INTEGER NOT NULL,
        headline TEXT NOT NULL,
        projects TEXT NOT NULL,             -- JSON list
        keywords TEXT NOT NULL,             -- JSON list
        markdown TEXT NOT NULL,             -- the whole handoff file, frontmatter included
        source TEXT NOT NULL,               -- llm | fallback | import | correction
        review TEXT NOT NULL DEFAULT 'pending',   -- pending | kept
        indexed INTEGER NOT NULL DEFAULT 0, -- 1 when its terms are in `postings`
        updated_at TEXT NOT NULL
    );
    CREATE INDEX handoffs_ts ON handoffs(ts);

    -- Inverted indexes. field 0 = project, 1 = keyword. Posting lists are ordered newest first
    -- within a term so retrieval can stop early (score bounds fall with age).
    CREATE TABLE postings(
        field INTEGER NOT NULL,
        term TEXT NOT NULL,
        ts REAL NOT NULL,
        session_id TEXT NOT NULL,
        PRIMARY KEY(field, term, ts, session_id)
    ) WITHOUT ROWID;
    CREATE INDEX postings_session ON postings(session_id);
    CREATE TABLE term_df(
        field INTEGER NOT NULL,
        term TEXT NOT NULL,
        df INTEGER NOT NULL,
        PRIMARY KEY(field, term)
    ) WITHOUT ROWID;

    -- Detail recall over everything said in a session (subagents included, linked by parent_id).
    CREATE VIRTUAL TABLE content USING fts5(
        session_id UNINDEXED, kind UNINDEXED, parent_id UNINDEXED, body,
        tokenize = 'porter unicode61'
    );
    CREATE VIRTUAL TABLE content_vocab USING fts5vocab(content, 'row');

    -- Sessions the owner told us to forget: a later ingest of the same transcript leaves them out.
    CREATE TABLE forgotten(session_id TEXT PRIMARY KEY, at TEXT NOT NULL) WITHOUT ROWID;

    -- Lines skipped by the last ingest of each file, for `stats` and the ingest report.
    CREATE TABLE problems(
        path TEXT NOT NULL,
        line_no INTEGER NOT NULL,
        reason TEXT NOT NULL,
        PRIMARY KEY(path, line_no)
    ) WITHOUT ROWID;
    """,
    # 2: structured facts (memory/facts): typed memories, full-text over their words, applied event ids
    """
    -- One row per memory. Decay is derived on read from ts_ms and access_count, never stored.
    CREATE TABLE facts(
        id TEXT PRIMARY KEY,
        subject TEXT NOT NULL,              -- a memory id or a concept (a permanent anchor)
        ctype TEXT NOT NULL,                -- component type: Fact | UserPreference | Relationship | ...
        fields TEXT NOT NULL,               -- JSON object of the component's fields
        target TEXT NOT NULL DEFAULT '',    -- Relationship target, for graph walks and concept lookups
        via_link INTEGER NOT NULL DEFAULT 0,  -- 1 when made by `link` (the snapshot writes it back as link)
        created_ms INTEGER NOT NULL,
        ts_ms INTEGER NOT NULL,             -- decay clock start: creation, or the last revive
        last_access_ms INTEGER NOT NULL,
        access_count INTEGER NOT NULL DEFAULT 0,
        state TEXT NOT NULL DEFAULT 'Active',   -- Active | Dormant | Archived
        sweep_marked_ms INTEGER,            -- first sweep pass; a later pass past the grace deletes
        provenance TEXT NOT NULL DEFAULT ''
    );
    CREATE INDEX facts_subject ON facts(subject);
    CREATE INDEX facts_target ON facts(target);
    CREATE INDEX facts_state ON facts(state);
    CREATE VIRTUAL TABLE facts_fts USING fts5(id UNINDEXED, body, tokenize = 'unicode61');

    -- Event ids already applied, so replaying an event log (or a git-pulled one) twice is a no-op.
    CREATE TABLE applied_events(
        id TEXT PRIMARY KEY,
        at_ms INTEGER NOT NULL,
        origin TEXT NOT NULL
    ) WITHOUT ROWID;
    """,
    # 3: the relay's cost ledger (written by relay/ledger.py; the table lives with the sessions it prices)
    """
    -- The relay's cost ledger: one row per Claude run or Codex turn.
    CREATE TABLE ledger(
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        ts TEXT NOT NULL,                       -- ISO 8601 UTC, when the row was recorded
        engine TEXT NOT NULL,                   -- claude | codex
        session_id TEXT NOT NULL DEFAULT '',    -- the Claude session the run belongs to
        thread_id TEXT NOT NULL DEFAULT '',     -- Codex thread id ('' for Claude rows)
        run_id TEXT NOT NULL DEFAULT '',        -- RPA run id ('' outside a run)
        stage TEXT NOT NULL DEFAULT '',         -- research | plan | audit | execute | review | fix | ''
        model TEXT NOT NULL DEFAULT '',
        input_tokens INTEGER NOT NULL DEFAULT 0,
        output_tokens INTEGER NOT NULL DEFAULT 0,
        cache_read_tokens INTEGER NOT NULL DEFAULT 0,
        cache_write_tokens INTEGER NOT NULL DEFAULT 0,
        cost_usd REAL,                          -- NULL when the engine reports no price
        duration_s REAL NOT NULL DEFAULT 0,
        rollout_path TEXT NOT NULL DEFAULT ''   -- Codex rollout file, linked to session_id as a subagent
    );
    CREATE INDEX ledger_session ON ledger(session_id);
    CREATE INDEX ledger_run ON ledger(run_id);
    CREATE INDEX ledger_thread ON ledger(thread_id);
    """,
    # 4: content chunks for scoring (turn windows), and content_rows instead of meta 'content_rowid:' keys
    """
    -- The `content` row of each session (FTS5 cannot look a row up by an UNINDEXED column without a scan).
    CREATE TABLE content_rows(session_id TEXT PRIMARY KEY, row INTEGER NOT NULL) WITHOUT ROWID;
    INSERT INTO content_rows(session_id, row)
        SELECT substr(key, 15), CAST(value AS INTEGER) FROM meta WHERE key LIKE 'content_rowid:%';
    DELETE FROM meta WHERE key LIKE 'content_rowid:%';

    -- A session's text cut into windows of turns, scored per window (memory/index/postings.py). The window text is
    -- prefix + the session's `content` body[start:stop], so chunk_fts stores no text of its own.
    CREATE TABLE chunks(
        id INTEGER PRIMARY KEY,             -- rowid in chunk_fts
        session_id TEXT NOT NULL,           -- the session whose text it is (subagents included)
        handoff_id TEXT NOT NULL,           -- the handoff credited: a subagent's parent, else the session
        start INTEGER NOT NULL,
        stop INTEGER NOT NULL,
        prefix TEXT NOT NULL DEFAULT ''     -- words indexed before the span (the session's date, in words)
    );
    CREATE INDEX chunks_session ON chunks(session_id);
    CREATE VIRTUAL TABLE chunk_fts USING fts5(body, content = '', tokenize = 'porter unicode61');
    -- Sessions indexed before chunks existed are one chunk each until re-ingested (`ingest --force`).
    INSERT INTO chunks(id, session_id, handoff_id, start, stop)
        SELECT rowid, session_id, CASE WHEN kind = 'subagent' AND parent_id <> '' THEN parent_id
        ELSE session_id END, 0, 9223372036854775807 FROM content;
    INSERT INTO chunk_fts(rowid, body) SELECT rowid, body FROM content;
    """,
    # 5: postings and windows carry what scoring needs, so a query reads no handoffs rows to score
    """
    CREATE TABLE postings_v5(
        field INTEGER NOT NULL,
        term TEXT NOT NULL,
        ts REAL NOT NULL,
        session_id TEXT NOT NULL,
        dur REAL NOT NULL DEFAULT 0,        -- the handoff's duration_min when it was posted
        PRIMARY KEY(field, term, ts, session_id)
    ) WITHOUT ROWID;
    INSERT INTO postings_v5(field, term, ts, session_id, dur)
        SELECT p.field, p.term, p.ts, p.session_id, COALESCE(h.duration_min, 0.0)
        FROM postings AS p LEFT JOIN handoffs AS h ON h.session_id = p.session_id;
    DROP TABLE postings;
    ALTER TABLE postings_v5 RENAME TO postings;
    CREATE INDEX postings_session ON postings(session_id);

    -- Each window knows its session's `content` row and its credited handoff's posted date and duration
    -- (ts NULL while that handoff is not posted), kept in step by memory/index/postings.py.
    ALTER TABLE chunks ADD COLUMN row INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE chunks ADD COLUMN ts REAL;
    ALTER TABLE chunks ADD COLUMN dur REAL NOT NULL DEFAULT 0;
    UPDATE chunks SET row = COALESCE((SELECT r.row FROM content_rows AS r WHERE r.session_id = chunks.session_id), 0);
    UPDATE chunks SET (ts, dur) = (SELECT p.ts, p.dur FROM postings AS p
        WHERE p.field = 2 AND p.term = '' AND p.session_id = chunks.handoff_id)
        WHERE EXISTS (SELECT 1 FROM postings AS p
            WHERE p.field = 2 AND p.term = '' AND p.session_id = chunks.handoff_id);
    CREATE INDEX chunks_handoff ON chunks(handoff_id);
    """,
    # 6: the newest event of an origin in one seek (memory/facts/engine.py stamps new events after it)
    """
    CREATE INDEX applied_events_origin_at ON applied_events(origin, at_ms);
    """,
    # 7: who made a memory decision (memory/handoffs/review.py), and when
    """
    -- Who kept or corrected the handoff, as the deciding page or chat names them ('@alice', 'telegram Ann',
    -- 'owner'), and when (ISO 8601 UTC); '' when nobody is known (pending, an import, a decision made before).
    -- Kept here alone, not in the handoff file's frontmatter: the file is what the session said (the mirror,
    -- exports and imports carry it), the review is the owner's answer to it, like `review` itself.
    ALTER TABLE handoffs ADD COLUMN reviewed_by TEXT NOT NULL DEFAULT '';
    ALTER TABLE handoffs ADD COLUMN reviewed_at TEXT NOT NULL DEFAULT '';
    -- Who told memory to forget the session ('' when unknown); `at` already says when.
    ALTER TABLE forgotten ADD COLUMN forgotten_by TEXT NOT NULL DEFAULT '';
    """,
)


def split_sql(script: str) -> list[str]:
    """Split a migration into statements; sqlite3.complete_statement keeps triggers and strings intact."""
    statements: list[str] = []
    buf = ""
    for line in script.splitlines(keepends=True):
        if not buf and line.strip().startswith("--"):
            continue
        buf += line
        if sqlite3.complete_statement(buf):
            if buf.strip():
                statements.append(buf.strip())
            buf = ""
    if buf.strip():
        statements.append(buf.strip())
    return statements

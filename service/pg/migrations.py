"""Numbered, append-only migrations of the PostgreSQL schema ``macupos`` (service/pg). Never edit a released
entry: add the next one. A memory schema migration (memory/storage/migrations.py) that adds a table or a column adds
it here too, and to memory/replica/rows.py; tests/service/pg/test_schema.py compares the three.

- ``info``: this database's id (a replica remembers whose copy it is) and the memory schema it mirrors.
- ``tenants`` and ``api_keys``: the directory, read before a tenant is known (the key check), so outside
  the row-level wall. ``tenants.seq`` is the tenant's change sequence: every write section takes the row
  lock, bumps it, and stamps the rows it writes with it.
- One table per mirror of memory/replica/rows.py, ``tenant_id`` first in every primary key (the column a
  Citus-style distributed setup shards on), ``seq`` the change that last wrote the row's group.
- ``deletions``: groups that went (a forgotten session's rows), with the change that removed them.
- ``facts_events``: the facts event log, one row per event line.

Every tenant table has row-level security, forced on its owner too: a session sees and writes only the rows
of the tenant named by ``macupos.tenant`` (``set_config(..., true)``, per transaction), as role
``macupos_tenant``; without the setting it sees none.
"""

from __future__ import annotations

__all__ = ["LOCK_KEY", "MIGRATIONS", "TENANT_ROLE", "TENANT_TABLES"]

LOCK_KEY = 7_261_001  # pg_advisory_xact_lock key: two processes starting at once migrate one after the other
TENANT_ROLE = "macupos_tenant"
# Every table behind the tenant wall (the memory mirrors, then deletions and the facts event log).
TENANT_TABLES: tuple[str, ...] = (
    *("meta", "sources", "sessions", "handoffs", "postings", "term_df", "content", "chunks", "forgotten"),
    *("problems", "facts", "facts_fts", "applied_events", "ledger", "deletions", "facts_events"),
)

MIGRATIONS: tuple[str, ...] = (
    # 1: the directory, the mirrors of memory schema 6, deletions, facts events, the tenant wall
    """
    CREATE TABLE macupos.info(key text PRIMARY KEY, value text NOT NULL);
    INSERT INTO macupos.info(key, value) VALUES ('database_id', gen_random_uuid()::text), ('memory_schema', '6');

    CREATE TABLE macupos.tenants(
        tenant_id text PRIMARY KEY,
        origin text NOT NULL CHECK (origin IN ('cli', 'register', 'migrate')),
        created_at float8 NOT NULL,
        seq bigint NOT NULL DEFAULT 0,
        generation text NOT NULL DEFAULT gen_random_uuid()::text
    );
    CREATE TABLE macupos.api_keys(
        key_id text PRIMARY KEY,
        tenant_id text NOT NULL REFERENCES macupos.tenants(tenant_id),
        scope text NOT NULL CHECK (scope IN ('read', 'write', 'admin')),
        sha256 text NOT NULL,
        label text NOT NULL DEFAULT '',
        created_at float8 NOT NULL,
        revoked_at float8
    );
    CREATE INDEX api_keys_tenant ON macupos.api_keys(tenant_id);

    CREATE TABLE macupos.meta(
        tenant_id text NOT NULL, key text NOT NULL, value text NOT NULL, seq bigint NOT NULL,
        PRIMARY KEY(tenant_id, key)
    );
    CREATE INDEX meta_seq ON macupos.meta(tenant_id, seq);
    CREATE TABLE macupos.sources(
        tenant_id text NOT NULL, path text NOT NULL, size bigint NOT NULL, mtime_ns bigint NOT NULL,
        sha256 text NOT NULL, session_ids text NOT NULL, lines_skipped bigint NOT NULL,
        ingested_at text NOT NULL, seq bigint NOT NULL, PRIMARY KEY(tenant_id, path)
    );
    CREATE INDEX sources_seq ON macupos.sources(tenant_id, seq);
    CREATE TABLE macupos.sessions(
        tenant_id text NOT NULL, session_id text NOT NULL, kind text NOT NULL, parent_id text NOT NULL,
        source_path text NOT NULL, cwd text NOT NULL, git_branch text NOT NULL, title text NOT NULL,
        model text NOT NULL, started_at text NOT NULL, ended_at text NOT NULL, duration_min float8 NOT NULL,
        n_entries bigint NOT NULL, markdown text NOT NULL, content_sha text NOT NULL,
        extract_state text NOT NULL, updated_at text NOT NULL, seq bigint NOT NULL,
        PRIMARY KEY(tenant_id, session_id)
    );
    CREATE INDEX sessions_seq ON macupos.sessions(tenant_id, seq);
    CREATE TABLE macupos.handoffs(
        tenant_id text NOT NULL, session_id text NOT NULL, kind text NOT NULL, parent_id text NOT NULL,
        ts float8 NOT NULL, date text NOT NULL, duration_min float8 NOT NULL, substance bigint NOT NULL,
        headline text NOT NULL, projects text NOT NULL, keywords text NOT NULL, markdown text NOT NULL,
        source text NOT NULL, review text NOT NULL, indexed bigint NOT NULL, updated_at text NOT NULL,
        seq bigint NOT NULL, PRIMARY KEY(tenant_id, session_id)
    );
    CREATE INDEX handoffs_seq ON macupos.handoffs(tenant_id, seq);
    CREATE TABLE macupos.postings(
        tenant_id text NOT NULL, session_id text NOT NULL, field bigint NOT NULL, term text NOT NULL,
        ts float8 NOT NULL, dur float8 NOT NULL, seq bigint NOT NULL,
        PRIMARY KEY(tenant_id, field, term, ts, session_id)
    );
    CREATE INDEX postings_seq ON macupos.postings(tenant_id, seq);
    CREATE INDEX postings_group ON macupos.postings(tenant_id, session_id);
    CREATE TABLE macupos.term_df(
        tenant_id text NOT NULL, field bigint NOT NULL, term text NOT NULL, df bigint NOT NULL,
        seq bigint NOT NULL, PRIMARY KEY(tenant_id, field, term)
    );
    CREATE INDEX term_df_seq ON macupos.term_df(tenant_id, seq);
    CREATE TABLE macupos.content(
        tenant_id text NOT NULL, session_id text NOT NULL, row bigint NOT NULL, kind text NOT NULL,
        parent_id text NOT NULL, body text NOT NULL, seq bigint NOT NULL,
        PRIMARY KEY(tenant_id, session_id)
    );
    CREATE INDEX content_seq ON macupos.content(tenant_id, seq);
    CREATE TABLE macupos.chunks(
        tenant_id text NOT NULL, session_id text NOT NULL, id bigint NOT NULL, handoff_id text NOT NULL,
        start bigint NOT NULL, stop bigint NOT NULL, prefix text NOT NULL, row bigint NOT NULL, ts float8,
        dur float8 NOT NULL, seq bigint NOT NULL, PRIMARY KEY(tenant_id, id)
    );
    CREATE INDEX chunks_seq ON macupos.chunks(tenant_id, seq);
    CREATE INDEX chunks_group ON macupos.chunks(tenant_id, session_id);
    CREATE TABLE macupos.forgotten(
        tenant_id text NOT NULL, session_id text NOT NULL, at text NOT NULL, seq bigint NOT NULL,
        PRIMARY KEY(tenant_id, session_id)
    );
    CREATE INDEX forgotten_seq ON macupos.forgotten(tenant_id, seq);
    CREATE TABLE macupos.problems(
        tenant_id text NOT NULL, path text NOT NULL, line_no bigint NOT NULL, reason text NOT NULL,
        seq bigint NOT NULL, PRIMARY KEY(tenant_id, path, line_no)
    );
    CREATE INDEX problems_seq ON macupos.problems(tenant_id, seq);
    CREATE TABLE macupos.facts(
        tenant_id text NOT NULL, id text NOT NULL, subject text NOT NULL, ctype text NOT NULL,
        fields text NOT NULL, target text NOT NULL, via_link bigint NOT NULL, created_ms bigint NOT NULL,
        ts_ms bigint NOT NULL, last_access_ms bigint NOT NULL, access_count bigint NOT NULL,
        state text NOT NULL, sweep_marked_ms bigint, provenance text NOT NULL, seq bigint NOT NULL,
        PRIMARY KEY(tenant_id, id)
    );
    CREATE INDEX facts_seq ON macupos.facts(tenant_id, seq);
    CREATE TABLE macupos.facts_fts(
        tenant_id text NOT NULL, id text NOT NULL, row bigint NOT NULL, body text NOT NULL,
        seq bigint NOT NULL, PRIMARY KEY(tenant_id, id, row)
    );
    CREATE INDEX facts_fts_seq ON macupos.facts_fts(tenant_id, seq);
    CREATE TABLE macupos.applied_events(
        tenant_id text NOT NULL, id text NOT NULL, at_ms bigint NOT NULL, origin text NOT NULL,
        seq bigint NOT NULL, PRIMARY KEY(tenant_id, id)
    );
    CREATE INDEX applied_events_seq ON macupos.applied_events(tenant_id, seq);
    CREATE TABLE macupos.ledger(
        tenant_id text NOT NULL, id bigint NOT NULL, ts text NOT NULL, engine text NOT NULL,
        session_id text NOT NULL, thread_id text NOT NULL, run_id text NOT NULL, stage text NOT NULL,
        model text NOT NULL, input_tokens bigint NOT NULL, output_tokens bigint NOT NULL,
        cache_read_tokens bigint NOT NULL, cache_write_tokens bigint NOT NULL, cost_usd float8,
        duration_s float8 NOT NULL, rollout_path text NOT NULL, seq bigint NOT NULL,
        PRIMARY KEY(tenant_id, id)
    );
    CREATE INDEX ledger_seq ON macupos.ledger(tenant_id, seq);

    CREATE TABLE macupos.deletions(
        tenant_id text NOT NULL, mirror text NOT NULL, key text NOT NULL, seq bigint NOT NULL,
        PRIMARY KEY(tenant_id, mirror, key)
    );
    CREATE INDEX deletions_seq ON macupos.deletions(tenant_id, seq);
    CREATE TABLE macupos.facts_events(
        tenant_id text NOT NULL, id text NOT NULL, at_ms bigint NOT NULL, origin text NOT NULL, line text NOT NULL,
        seq bigint NOT NULL, PRIMARY KEY(tenant_id, id)
    );
    CREATE INDEX facts_events_seq ON macupos.facts_events(tenant_id, seq);

    DO $$
    BEGIN
        CREATE ROLE macupos_tenant NOLOGIN;
    EXCEPTION WHEN duplicate_object THEN NULL;  -- another database of this cluster made it
    END $$;
    GRANT USAGE ON SCHEMA macupos TO macupos_tenant;
    GRANT macupos_tenant TO CURRENT_USER;
    DO $$
    DECLARE t text;
    BEGIN
        FOREACH t IN ARRAY ARRAY['meta', 'sources', 'sessions', 'handoffs', 'postings', 'term_df', 'content',
            'chunks', 'forgotten', 'problems', 'facts', 'facts_fts', 'applied_events', 'ledger', 'deletions',
            'facts_events']
        LOOP
            EXECUTE format('ALTER TABLE macupos.%I ENABLE ROW LEVEL SECURITY', t);
            EXECUTE format('ALTER TABLE macupos.%I FORCE ROW LEVEL SECURITY', t);
            EXECUTE format('CREATE POLICY tenant_wall ON macupos.%I'
                ' USING (tenant_id = current_setting(''macupos.tenant'', true))'
                ' WITH CHECK (tenant_id = current_setting(''macupos.tenant'', true))', t);
            EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON macupos.%I TO macupos_tenant', t);
        END LOOP;
    END $$;
    """,
    # 2: tenants' webhooks and their delivery log (service/webhooks): outside the tenant wall, like the keys,
    # since every server's deliverer reads the due deliveries of all tenants. The secret is kept as it is: the
    # server signs each delivery with it.
    """
    CREATE TABLE macupos.webhooks(
        webhook_id text PRIMARY KEY,
        tenant_id text NOT NULL REFERENCES macupos.tenants(tenant_id),
        url text NOT NULL,
        events text NOT NULL,
        secret text NOT NULL,
        created_at float8 NOT NULL
    );
    CREATE INDEX webhooks_tenant ON macupos.webhooks(tenant_id);
    CREATE TABLE macupos.webhook_deliveries(
        delivery_id text PRIMARY KEY,
        webhook_id text NOT NULL REFERENCES macupos.webhooks(webhook_id) ON DELETE CASCADE,
        tenant_id text NOT NULL,
        event text NOT NULL,
        body text NOT NULL,
        status text NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),
        attempts integer NOT NULL DEFAULT 0,
        last_status integer,
        last_error text NOT NULL DEFAULT '',
        next_at float8 NOT NULL,
        created_at float8 NOT NULL,
        delivered_at float8
    );
    CREATE INDEX webhook_deliveries_due ON macupos.webhook_deliveries(status, next_at);
    CREATE INDEX webhook_deliveries_hook ON macupos.webhook_deliveries(webhook_id, created_at);
    """,
    # 3: memory schema 7, who made a memory decision: a handoff's reviewer and when, who forgot a session. Added
    # at the end of each table, after ``seq`` (a constant default: no table rewrite); every statement names its
    # columns, so their order matters to none.
    """
    ALTER TABLE macupos.handoffs ADD COLUMN reviewed_by text NOT NULL DEFAULT '',
        ADD COLUMN reviewed_at text NOT NULL DEFAULT '';
    ALTER TABLE macupos.forgotten ADD COLUMN forgotten_by text NOT NULL DEFAULT '';
    UPDATE macupos.info SET value = '7' WHERE key = 'memory_schema';
    """,
)

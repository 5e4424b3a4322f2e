"""Numbered, append-only schema migrations of the bot's own file, ``$MACUPOS_HOME/bot.db``.

Never edit a released entry: add the next one. Opened with
``memory.storage.database.Database.open(path, migrations=MIGRATIONS)``; times are epoch seconds (REAL).
"""

from __future__ import annotations

__all__ = ["MIGRATIONS"]

MIGRATIONS: tuple[str, ...] = (
    # 1: updates, chats, queue, runs, callbacks, handoff reviews
    """
    -- Every Telegram update, stored before its offset is confirmed to Telegram: the primary key makes a
    -- redelivery a no-op, the status tells a restart what was never handled or was cut mid-way.
    CREATE TABLE updates(
        update_id INTEGER PRIMARY KEY,
        chat_id INTEGER,
        user_id INTEGER,
        kind TEXT NOT NULL,
        payload TEXT NOT NULL,              -- JSON of the update as received
        status TEXT NOT NULL DEFAULT 'received'
            CHECK(status IN ('received', 'handling', 'done', 'failed', 'interrupted')),
        received_at REAL NOT NULL,
        handled_at REAL
    );
    CREATE INDEX updates_open ON updates(status) WHERE status IN ('received', 'handling');
    CREATE INDEX updates_received ON updates(received_at);

    CREATE TABLE chats(
        chat_id INTEGER PRIMARY KEY,
        project TEXT NOT NULL DEFAULT '',           -- '' = the default project
        session_id TEXT NOT NULL DEFAULT '',        -- the session follow-ups continue; '' after /new
        last_session_id TEXT NOT NULL DEFAULT '',   -- the most recent session, kept across /new
        pending_transcript TEXT NOT NULL DEFAULT '',    -- a voice transcript awaiting the owner's confirm
        pending_correction TEXT NOT NULL DEFAULT '',    -- a handoff session id whose correction is awaited
        updated_at REAL NOT NULL
    );

    -- Instructions that arrived while a session ran. A restart keeps them; nothing runs twice.
    CREATE TABLE queue(
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        chat_id INTEGER NOT NULL,
        text TEXT NOT NULL,
        source TEXT NOT NULL,               -- text | voice | command | resume
        status TEXT NOT NULL DEFAULT 'queued'
            CHECK(status IN ('queued', 'running', 'done', 'failed', 'cancelled', 'interrupted')),
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL
    );
    CREATE INDEX queue_chat ON queue(chat_id, status, id);

    CREATE TABLE runs(
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        chat_id INTEGER NOT NULL,
        instruction TEXT NOT NULL,
        session_id TEXT NOT NULL DEFAULT '',
        project TEXT NOT NULL DEFAULT '',
        status TEXT NOT NULL DEFAULT 'running'
            CHECK(status IN ('running', 'done', 'failed', 'stopped', 'interrupted', 'resumed', 'dismissed')),
        started_at REAL NOT NULL,
        finished_at REAL
    );
    -- One running session per chat, enforced where no race can slip past it.
    CREATE UNIQUE INDEX runs_one_running ON runs(chat_id) WHERE status = 'running';
    CREATE INDEX runs_status ON runs(status);

    -- Inline-button tokens: only `user_id` may press, once, before `expires_at`. Buttons of one prompt
    -- share a `grp`, so pressing one retires its siblings (Allow must not also be Denied later).
    CREATE TABLE callbacks(
        token TEXT PRIMARY KEY,
        grp TEXT NOT NULL,
        chat_id INTEGER NOT NULL,
        user_id INTEGER NOT NULL,
        action TEXT NOT NULL,
        payload TEXT NOT NULL,              -- JSON
        created_at REAL NOT NULL,
        expires_at REAL NOT NULL,
        used_at REAL
    );
    CREATE INDEX callbacks_grp ON callbacks(grp);
    CREATE INDEX callbacks_expires ON callbacks(expires_at);

    CREATE TABLE handoff_reviews(
        session_id TEXT PRIMARY KEY,
        chat_id INTEGER NOT NULL,
        message_id INTEGER,
        state TEXT NOT NULL DEFAULT 'pending'
            CHECK(state IN ('pending', 'kept', 'forgotten', 'corrected')),
        correction TEXT NOT NULL DEFAULT '',
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL
    );
    CREATE INDEX handoff_reviews_message ON handoff_reviews(chat_id, message_id);
    """,
    # 2: a queue status "held" for instructions that waited when the process died (run only on Resume).
    # SQLite cannot alter a CHECK constraint, so the table is rebuilt with its rows.
    """
    CREATE TABLE queue_new(
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        chat_id INTEGER NOT NULL,
        text TEXT NOT NULL,
        source TEXT NOT NULL,
        status TEXT NOT NULL DEFAULT 'queued'
            CHECK(status IN ('queued', 'running', 'done', 'failed', 'cancelled', 'interrupted', 'held')),
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL
    );
    INSERT INTO queue_new(id, chat_id, text, source, status, created_at, updated_at)
        SELECT id, chat_id, text, source, status, created_at, updated_at FROM queue;
    DROP TABLE queue;
    ALTER TABLE queue_new RENAME TO queue;
    CREATE INDEX queue_chat ON queue(chat_id, status, id);
    """,
    # 3: the images a queued instruction carries (absolute paths of files in a project's .macupos/inbox,
    # JSON list), so a photo sent while a session works still reaches the model when its turn comes.
    """
    ALTER TABLE queue ADD COLUMN attachments TEXT NOT NULL DEFAULT '[]';
    """,
    # 4: /memory off|on per project (by the name in MACUPOS_PROJECTS); the bot mirrors the private ones'
    # folders into $MACUPOS_HOME/private-projects, which memory, its hooks and a plain `memory ingest` read.
    """
    CREATE TABLE project_memory(
        project TEXT PRIMARY KEY,
        private INTEGER NOT NULL CHECK(private IN (0, 1)),
        updated_at REAL NOT NULL
    );
    """,
    # 5: spoken answers per chat (/speak): 'voice' (the default: answers to voice notes are spoken), 'on'
    # (every answer), 'off' (none).
    """
    CREATE TABLE chat_speech(
        chat_id INTEGER PRIMARY KEY,
        mode TEXT NOT NULL CHECK(mode IN ('voice', 'on', 'off')),
        updated_at REAL NOT NULL
    );
    """,
    # 6: the queue row a run came from, so a restart tells a queued instruction whose run never started
    # (put back in the queue) from one whose run started (reported) or ended (done).
    """
    ALTER TABLE runs ADD COLUMN queue_id INTEGER;
    """,
    # 7: parallel sessions, one per git branch, each in its own worktree (bot.lanes). Queue rows and runs
    # belong to a lane: '' is the chat's main checkout, else a branch; one running run per lane.
    """
    ALTER TABLE queue ADD COLUMN branch TEXT NOT NULL DEFAULT '';
    ALTER TABLE runs ADD COLUMN branch TEXT NOT NULL DEFAULT '';
    ALTER TABLE runs ADD COLUMN cost_usd REAL NOT NULL DEFAULT 0;
    DROP INDEX runs_one_running;
    CREATE UNIQUE INDEX runs_one_running ON runs(chat_id, branch) WHERE status = 'running';
    DROP INDEX queue_chat;
    CREATE INDEX queue_chat ON queue(chat_id, branch, status, id);
    CREATE INDEX runs_started ON runs(started_at);

    -- A chat's branches: a branch name is unique per chat and belongs to the project it was made in.
    CREATE TABLE branches(
        chat_id INTEGER NOT NULL,
        branch TEXT NOT NULL,
        project TEXT NOT NULL,              -- the project's name in MACUPOS_PROJECTS
        base TEXT NOT NULL,                 -- the branch it was made from (what Merge merges into)
        path TEXT NOT NULL,                 -- its worktree
        session_id TEXT NOT NULL DEFAULT '',-- what its next instruction continues
        thread_id INTEGER,                  -- its forum topic, in a forum group
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        PRIMARY KEY(chat_id, branch)
    );
    CREATE UNIQUE INDEX branches_thread ON branches(chat_id, thread_id) WHERE thread_id IS NOT NULL;

    -- Which lane a bot message belongs to, so a reply to it continues that lane's session.
    CREATE TABLE lane_messages(
        chat_id INTEGER NOT NULL,
        message_id INTEGER NOT NULL,
        branch TEXT NOT NULL,
        at REAL NOT NULL,
        PRIMARY KEY(chat_id, message_id)
    ) WITHOUT ROWID;
    CREATE INDEX lane_messages_at ON lane_messages(at);

    -- The lane the owner last talked to: a terse follow-up without @ or a reply goes there.
    ALTER TABLE chats ADD COLUMN last_branch TEXT NOT NULL DEFAULT '';
    ALTER TABLE chats ADD COLUMN last_branch_at REAL NOT NULL DEFAULT 0;
    """,
    # 8: agents on their own. Schedules (/at, /every) and their fires, deliveries of signed triggers, and what
    # a queued instruction carries when no one is there to tap: its permission profile, its spending cap and
    # where it came from.
    """
    ALTER TABLE queue ADD COLUMN profile TEXT NOT NULL DEFAULT '';    -- '' = ask the owner (interactive)
    ALTER TABLE queue ADD COLUMN budget_usd REAL;                     -- this run's cap; NULL = the default
    ALTER TABLE queue ADD COLUMN origin TEXT NOT NULL DEFAULT '';     -- '', 'schedule:<id>', 'trigger:<id>'
    ALTER TABLE queue ADD COLUMN project TEXT NOT NULL DEFAULT '';    -- '' = the chat's project (main lane)

    -- When a cut run's restart card was sent: a start killed between marking a run interrupted and sending
    -- its card reports it at the next start (runs cut before this version were reported already).
    ALTER TABLE runs ADD COLUMN reported_at REAL;
    UPDATE runs SET reported_at = coalesce(finished_at, started_at) WHERE status = 'interrupted';

    CREATE TABLE schedules(
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        chat_id INTEGER NOT NULL,
        user_id INTEGER NOT NULL,
        spec TEXT NOT NULL,                 -- canonical text of bot.schedule_spec.Spec
        text TEXT NOT NULL,                 -- the instruction
        project TEXT NOT NULL,
        branch TEXT NOT NULL DEFAULT '',
        profile TEXT NOT NULL,              -- permission profile of its runs
        budget_usd REAL,                    -- cap of each run; NULL = MACUPOS_RUN_BUDGET_USD
        state TEXT NOT NULL DEFAULT 'active' CHECK(state IN ('active', 'paused', 'done', 'deleted')),
        next_at REAL,                       -- its next fire, epoch seconds; NULL when none is left
        last_at REAL,
        last_result TEXT NOT NULL DEFAULT '',
        last_cost REAL NOT NULL DEFAULT 0,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL
    );
    CREATE INDEX schedules_due ON schedules(next_at) WHERE state = 'active';

    -- One row per fire: the primary key makes a fire happen once, in the same transaction that queues its
    -- instruction and moves the schedule on.
    CREATE TABLE schedule_fires(
        schedule_id INTEGER NOT NULL,
        fire_at REAL NOT NULL,
        queue_id INTEGER NOT NULL,
        missed INTEGER NOT NULL DEFAULT 0,   -- fires collapsed into this one while the bot was down
        created_at REAL NOT NULL,
        PRIMARY KEY(schedule_id, fire_at)
    ) WITHOUT ROWID;

    -- Signed calls (POST /trigger, /github): a delivery id runs once, in the transaction that queues it.
    CREATE TABLE trigger_deliveries(
        delivery_id TEXT PRIMARY KEY,
        origin TEXT NOT NULL,
        queue_id INTEGER,
        received_at REAL NOT NULL
    ) WITHOUT ROWID;
    CREATE INDEX trigger_deliveries_at ON trigger_deliveries(received_at);
    """,
    # 9: team rooms (bot.roles). Roles set by the owner's /role (a row of role 'none' takes away a role the
    # configuration gives); who decided each approval and handoff review; bot messages to delete at a time
    # (an API key shown once by /key), kept here so a restart still deletes them; and who sent each
    # instruction, so /cost tells spend per person.
    """
    CREATE TABLE roles(
        subject TEXT PRIMARY KEY,           -- a numeric Telegram user id, or '@username' in lower case
        role TEXT NOT NULL CHECK(role IN ('approver', 'member', 'viewer', 'none')),
        set_by INTEGER NOT NULL,
        updated_at REAL NOT NULL
    ) WITHOUT ROWID;

    CREATE TABLE decisions(
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        chat_id INTEGER NOT NULL,
        message_id INTEGER,                 -- the card the button was on
        action TEXT NOT NULL,               -- approve | review | branch | restart | keys
        choice TEXT NOT NULL,               -- allow, deny, session, keep, forget, merge, ...
        user_id INTEGER NOT NULL,           -- who pressed (or answered by voice)
        name TEXT NOT NULL,                 -- how the card names them (@alice)
        decided_at REAL NOT NULL
    );
    CREATE INDEX decisions_chat ON decisions(chat_id, decided_at);

    CREATE TABLE timed_deletions(
        chat_id INTEGER NOT NULL,
        message_id INTEGER NOT NULL,
        due_at REAL NOT NULL,
        PRIMARY KEY(chat_id, message_id)
    ) WITHOUT ROWID;
    CREATE INDEX timed_deletions_due ON timed_deletions(due_at);

    ALTER TABLE queue ADD COLUMN user_id INTEGER;    -- NULL: queued before this version (the lane's user)
    ALTER TABLE runs ADD COLUMN user_id INTEGER;
    CREATE INDEX runs_user ON runs(user_id, started_at);
    """,
)

-- The transactional outbox (docs/outbox.md): applications INSERT rows in
-- their own transactions, and the node that moves the outbox turns the
-- committed ones into jobs. Its columns are a public contract: later
-- migrations may only add nullable columns. NULL takes the default of
-- POST /job. created_at is INTEGER microseconds since the epoch, UTC.
CREATE TABLE rowq_outbox (
    id          INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    category    TEXT    NOT NULL,
    url         TEXT,
    payload     TEXT,
    run_after   INTEGER,
    max_retries INTEGER,
    retry_delay INTEGER,
    timeout     INTEGER,
    priority    INTEGER,
    unique_key  TEXT,
    created_at  INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000000 AS INTEGER))
) STRICT;

-- Outbox rows that are not valid jobs, as they were (outbox_id is their
-- id in rowq_outbox), and why.
CREATE TABLE rowq_outbox_rejects (
    id          INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    outbox_id   INTEGER NOT NULL,
    category    TEXT    NOT NULL,
    url         TEXT,
    payload     TEXT,
    run_after   INTEGER,
    max_retries INTEGER,
    retry_delay INTEGER,
    timeout     INTEGER,
    priority    INTEGER,
    unique_key  TEXT,
    created_at  INTEGER NOT NULL,
    reason      TEXT    NOT NULL,
    rejected_at INTEGER NOT NULL
) STRICT;

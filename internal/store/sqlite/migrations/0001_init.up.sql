-- Times are INTEGER microseconds since the Unix epoch, UTC.
CREATE TABLE queues (
    name                      TEXT    NOT NULL PRIMARY KEY,
    polling_interval          INTEGER NOT NULL,
    max_workers               INTEGER NOT NULL,
    max_dispatches_per_second REAL,
    max_burst_size            INTEGER,
    leader                    TEXT,
    created_at                INTEGER NOT NULL,
    updated_at                INTEGER NOT NULL
);

CREATE TABLE nodes (
    id         TEXT    NOT NULL PRIMARY KEY,
    host       TEXT    NOT NULL,
    started_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
);

CREATE TABLE routings (
    job_category TEXT    NOT NULL PRIMARY KEY,
    queue_name   TEXT    NOT NULL,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL
);

-- AUTOINCREMENT: a job id is never reused, even after the newest job is deleted.
CREATE TABLE jobs (
    id            INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    queue_name    TEXT    NOT NULL,
    category      TEXT    NOT NULL,
    url           TEXT    NOT NULL,
    payload       TEXT,
    state         TEXT    NOT NULL,
    created_at    INTEGER NOT NULL,
    next_try      INTEGER NOT NULL,
    timeout       INTEGER NOT NULL,
    max_retries   INTEGER NOT NULL,
    retry_delay   INTEGER NOT NULL,
    fail_count    INTEGER NOT NULL DEFAULT 0,
    grabbed_by    TEXT,
    grabbed_until INTEGER
);

-- The fetch walks this index: WHERE queue_name=? AND state='waiting' AND next_try<=? ORDER BY next_try, id.
CREATE INDEX jobs_fetch ON jobs (queue_name, state, next_try);

CREATE TABLE failed_jobs (
    id          INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    job_id      INTEGER NOT NULL,
    queue_name  TEXT    NOT NULL,
    category    TEXT    NOT NULL,
    url         TEXT    NOT NULL,
    payload     TEXT,
    status      TEXT    NOT NULL,
    code        INTEGER NOT NULL,
    message     TEXT    NOT NULL,
    fail_count  INTEGER NOT NULL,
    failed_at   INTEGER NOT NULL,
    created_at  INTEGER NOT NULL
);

CREATE INDEX failed_jobs_queue ON failed_jobs (queue_name, id);

-- Times are INTEGER microseconds since the Unix epoch, UTC.
CREATE TABLE schedules (
    name        TEXT    NOT NULL PRIMARY KEY,
    cron        TEXT    NOT NULL,
    timezone    TEXT    NOT NULL,
    category    TEXT    NOT NULL,
    url         TEXT    NOT NULL,
    payload     TEXT,
    max_retries INTEGER NOT NULL,
    retry_delay INTEGER NOT NULL,
    timeout     INTEGER NOT NULL,
    misfire     TEXT    NOT NULL,
    max_catchup INTEGER NOT NULL,
    overlap     TEXT    NOT NULL,
    paused      INTEGER NOT NULL,
    next_run_at INTEGER NOT NULL,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);

-- The loop of every node walks this index: WHERE paused = 0 AND next_run_at <= ? ORDER BY next_run_at.
CREATE INDEX schedules_due ON schedules (paused, next_run_at);

-- The run history; its unique key (schedule_name, kind, tick) is the
-- exactly-once key of a tick, besides the compare-and-set on next_run_at.
CREATE TABLE schedule_runs (
    id            INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    schedule_name TEXT    NOT NULL,
    kind          TEXT    NOT NULL,
    tick          INTEGER NOT NULL,
    fired_at      INTEGER NOT NULL,
    node          TEXT    NOT NULL,
    job_id        INTEGER,
    queue_name    TEXT,
    reason        TEXT    NOT NULL,
    UNIQUE (schedule_name, kind, tick)
);

CREATE INDEX schedule_runs_history ON schedule_runs (schedule_name, id);

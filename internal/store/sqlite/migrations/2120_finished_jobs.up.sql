-- The history of finished jobs (docs/lifecycle.md): queues keep their
-- finished jobs for keep_finished seconds (0: none, as before), apart from
-- the live jobs. A job retried from the failure log keeps its id: its
-- later outcome replaces its row.
ALTER TABLE queues ADD COLUMN keep_finished INTEGER NOT NULL DEFAULT 0;

CREATE TABLE finished_jobs (
    id          INTEGER NOT NULL PRIMARY KEY,
    queue_name  TEXT    NOT NULL,
    category    TEXT    NOT NULL,
    url         TEXT    NOT NULL,
    payload     TEXT,
    status      TEXT    NOT NULL,
    attempts    INTEGER NOT NULL,
    created_at  INTEGER NOT NULL,
    started_at  INTEGER,
    finished_at INTEGER NOT NULL,
    message     TEXT    NOT NULL,
    result      TEXT
);

CREATE INDEX finished_jobs_queue ON finished_jobs (queue_name, finished_at, id);

-- The history of finished jobs (docs/lifecycle.md): queues keep their
-- finished jobs for keep_finished seconds (0: none, as before), apart from
-- the live jobs so that it never slows a grab. A job retried from the
-- failure log keeps its id: its later outcome replaces its row.
ALTER TABLE queues ADD COLUMN keep_finished integer NOT NULL DEFAULT 0;

CREATE TABLE finished_jobs (
    id          bigint PRIMARY KEY,
    queue_name  text COLLATE "C" NOT NULL,
    category    text COLLATE "C" NOT NULL,
    url         text             NOT NULL,
    payload     text,
    status      text             NOT NULL,
    attempts    integer          NOT NULL,
    created_at  timestamptz      NOT NULL,
    started_at  timestamptz,
    finished_at timestamptz      NOT NULL,
    message     text             NOT NULL,
    result      text
);

-- The listing (newest first) and the leader's prune (oldest first).
CREATE INDEX finished_jobs_queue ON finished_jobs (queue_name, finished_at, id);

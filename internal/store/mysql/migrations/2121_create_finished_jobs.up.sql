/* rowq:migrate.create_finished_jobs */
-- The history of finished jobs (succeeded, failed for good, cancelled) of
-- the queues with keep_finished > 0, apart from the live jobs so that it
-- never slows a grab. A job retried from the failure log keeps its id: its
-- later outcome replaces its row. finished_jobs_queue serves the listing
-- (newest first) and the leader's prune (oldest first).
CREATE TABLE finished_jobs (
    id          BIGINT       NOT NULL,
    queue_name  VARCHAR(255) NOT NULL,
    category    VARCHAR(255) NOT NULL,
    url         TEXT         NOT NULL,
    payload     LONGTEXT     NULL,
    status      VARCHAR(16)  NOT NULL,
    attempts    INT          NOT NULL,
    created_at  DATETIME(6)  NOT NULL,
    started_at  DATETIME(6)  NULL,
    finished_at DATETIME(6)  NOT NULL,
    message     TEXT         NOT NULL,
    result      LONGTEXT     NULL,
    PRIMARY KEY (id),
    KEY finished_jobs_queue (queue_name, finished_at, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin

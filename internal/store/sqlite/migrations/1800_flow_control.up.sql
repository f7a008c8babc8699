-- deferrals: how often the job's worker answered 429 or 503 with
-- Retry-After; such a deferral spends no retry, up to a bound
-- (docs/flow-control.md).
ALTER TABLE jobs ADD COLUMN deferrals INTEGER NOT NULL DEFAULT 0;

-- The worker hosts a queue's leader slows down (rate) or holds back (an
-- open circuit breaker), written by that leader, read by every node for
-- the API, the dashboard and /metrics. open_until is the leader's clock,
-- for display only (microseconds, as every time here).
CREATE TABLE worker_hosts (
    queue_name TEXT    NOT NULL,
    host       TEXT    NOT NULL,
    node       TEXT    NOT NULL,
    rate       REAL,
    breaker    TEXT    NOT NULL,
    failures   INTEGER NOT NULL,
    open_until INTEGER,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (queue_name, host)
);

-- deferrals: how often the job's worker answered 429 or 503 with
-- Retry-After; such a deferral spends no retry, up to a bound
-- (docs/flow-control.md).
ALTER TABLE jobs ADD COLUMN deferrals integer NOT NULL DEFAULT 0;

-- The worker hosts a queue's leader slows down (rate) or holds back (an
-- open circuit breaker), written by that leader, read by every node for
-- the API, the dashboard and /metrics. open_until is the leader's clock,
-- for display only.
CREATE TABLE worker_hosts (
    queue_name text COLLATE "C" NOT NULL,
    host       text COLLATE "C" NOT NULL,
    node       text COLLATE "C" NOT NULL,
    rate       double precision,
    breaker    text             NOT NULL,
    failures   integer          NOT NULL,
    open_until timestamptz,
    updated_at timestamptz      NOT NULL,
    PRIMARY KEY (queue_name, host)
);

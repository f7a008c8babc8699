/* rowq:migrate.create_worker_hosts */
-- The worker hosts a queue's leader slows down (rate) or holds back (an
-- open circuit breaker), written by that leader, read by every node for
-- the API, the dashboard and /metrics (docs/flow-control.md). open_until is
-- the leader's clock, for display only.
CREATE TABLE worker_hosts (
    queue_name VARCHAR(255) NOT NULL,
    host       VARCHAR(255) NOT NULL,
    node       VARCHAR(255) NOT NULL,
    rate       DOUBLE       NULL,
    breaker    VARCHAR(16)  NOT NULL,
    failures   INT          NOT NULL,
    open_until DATETIME(6)  NULL,
    updated_at DATETIME(6)  NOT NULL,
    PRIMARY KEY (queue_name, host)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin

/* rowq:migrate.create_schedule_runs */
-- The run history; its unique key (schedule_name, kind, tick) is the
-- exactly-once key of a tick, besides the compare-and-set on next_run_at.
CREATE TABLE schedule_runs (
    id            BIGINT       NOT NULL AUTO_INCREMENT,
    schedule_name VARCHAR(255) NOT NULL,
    kind          VARCHAR(8)   NOT NULL,
    tick          DATETIME(6)  NOT NULL,
    fired_at      DATETIME(6)  NOT NULL,
    node          VARCHAR(255) NOT NULL,
    job_id        BIGINT       NULL,
    queue_name    VARCHAR(255) NULL,
    reason        TEXT         NOT NULL,
    PRIMARY KEY (id),
    UNIQUE KEY schedule_runs_tick (schedule_name, kind, tick),
    KEY schedule_runs_history (schedule_name, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin

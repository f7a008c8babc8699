/* rowq:migrate.create_schedules */
-- The loop of every node reads due schedules through schedules_due:
-- WHERE paused = 0 AND next_run_at <= ? ORDER BY next_run_at.
CREATE TABLE schedules (
    name        VARCHAR(255) NOT NULL,
    cron        VARCHAR(255) NOT NULL,
    timezone    VARCHAR(64)  NOT NULL,
    category    VARCHAR(255) NOT NULL,
    url         TEXT         NOT NULL,
    payload     LONGTEXT     NULL,
    max_retries INT          NOT NULL,
    retry_delay INT          NOT NULL,
    timeout     INT          NOT NULL,
    misfire     VARCHAR(8)   NOT NULL,
    max_catchup INT          NOT NULL,
    overlap     VARCHAR(8)   NOT NULL,
    paused      BOOLEAN      NOT NULL,
    next_run_at DATETIME(6)  NOT NULL,
    created_at  DATETIME(6)  NOT NULL,
    updated_at  DATETIME(6)  NOT NULL,
    PRIMARY KEY (name),
    KEY schedules_due (paused, next_run_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin

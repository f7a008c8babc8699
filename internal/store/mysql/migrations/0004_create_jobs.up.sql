/* rowq:migrate.create_jobs */
-- payload is LONGTEXT, not JSON: MySQL's JSON type would reformat it.
-- The fetch walks jobs_fetch: WHERE queue_name = ? AND state = 'waiting' AND
-- next_try <= NOW(6) ORDER BY next_try, id. InnoDB appends the primary key to
-- every secondary index, so the ORDER BY needs no filesort.
CREATE TABLE jobs (
    id            BIGINT       NOT NULL AUTO_INCREMENT,
    queue_name    VARCHAR(255) NOT NULL,
    category      VARCHAR(255) NOT NULL,
    url           TEXT         NOT NULL,
    payload       LONGTEXT     NULL,
    state         VARCHAR(8)   NOT NULL,
    created_at    DATETIME(6)  NOT NULL,
    next_try      DATETIME(6)  NOT NULL,
    timeout       INT          NOT NULL,
    max_retries   INT          NOT NULL,
    retry_delay   INT          NOT NULL,
    fail_count    INT          NOT NULL DEFAULT 0,
    grabbed_by    VARCHAR(255) NULL,
    grabbed_until DATETIME(6)  NULL,
    PRIMARY KEY (id),
    KEY jobs_fetch (queue_name, state, next_try)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin

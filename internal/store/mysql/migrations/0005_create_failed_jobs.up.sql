/* rowq:migrate.create_failed_jobs */
CREATE TABLE failed_jobs (
    id         BIGINT       NOT NULL AUTO_INCREMENT,
    job_id     BIGINT       NOT NULL,
    queue_name VARCHAR(255) NOT NULL,
    category   VARCHAR(255) NOT NULL,
    url        TEXT         NOT NULL,
    payload    LONGTEXT     NULL,
    status     VARCHAR(32)  NOT NULL,
    code       INT          NOT NULL,
    message    TEXT         NOT NULL,
    fail_count INT          NOT NULL,
    failed_at  DATETIME(6)  NOT NULL,
    created_at DATETIME(6)  NOT NULL,
    PRIMARY KEY (id),
    KEY failed_jobs_queue (queue_name, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin

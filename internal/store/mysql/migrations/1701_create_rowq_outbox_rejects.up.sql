/* rowq:migrate.create_rowq_outbox_rejects */
-- Outbox rows that are not valid jobs, as they were (outbox_id is their
-- id in rowq_outbox), and why.
CREATE TABLE rowq_outbox_rejects (
    id          BIGINT        NOT NULL AUTO_INCREMENT,
    outbox_id   BIGINT        NOT NULL,
    category    VARCHAR(255)  NOT NULL,
    url         TEXT          NULL,
    payload     LONGTEXT      NULL,
    run_after   INT           NULL,
    max_retries INT           NULL,
    retry_delay INT           NULL,
    timeout     INT           NULL,
    priority    INT           NULL,
    unique_key  VARCHAR(255)  NULL,
    created_at  DATETIME(6)   NOT NULL,
    reason      VARCHAR(1024) NOT NULL,
    rejected_at DATETIME(6)   NOT NULL,
    PRIMARY KEY (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin

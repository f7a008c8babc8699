/* rowq:migrate.create_rowq_outbox */
-- The transactional outbox (docs/outbox.md): applications INSERT rows in
-- their own transactions, and the node that moves the outbox turns the
-- committed ones into jobs. Its columns are a public contract: later
-- migrations may only add nullable columns. NULL takes the default of
-- POST /job. created_at is UTC whatever the application's session time
-- zone.
CREATE TABLE rowq_outbox (
    id          BIGINT       NOT NULL AUTO_INCREMENT,
    category    VARCHAR(255) NOT NULL,
    url         TEXT         NULL,
    payload     LONGTEXT     NULL,
    run_after   INT          NULL,
    max_retries INT          NULL,
    retry_delay INT          NULL,
    timeout     INT          NULL,
    priority    INT          NULL,
    unique_key  VARCHAR(255) NULL,
    created_at  DATETIME(6)  NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
    PRIMARY KEY (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin

/* rowq:migrate.create_batches */
-- Batches of jobs and their counts: pending counts the jobs not yet ended,
-- the others count them by outcome. finished_at is set when pending
-- reaches 0, in the transaction that inserts the batch's callbacks
-- (store.EncodeCallback, NULL for none). meta is the client's JSON, kept
-- as text (as payload is).
CREATE TABLE batches (
    id          BIGINT      NOT NULL AUTO_INCREMENT,
    total       INT         NOT NULL,
    pending     INT         NOT NULL,
    succeeded   INT         NOT NULL DEFAULT 0,
    failed      INT         NOT NULL DEFAULT 0,
    cancelled   INT         NOT NULL DEFAULT 0,
    created_at  DATETIME(6) NOT NULL,
    finished_at DATETIME(6) NULL,
    meta        LONGTEXT    NULL,
    on_success  MEDIUMTEXT  NULL,
    on_finish   MEDIUMTEXT  NULL,
    PRIMARY KEY (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin

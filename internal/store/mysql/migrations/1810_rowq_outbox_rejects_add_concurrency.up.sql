/* rowq:migrate.rowq_outbox_rejects_add_concurrency */
-- A reject keeps the row's concurrency columns as they were.
ALTER TABLE rowq_outbox_rejects
    ADD COLUMN concurrency_key   VARCHAR(191) NULL,
    ADD COLUMN concurrency_limit INT          NULL,
    ADD COLUMN ordered           BOOLEAN      NULL

/* rowq:migrate.rowq_outbox_add_concurrency */
-- The job's per-key concurrency, as the concurrency_key, concurrency_limit
-- and ordered fields of POST /job take them (docs/outbox.md); NULL for
-- none. Nullable: the table's columns are a public contract, and an
-- application's INSERT that names only the older ones goes on working.
ALTER TABLE rowq_outbox
    ADD COLUMN concurrency_key   VARCHAR(191) NULL,
    ADD COLUMN concurrency_limit INT          NULL,
    ADD COLUMN ordered           BOOLEAN      NULL

-- The job's per-key concurrency, as the concurrency_key, concurrency_limit
-- and ordered fields of POST /job take them (docs/outbox.md); NULL for
-- none. Nullable: the table's columns are a public contract, and an
-- application's INSERT that names only the older ones goes on working. A
-- reject keeps them as they were.
ALTER TABLE rowq_outbox
    ADD COLUMN concurrency_key   text COLLATE "C",
    ADD COLUMN concurrency_limit integer,
    ADD COLUMN ordered           boolean;
ALTER TABLE rowq_outbox_rejects
    ADD COLUMN concurrency_key   text COLLATE "C",
    ADD COLUMN concurrency_limit integer,
    ADD COLUMN ordered           boolean;

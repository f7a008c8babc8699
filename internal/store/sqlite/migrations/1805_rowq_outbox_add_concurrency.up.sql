-- The job's per-key concurrency, as the concurrency_key, concurrency_limit
-- and ordered fields of POST /job take them (docs/outbox.md); NULL for
-- none; ordered is 0 or 1 (any other number counts as 1). Nullable: the
-- table's columns are a public contract, and an application's INSERT that
-- names only the older ones goes on working. A reject keeps them as they
-- were.
ALTER TABLE rowq_outbox ADD COLUMN concurrency_key TEXT;
ALTER TABLE rowq_outbox ADD COLUMN concurrency_limit INTEGER;
ALTER TABLE rowq_outbox ADD COLUMN ordered INTEGER;
ALTER TABLE rowq_outbox_rejects ADD COLUMN concurrency_key TEXT;
ALTER TABLE rowq_outbox_rejects ADD COLUMN concurrency_limit INTEGER;
ALTER TABLE rowq_outbox_rejects ADD COLUMN ordered INTEGER;

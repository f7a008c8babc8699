-- Per-key concurrency and ordering (docs/flow-control.md): a job's
-- concurrency key (NULL for none), the key's limit (0 without a key) and
-- whether the key's jobs go in order.
ALTER TABLE jobs
    ADD COLUMN concurrency_key   text COLLATE "C",
    ADD COLUMN concurrency_limit integer NOT NULL DEFAULT 0,
    ADD COLUMN ordered           boolean NOT NULL DEFAULT false;

-- The oldest job of an ordered key is one probe of this index. Partial:
-- jobs without a key (most) cost it nothing.
CREATE INDEX jobs_key ON jobs (queue_name, concurrency_key, id) WHERE concurrency_key IS NOT NULL;

-- A failed job keeps them, so that a retry from the failure log restores
-- them.
ALTER TABLE failed_jobs
    ADD COLUMN concurrency_key   text COLLATE "C",
    ADD COLUMN concurrency_limit integer NOT NULL DEFAULT 0,
    ADD COLUMN ordered           boolean NOT NULL DEFAULT false;

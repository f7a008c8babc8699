-- Per-key concurrency and ordering (docs/flow-control.md): a job's
-- concurrency key (NULL for none), the key's limit (0 without a key) and
-- whether the key's jobs go in order (0 or 1).
ALTER TABLE jobs ADD COLUMN concurrency_key TEXT;
ALTER TABLE jobs ADD COLUMN concurrency_limit INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN ordered INTEGER NOT NULL DEFAULT 0;

-- The oldest job of an ordered key is one probe of this index. Partial:
-- jobs without a key (most) cost it nothing.
CREATE INDEX jobs_key ON jobs (queue_name, concurrency_key, id) WHERE concurrency_key IS NOT NULL;

-- A failed job keeps them, so that a retry from the failure log restores
-- them.
ALTER TABLE failed_jobs ADD COLUMN concurrency_key TEXT;
ALTER TABLE failed_jobs ADD COLUMN concurrency_limit INTEGER NOT NULL DEFAULT 0;
ALTER TABLE failed_jobs ADD COLUMN ordered INTEGER NOT NULL DEFAULT 0;

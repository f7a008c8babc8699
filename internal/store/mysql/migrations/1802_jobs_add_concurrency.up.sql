/* rowq:migrate.jobs_add_concurrency */
-- Per-key concurrency and ordering (docs/flow-control.md): a job's
-- concurrency key (NULL for none; 191 characters fit an index of utf8mb4),
-- the key's limit (0 without a key) and whether the key's jobs go in
-- order. Written by the insert and never changed, so a grab still rewrites
-- the row in place.
ALTER TABLE jobs
    ADD COLUMN concurrency_key   VARCHAR(191) NULL,
    ADD COLUMN concurrency_limit INT          NOT NULL DEFAULT 0,
    ADD COLUMN ordered           BOOLEAN      NOT NULL DEFAULT FALSE

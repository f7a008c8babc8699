/* rowq:migrate.failed_jobs_add_concurrency */
-- A failed job keeps its concurrency settings, so that a retry from the
-- failure log restores them.
ALTER TABLE failed_jobs
    ADD COLUMN concurrency_key   VARCHAR(191) NULL,
    ADD COLUMN concurrency_limit INT          NOT NULL DEFAULT 0,
    ADD COLUMN ordered           BOOLEAN      NOT NULL DEFAULT FALSE

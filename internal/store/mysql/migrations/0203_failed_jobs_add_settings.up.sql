/* rowq:migrate.failed_jobs_add_settings */
-- The job's settings, so that a retry from the failure log restores them.
ALTER TABLE failed_jobs
    ADD COLUMN timeout         INT         NOT NULL DEFAULT 0,
    ADD COLUMN max_retries     INT         NOT NULL DEFAULT 0,
    ADD COLUMN retry_delay     INT         NOT NULL DEFAULT 0,
    ADD COLUMN priority        SMALLINT    NOT NULL DEFAULT 0,
    ADD COLUMN retry_backoff   VARCHAR(16) NOT NULL DEFAULT 'fixed',
    ADD COLUMN retry_delay_max INT         NOT NULL DEFAULT 0,
    ADD COLUMN retry_jitter    DOUBLE      NOT NULL DEFAULT 0

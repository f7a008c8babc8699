/* rowq:migrate.jobs_add_extra */
-- rowq's job settings beside Fireworq's: priority (higher first), an
-- optional unique key (one pending job per queue and key) and the retry
-- backoff. unique_key is NULL for jobs without one; NULLs never collide.
ALTER TABLE jobs
    ADD COLUMN priority        SMALLINT     NOT NULL DEFAULT 0,
    ADD COLUMN unique_key      VARCHAR(255) NULL,
    ADD COLUMN retry_backoff   VARCHAR(16)  NOT NULL DEFAULT 'fixed',
    ADD COLUMN retry_delay_max INT          NOT NULL DEFAULT 0,
    ADD COLUMN retry_jitter    DOUBLE       NOT NULL DEFAULT 0

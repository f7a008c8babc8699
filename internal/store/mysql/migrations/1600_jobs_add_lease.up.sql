/* rowq:migrate.jobs_add_lease */
-- Accepted-then-complete (docs/workers.md): grabs counts the job's grabs, so
-- that a lease token (an HMAC of the job id and grabs) names one delivery,
-- and a grab writes it in the statement it runs anyway (fixed size: the row
-- is still rewritten in place). progress and progress_message are what the
-- worker's last heartbeat said; they stay NULL for jobs not accepted.
ALTER TABLE jobs
    ADD COLUMN grabs            INT    NOT NULL DEFAULT 0,
    ADD COLUMN progress         DOUBLE NULL,
    ADD COLUMN progress_message TEXT   NULL

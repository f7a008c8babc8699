-- Accepted-then-complete (docs/workers.md): a job a worker accepted is
-- 'leased' until grabbed_until. grabs counts the job's grabs, so that a
-- lease token (an HMAC of the job id and grabs) names one delivery;
-- progress and progress_message are what the worker's last heartbeat said.
ALTER TABLE jobs ADD COLUMN grabs INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN progress REAL;
ALTER TABLE jobs ADD COLUMN progress_message TEXT;

-- The results workers reported with POST /job/{id}/complete, kept for an
-- hour so that the same completion sent again answers 200 and another
-- result for the same delivery answers 409.
CREATE TABLE job_results (
    job_id     INTEGER NOT NULL,
    grabs      INTEGER NOT NULL,
    status     TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (job_id, grabs)
);
CREATE INDEX job_results_created ON job_results (created_at);

-- A failed job keeps its grab count, and a retry from the failure log
-- restores it, so that the lease tokens of the job's next deliveries are
-- new, not those of its first life again.
ALTER TABLE failed_jobs ADD COLUMN grabs INTEGER NOT NULL DEFAULT 0;

-- Jobs cancelled (POST /queue/{name}/job/{id}/cancel), counted per node as
-- the other outcomes are.
ALTER TABLE queue_stats ADD COLUMN cancels INTEGER NOT NULL DEFAULT 0;

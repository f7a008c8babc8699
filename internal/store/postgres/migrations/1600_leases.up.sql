-- Accepted-then-complete (docs/workers.md): a job a worker accepted is
-- 'leased' until grabbed_until. grabs counts the job's grabs, so that a
-- lease token (an HMAC of the job id and grabs) names one delivery;
-- progress and progress_message are what the worker's last heartbeat said.
ALTER TABLE jobs DROP CONSTRAINT jobs_state_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_state_check CHECK (state IN ('waiting', 'grabbed', 'leased'));
ALTER TABLE jobs
    ADD COLUMN grabs            integer NOT NULL DEFAULT 0,
    ADD COLUMN progress         double precision,
    ADD COLUMN progress_message text;

-- The results workers reported with POST /job/{id}/complete, kept for an
-- hour so that the same completion sent again answers 200 and another
-- result for the same delivery answers 409.
CREATE TABLE job_results (
    job_id     bigint      NOT NULL,
    grabs      integer     NOT NULL,
    status     text        NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (job_id, grabs)
);
CREATE INDEX job_results_created ON job_results (created_at);

-- A failed job keeps its grab count, and a retry from the failure log
-- restores it, so that the lease tokens of the job's next deliveries are
-- new, not those of its first life again.
ALTER TABLE failed_jobs ADD COLUMN grabs integer NOT NULL DEFAULT 0;

-- Jobs cancelled (POST /queue/{name}/job/{id}/cancel), counted per node as
-- the other outcomes are.
ALTER TABLE queue_stats ADD COLUMN cancels bigint NOT NULL DEFAULT 0;

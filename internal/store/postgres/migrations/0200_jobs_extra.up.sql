-- rowq's job settings beside Fireworq's: priority (higher first), an
-- optional unique key (one pending job per queue and key; NULLs never
-- collide) and the retry backoff.
ALTER TABLE jobs
    ADD COLUMN priority        smallint         NOT NULL DEFAULT 0,
    ADD COLUMN unique_key      text COLLATE "C",
    ADD COLUMN retry_backoff   text             NOT NULL DEFAULT 'fixed',
    ADD COLUMN retry_delay_max integer          NOT NULL DEFAULT 0,
    ADD COLUMN retry_jitter    double precision NOT NULL DEFAULT 0;

-- Partial: jobs without a key (most) cost the index nothing.
CREATE UNIQUE INDEX jobs_unique ON jobs (queue_name, unique_key) WHERE unique_key IS NOT NULL;

-- The fetch walks this index: WHERE queue_name = $1 AND state = 'waiting'
-- AND next_try <= now() ORDER BY priority DESC, next_try, id, with no sort.
DROP INDEX jobs_fetch;
CREATE INDEX jobs_fetch ON jobs (queue_name, state, priority DESC, next_try, id);

-- The job's settings, so that a retry from the failure log restores them.
ALTER TABLE failed_jobs
    ADD COLUMN timeout         integer          NOT NULL DEFAULT 0,
    ADD COLUMN max_retries     integer          NOT NULL DEFAULT 0,
    ADD COLUMN retry_delay     integer          NOT NULL DEFAULT 0,
    ADD COLUMN priority        smallint         NOT NULL DEFAULT 0,
    ADD COLUMN retry_backoff   text             NOT NULL DEFAULT 'fixed',
    ADD COLUMN retry_delay_max integer          NOT NULL DEFAULT 0,
    ADD COLUMN retry_jitter    double precision NOT NULL DEFAULT 0;

ALTER TABLE queues ADD COLUMN paused boolean NOT NULL DEFAULT false;

-- rowq's job settings beside Fireworq's: priority (higher first), an
-- optional unique key (one pending job per queue and key; NULLs never
-- collide) and the retry backoff.
ALTER TABLE jobs ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN unique_key TEXT;
ALTER TABLE jobs ADD COLUMN retry_backoff TEXT NOT NULL DEFAULT 'fixed';
ALTER TABLE jobs ADD COLUMN retry_delay_max INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN retry_jitter REAL NOT NULL DEFAULT 0;

-- Partial: jobs without a key (most) cost the index nothing.
CREATE UNIQUE INDEX jobs_unique ON jobs (queue_name, unique_key) WHERE unique_key IS NOT NULL;

-- The fetch walks this index: WHERE queue_name=? AND state='waiting' AND
-- next_try<=? ORDER BY priority DESC, next_try, id.
DROP INDEX jobs_fetch;
CREATE INDEX jobs_fetch ON jobs (queue_name, state, priority DESC, next_try);

-- The job's settings, so that a retry from the failure log restores them.
ALTER TABLE failed_jobs ADD COLUMN timeout INTEGER NOT NULL DEFAULT 0;
ALTER TABLE failed_jobs ADD COLUMN max_retries INTEGER NOT NULL DEFAULT 0;
ALTER TABLE failed_jobs ADD COLUMN retry_delay INTEGER NOT NULL DEFAULT 0;
ALTER TABLE failed_jobs ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
ALTER TABLE failed_jobs ADD COLUMN retry_backoff TEXT NOT NULL DEFAULT 'fixed';
ALTER TABLE failed_jobs ADD COLUMN retry_delay_max INTEGER NOT NULL DEFAULT 0;
ALTER TABLE failed_jobs ADD COLUMN retry_jitter REAL NOT NULL DEFAULT 0;

ALTER TABLE queues ADD COLUMN paused INTEGER NOT NULL DEFAULT 0;

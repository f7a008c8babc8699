-- GET /queue/{q}/failed?order=created walks this index.
CREATE INDEX failed_jobs_created ON failed_jobs (queue_name, created_at, id);

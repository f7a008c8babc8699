/* rowq:migrate.failed_jobs_created_index */
-- GET /queue/{q}/failed?order=created walks this index (InnoDB appends id).
CREATE INDEX failed_jobs_created ON failed_jobs (queue_name, created_at)

/* rowq:migrate.failed_jobs_add_grabs */
-- A failed job keeps its grab count, and a retry from the failure log
-- restores it, so that the lease tokens of the job's next deliveries are
-- new, not those of its first life again.
ALTER TABLE failed_jobs ADD COLUMN grabs INT NOT NULL DEFAULT 0

/* rowq:migrate.ordered_jobs_fill */
-- The ordered jobs stored before ordered_jobs existed.
INSERT INTO ordered_jobs (job_id, queue_name, concurrency_key)
    SELECT id, queue_name, concurrency_key FROM jobs WHERE ordered AND concurrency_key IS NOT NULL

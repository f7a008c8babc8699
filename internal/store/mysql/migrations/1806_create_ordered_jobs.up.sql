/* rowq:migrate.create_ordered_jobs */
-- The jobs of ordered keys, by key: the oldest job of an ordered key
-- (JobsKeyHeads) is one probe of ordered_jobs_key. MySQL has no partial
-- index, and an index of jobs by key (jobs_key, 1803) gave every job an
-- entry to write and delete, keyed or not: 15 % of the batch enqueue rate.
-- So an ordered job's key is written here, in the transaction that inserts
-- the job, and deleted with the job (mysql/keys.go).
CREATE TABLE ordered_jobs (
    job_id          BIGINT       NOT NULL,
    queue_name      VARCHAR(255) NOT NULL,
    concurrency_key VARCHAR(191) NOT NULL,
    PRIMARY KEY (job_id),
    KEY ordered_jobs_key (queue_name, concurrency_key, job_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin

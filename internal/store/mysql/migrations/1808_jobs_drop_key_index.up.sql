/* rowq:migrate.jobs_drop_key_index */
-- ordered_jobs (1806) answers what jobs_key did.
ALTER TABLE jobs DROP INDEX jobs_key

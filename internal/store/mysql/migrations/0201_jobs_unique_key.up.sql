/* rowq:migrate.jobs_unique_key */
ALTER TABLE jobs ADD UNIQUE KEY jobs_unique (queue_name, unique_key)

/* rowq:migrate.queues_add_keep_finished */
-- How long, in seconds, a queue keeps its finished jobs in finished_jobs
-- (docs/lifecycle.md); 0 keeps none, as before.
ALTER TABLE queues ADD COLUMN keep_finished INT NOT NULL DEFAULT 0

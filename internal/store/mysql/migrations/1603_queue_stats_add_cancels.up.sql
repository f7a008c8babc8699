/* rowq:migrate.queue_stats_add_cancels */
-- Jobs cancelled (POST /queue/{name}/job/{id}/cancel), counted per node as
-- the other outcomes are.
ALTER TABLE queue_stats ADD COLUMN cancels BIGINT NOT NULL DEFAULT 0

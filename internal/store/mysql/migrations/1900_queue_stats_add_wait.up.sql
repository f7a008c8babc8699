/* rowq:migrate.queue_stats_add_wait */
-- wait_ms: how long the jobs grabbed had waited since they were due, summed
-- (the enqueue→delivery latency the dashboard charts).
ALTER TABLE queue_stats ADD COLUMN wait_ms BIGINT NOT NULL DEFAULT 0

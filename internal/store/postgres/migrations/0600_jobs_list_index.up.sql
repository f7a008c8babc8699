-- The inspection listings (GET /queue/{q}/waiting|deferred|grabbed) walk this index
-- in (next_try, id) order; the fetch walks jobs_fetch, which orders by priority first.
CREATE INDEX jobs_list ON jobs (queue_name, state, next_try, id);

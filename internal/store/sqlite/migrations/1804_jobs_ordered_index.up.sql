-- The oldest job of an ordered key (JobsKeyHeads) is read from an index of
-- ordered jobs only: jobs of keys without order, and unkeyed jobs, pay no
-- index entry (jobs_key, 1802, held every keyed job).
CREATE INDEX jobs_ordered ON jobs (queue_name, concurrency_key, id) WHERE ordered;
DROP INDEX jobs_key;

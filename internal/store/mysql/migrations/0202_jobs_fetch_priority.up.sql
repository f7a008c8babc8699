/* rowq:migrate.jobs_fetch_priority */
-- The fetch walks jobs_fetch: WHERE queue_name = ? AND state = 'waiting' AND
-- next_try <= NOW(6) ORDER BY priority DESC, next_try, id. The descending
-- column (MySQL 8, MariaDB 10.8+) keeps the walk in index order.
ALTER TABLE jobs
    DROP INDEX jobs_fetch,
    ADD INDEX jobs_fetch (queue_name, state, priority DESC, next_try, id)

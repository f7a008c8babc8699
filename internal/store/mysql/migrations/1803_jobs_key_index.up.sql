/* rowq:migrate.jobs_key_index */
-- The oldest job of an ordered key (SELECT MIN(id) … WHERE queue_name = ?
-- AND concurrency_key = ?) is one probe of this index. MySQL has no
-- partial index: unkeyed jobs hold an entry too, (queue_name, NULL, id).
ALTER TABLE jobs ADD INDEX jobs_key (queue_name, concurrency_key, id)

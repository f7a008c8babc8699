/* rowq:migrate.jobs_grab_in_place */
-- A grab (and its release) now rewrites a row in place and moves one index
-- entry, where it used to grow the row and move two (docs/architecture.md,
-- *Tables*):
-- - grabbed_by and grabbed_until are NOT NULL and of fixed size, so setting
--   them does not grow the row. InnoDB stores CHAR(64) in utf8mb4 in at
--   least 64 bytes, so every node id of up to 64 ASCII characters (the
--   limit rowq sets) takes the same space as ''. A grown row had to be
--   moved within its page, and a full page reorganised or split: about one
--   page reorganisation every four jobs of a drained backlog.
-- - jobs_list no longer holds state, so a grab changes only jobs_fetch.
--   The listings of waiting and deferred jobs walk jobs_list and skip the
--   grabbed rows among them (the deliveries in flight, few); grabbed jobs
--   are found on jobs_fetch.
ALTER TABLE jobs
    MODIFY grabbed_by    CHAR(64)    NOT NULL DEFAULT '',
    MODIFY grabbed_until DATETIME(6) NOT NULL,
    DROP INDEX jobs_list,
    ADD INDEX jobs_list (queue_name, next_try, id)

/* rowq:migrate.create_job_deps */
-- The edges from a parent to a dependent that waits for it. An edge lives
-- until its parent or its child ends; a parent's end reads its edges by
-- the primary key, a child's end deletes its own by job_deps_child.
CREATE TABLE job_deps (
    parent_id BIGINT NOT NULL,
    child_id  BIGINT NOT NULL,
    PRIMARY KEY (parent_id, child_id),
    KEY job_deps_child (child_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin

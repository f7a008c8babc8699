/* rowq:migrate.create_locks */
-- One row per lock name, never deleted: last_token is the last fencing
-- token handed out for the name, so tokens keep growing across expiry,
-- release and restarts.
CREATE TABLE locks (
    name       VARCHAR(255) NOT NULL,
    last_token BIGINT       NOT NULL,
    created_at DATETIME(6)  NOT NULL,
    PRIMARY KEY (name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin

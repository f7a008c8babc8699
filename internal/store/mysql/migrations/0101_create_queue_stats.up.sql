/* rowq:migrate.create_queue_stats */
-- One row per (queue, node): each node adds its counts to its own row, so
-- no row is written by two nodes and no row is written per job. node_id ''
-- holds the folded counts of nodes long gone.
CREATE TABLE queue_stats (
    queue_name         VARCHAR(255) NOT NULL,
    node_id            VARCHAR(255) NOT NULL,
    pushes             BIGINT       NOT NULL DEFAULT 0,
    pops               BIGINT       NOT NULL DEFAULT 0,
    successes          BIGINT       NOT NULL DEFAULT 0,
    failures           BIGINT       NOT NULL DEFAULT 0,
    permanent_failures BIGINT       NOT NULL DEFAULT 0,
    completes          BIGINT       NOT NULL DEFAULT 0,
    elapsed_ms         BIGINT       NOT NULL DEFAULT 0,
    busy_workers       INT          NOT NULL DEFAULT 0,
    pushes_per_second  DOUBLE       NOT NULL DEFAULT 0,
    pops_per_second    DOUBLE       NOT NULL DEFAULT 0,
    updated_at         DATETIME(6)  NOT NULL,
    PRIMARY KEY (queue_name, node_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin

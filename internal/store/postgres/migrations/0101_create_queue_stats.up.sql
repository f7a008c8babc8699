-- One row per (queue, node): each node adds its counts to its own row, so
-- no row is written by two nodes and no row is written per job. node_id ''
-- holds the folded counts of nodes long gone.
CREATE TABLE queue_stats (
    queue_name         text COLLATE "C" NOT NULL,
    node_id            text COLLATE "C" NOT NULL,
    pushes             bigint           NOT NULL DEFAULT 0,
    pops               bigint           NOT NULL DEFAULT 0,
    successes          bigint           NOT NULL DEFAULT 0,
    failures           bigint           NOT NULL DEFAULT 0,
    permanent_failures bigint           NOT NULL DEFAULT 0,
    completes          bigint           NOT NULL DEFAULT 0,
    elapsed_ms         bigint           NOT NULL DEFAULT 0,
    busy_workers       integer          NOT NULL DEFAULT 0,
    pushes_per_second  double precision NOT NULL DEFAULT 0,
    pops_per_second    double precision NOT NULL DEFAULT 0,
    updated_at         timestamptz      NOT NULL,
    PRIMARY KEY (queue_name, node_id)
);

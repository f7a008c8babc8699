-- One row per (queue, node): each node adds its counts to its own row, so
-- no row is written by two nodes and no row is written per job. node_id ''
-- holds the folded counts of nodes long gone.
CREATE TABLE queue_stats (
    queue_name         TEXT    NOT NULL,
    node_id            TEXT    NOT NULL,
    pushes             INTEGER NOT NULL DEFAULT 0,
    pops               INTEGER NOT NULL DEFAULT 0,
    successes          INTEGER NOT NULL DEFAULT 0,
    failures           INTEGER NOT NULL DEFAULT 0,
    permanent_failures INTEGER NOT NULL DEFAULT 0,
    completes          INTEGER NOT NULL DEFAULT 0,
    elapsed_ms         INTEGER NOT NULL DEFAULT 0,
    busy_workers       INTEGER NOT NULL DEFAULT 0,
    pushes_per_second  REAL    NOT NULL DEFAULT 0,
    pops_per_second    REAL    NOT NULL DEFAULT 0,
    updated_at         INTEGER NOT NULL,
    PRIMARY KEY (queue_name, node_id)
);

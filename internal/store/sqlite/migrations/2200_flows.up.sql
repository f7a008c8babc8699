-- Job flows (issue 31, docs/flows.md): callbacks, dependencies and
-- batches. A job with any of them has flow = 1 and a row in job_flows; the
-- statements that end jobs without reading them leave those rows to a read
-- path (flow = 0), so that jobs without a flow cost what they did. A job
-- that waits for parents is stored with state 'blocked'.
ALTER TABLE jobs ADD COLUMN flow INTEGER NOT NULL DEFAULT 0;

-- The callbacks (store.EncodeCallback), the batch and the parents a live
-- job still waits for; deleted when the job ends.
CREATE TABLE job_flows (
    job_id            INTEGER NOT NULL PRIMARY KEY,
    batch_id          INTEGER,
    on_success        TEXT,
    on_failure        TEXT,
    on_finish         TEXT,
    pending           INTEGER NOT NULL DEFAULT 0,
    on_parent_failure TEXT    NOT NULL DEFAULT 'cancel'
);

-- An edge from a parent to a child that waits for it; it lives until the
-- parent or the child ends.
CREATE TABLE job_deps (
    parent_id INTEGER NOT NULL,
    child_id  INTEGER NOT NULL,
    PRIMARY KEY (parent_id, child_id)
) WITHOUT ROWID;

CREATE INDEX job_deps_child ON job_deps (child_id);

CREATE TABLE batches (
    id          INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    total       INTEGER NOT NULL,
    pending     INTEGER NOT NULL,
    succeeded   INTEGER NOT NULL DEFAULT 0,
    failed      INTEGER NOT NULL DEFAULT 0,
    cancelled   INTEGER NOT NULL DEFAULT 0,
    created_at  INTEGER NOT NULL,
    finished_at INTEGER,
    meta        TEXT,
    on_success  TEXT,
    on_finish   TEXT
);

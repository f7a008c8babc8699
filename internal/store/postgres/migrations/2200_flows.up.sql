-- Flows (docs/lifecycle.md): callbacks on a job's outcome, dependencies
-- between jobs, and batches. A job with any of them has flow set and
-- (when it has callbacks, parents or a batch) a row in job_flows; every
-- statement that ends jobs without reading them leaves flow rows to a
-- read path that applies their flows in the same transaction. A column
-- with a constant default is added without rewriting the table.
ALTER TABLE jobs ADD COLUMN flow boolean NOT NULL DEFAULT false;

-- A job that waits for its parents is 'blocked': no grab, probe or rescue
-- reads that state. The new check is wider than the one it replaces, which
-- every row passed: NOT VALID spares a scan of the whole backlog under the
-- table's exclusive lock (new and updated rows are checked all the same).
ALTER TABLE jobs DROP CONSTRAINT jobs_state_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_state_check CHECK (state IN ('waiting', 'grabbed', 'leased', 'blocked')) NOT VALID;

-- A job's callbacks (store.EncodeCallback's JSON, kept as text), its batch,
-- and how many parents it still waits for.
CREATE TABLE job_flows (
    job_id            bigint  NOT NULL PRIMARY KEY,
    batch_id          bigint,
    on_success        text,
    on_failure        text,
    on_finish         text,
    pending           integer NOT NULL DEFAULT 0,
    on_parent_failure text    NOT NULL DEFAULT 'cancel'
);

-- An edge lives until its parent or its child ends: the parents a blocked
-- job still waits for, the dependents a live job has.
CREATE TABLE job_deps (
    parent_id bigint NOT NULL,
    child_id  bigint NOT NULL,
    PRIMARY KEY (parent_id, child_id)
);
CREATE INDEX job_deps_child ON job_deps (child_id);

CREATE TABLE batches (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    total       integer     NOT NULL,
    pending     integer     NOT NULL,
    succeeded   integer     NOT NULL DEFAULT 0,
    failed      integer     NOT NULL DEFAULT 0,
    cancelled   integer     NOT NULL DEFAULT 0,
    created_at  timestamptz NOT NULL,
    finished_at timestamptz,
    meta        text,
    on_success  text,
    on_finish   text
);

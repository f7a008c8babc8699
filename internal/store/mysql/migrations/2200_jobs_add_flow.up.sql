/* rowq:migrate.jobs_add_flow */
-- A job with a flow (callbacks, parents, dependents or a batch: flow.go)
-- has flow = 1 and ends through a read path that applies it; the
-- statements that end jobs without reading them leave such rows alone
-- (AND flow = 0). No index: the column is read with the row. On MariaDB
-- the column is added in place (instant ADD COLUMN).
ALTER TABLE jobs ADD COLUMN flow TINYINT NOT NULL DEFAULT 0

-- A schedule's job template takes a concurrency key, limit and ordering
-- (docs/flow-control.md), which every job it enqueues gets.
ALTER TABLE schedules
    ADD COLUMN concurrency_key   text COLLATE "C",
    ADD COLUMN concurrency_limit integer NOT NULL DEFAULT 0,
    ADD COLUMN ordered           boolean NOT NULL DEFAULT false;

-- A schedule's job template takes a concurrency key, limit and ordering
-- (docs/flow-control.md), which every job it enqueues gets.
ALTER TABLE schedules ADD COLUMN concurrency_key TEXT;
ALTER TABLE schedules ADD COLUMN concurrency_limit INTEGER NOT NULL DEFAULT 0;
ALTER TABLE schedules ADD COLUMN ordered INTEGER NOT NULL DEFAULT 0;

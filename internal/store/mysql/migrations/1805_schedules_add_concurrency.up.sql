/* rowq:migrate.schedules_add_concurrency */
-- A schedule's job template takes a concurrency key, limit and ordering
-- (docs/flow-control.md), which every job it enqueues gets.
ALTER TABLE schedules
    ADD COLUMN concurrency_key   VARCHAR(191) NULL,
    ADD COLUMN concurrency_limit INT          NOT NULL DEFAULT 0,
    ADD COLUMN ordered           BOOLEAN      NOT NULL DEFAULT FALSE

/* rowq:migrate.jobs_add_deferrals */
-- deferrals: how often the job's worker answered 429 or 503 with
-- Retry-After; such a deferral spends no retry, up to a bound
-- (docs/flow-control.md).
ALTER TABLE jobs ADD COLUMN deferrals INT NOT NULL DEFAULT 0

/* rowq:migrate.jobs_grab_fill */
-- Prepares 0701: grabbed_by and grabbed_until become NOT NULL; on rows
-- that are not grabbed their values mean nothing.
UPDATE jobs SET grabbed_by = '', grabbed_until = created_at
WHERE grabbed_by IS NULL OR grabbed_until IS NULL

/* rowq:migrate.jobs_add_trace */
-- The W3C trace context a job was enqueued with (traceparent, always in its
-- 55-character version 00 form, and tracestate, cut to 512 characters), sent
-- with each delivery so that the worker's span joins the enqueuer's trace.
-- NULL for none; written by the insert and never changed, so a grab still
-- rewrites the row in place.
ALTER TABLE jobs
    ADD COLUMN traceparent VARCHAR(55)  NULL,
    ADD COLUMN tracestate  VARCHAR(512) NULL

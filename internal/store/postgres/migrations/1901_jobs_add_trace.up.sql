-- The W3C trace context a job was enqueued with (traceparent in its version
-- 00 form, tracestate cut to 512 characters), sent with each delivery so
-- that the worker's span joins the enqueuer's trace; NULL for none.
ALTER TABLE jobs
    ADD COLUMN traceparent text,
    ADD COLUMN tracestate  text;

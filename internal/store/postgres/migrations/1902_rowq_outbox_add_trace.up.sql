-- The job's W3C trace context, as the traceparent and tracestate fields of
-- POST /job take it (docs/outbox.md); NULL for none. Nullable: the table's
-- columns are a public contract, and an application's INSERT that names
-- only the older ones goes on working. A reject keeps them as they were.
ALTER TABLE rowq_outbox
    ADD COLUMN traceparent text,
    ADD COLUMN tracestate  text;
ALTER TABLE rowq_outbox_rejects
    ADD COLUMN traceparent text,
    ADD COLUMN tracestate  text;

/* rowq:migrate.rowq_outbox_add_trace */
-- The job's W3C trace context, as the traceparent and tracestate fields of
-- POST /job take it (docs/outbox.md); NULL for none. Nullable: the table's
-- columns are a public contract, and an application's INSERT that names
-- only the older ones goes on working.
ALTER TABLE rowq_outbox
    ADD COLUMN traceparent TEXT NULL,
    ADD COLUMN tracestate  TEXT NULL

/* rowq:migrate.rowq_outbox_rejects_add_trace */
-- A reject keeps the row's trace context columns as they were.
ALTER TABLE rowq_outbox_rejects
    ADD COLUMN traceparent TEXT NULL,
    ADD COLUMN tracestate  TEXT NULL

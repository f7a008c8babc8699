package sqldb

import (
	"strings"

	"github.com/rowq/rowq/internal/store"
)

// OutboxCols are the columns of rowq_outbox but its id, in the order the
// dialects scan them; rowq_outbox_rejects has them too.
const OutboxCols = "category, url, payload, run_after, max_retries, retry_delay, timeout, priority, unique_key, traceparent, tracestate, created_at"

// OutboxReadSQL reads the first rows of the outbox: a walk of the primary
// key from its start, which stops at the limit.
const OutboxReadSQL = `/* rowq:outbox.read */ SELECT id, ` + OutboxCols + ` FROM rowq_outbox ORDER BY id LIMIT ?`

// OutboxArgs are the values an application writes in a row's columns.
func OutboxArgs(r *store.OutboxRow) []any {
	return []any{r.Category, r.URL, r.Payload, r.RunAfter, r.MaxRetries, r.RetryDelay, r.Timeout, r.Priority, r.UniqueKey, r.TraceParent, r.TraceState}
}

// OutboxInsertSQL returns one multi-row INSERT of rows into rowq_outbox and
// its arguments.
func OutboxInsertSQL(rows []*store.OutboxRow) (string, []any) {
	var q strings.Builder
	q.WriteString(`/* rowq:outbox.insert */ INSERT INTO rowq_outbox
		(category, url, payload, run_after, max_retries, retry_delay, timeout, priority, unique_key, traceparent, tracestate) VALUES `)
	args := make([]any, 0, 11*len(rows))
	for i, r := range rows {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString("(" + Placeholders(11) + ")")
		args = append(args, OutboxArgs(r)...)
	}
	return q.String(), args
}

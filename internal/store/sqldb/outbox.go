package sqldb

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/rowq/rowq/internal/store"
)

// OutboxCols are the columns of rowq_outbox but its id, in the order the
// dialects scan them; rowq_outbox_rejects has them too.
const OutboxCols = OutboxWritten + ", created_at"

// OutboxWritten are the columns an application writes (OutboxArgs).
const OutboxWritten = "category, url, payload, run_after, max_retries, retry_delay, timeout, priority, unique_key, traceparent, tracestate, " +
	"concurrency_key, concurrency_limit, ordered"

// OutboxReadSQL reads the first rows of the outbox: a walk of the primary
// key from its start, which stops at the limit.
const OutboxReadSQL = `/* rowq:outbox.read */ SELECT id, ` + OutboxCols + ` FROM rowq_outbox ORDER BY id LIMIT ?`

// OutboxArgs are the values an application writes in a row's columns.
func OutboxArgs(r *store.OutboxRow) []any {
	return []any{r.Category, r.URL, r.Payload, r.RunAfter, r.MaxRetries, r.RetryDelay, r.Timeout, r.Priority, r.UniqueKey, r.TraceParent, r.TraceState,
		r.ConcurrencyKey, r.ConcurrencyLimit, r.Ordered}
}

// OutboxArgCount is how many values OutboxArgs gives.
const OutboxArgCount = 14

// OutboxDest are the destinations of sqldb.OutboxCols but created_at, into
// r. ordered is scanned as MySQL's and SQLite's integer columns hold a
// boolean: any number but 0 is true, as in their WHERE.
func OutboxDest(r *store.OutboxRow) []any {
	return []any{&r.Category, &r.URL, &r.Payload, &r.RunAfter, &r.MaxRetries, &r.RetryDelay,
		&r.Timeout, &r.Priority, &r.UniqueKey, &r.TraceParent, &r.TraceState,
		&r.ConcurrencyKey, &r.ConcurrencyLimit, intBool{&r.Ordered}}
}

// intBool scans an integer (or a boolean) column into a *bool, nil for
// NULL: 0 is false, any other number true.
type intBool struct{ p **bool }

func (b intBool) Scan(src any) error {
	var v bool
	switch x := src.(type) {
	case nil:
		*b.p = nil
		return nil
	case int64:
		v = x != 0
	case bool:
		v = x
	case []byte:
		n, err := strconv.ParseInt(string(x), 10, 64)
		if err != nil {
			return fmt.Errorf("ordered: %q is not a number", x)
		}
		v = n != 0
	default:
		return fmt.Errorf("ordered: cannot scan %T", src)
	}
	*b.p = &v
	return nil
}

// OutboxInsertSQL returns one multi-row INSERT of rows into rowq_outbox and
// its arguments.
func OutboxInsertSQL(rows []*store.OutboxRow) (string, []any) {
	var q strings.Builder
	q.WriteString(`/* rowq:outbox.insert */ INSERT INTO rowq_outbox (` + OutboxWritten + `) VALUES `)
	args := make([]any, 0, OutboxArgCount*len(rows))
	for i, r := range rows {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString("(" + Placeholders(OutboxArgCount) + ")")
		args = append(args, OutboxArgs(r)...)
	}
	return q.String(), args
}

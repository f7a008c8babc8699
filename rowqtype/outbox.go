package rowqtype

import "time"

// OutboxReject is a row of the transactional outbox that was not a valid
// job (GET /outbox/rejects): the row as the application wrote it (null
// for a NULL column), and why it was refused.
type OutboxReject struct {
	ID         int64   `json:"id"`
	OutboxID   int64   `json:"outbox_id"` // the row's id in rowq_outbox
	Category   string  `json:"category"`
	URL        *string `json:"url"`
	Payload    *string `json:"payload"` // the column's text, as written
	RunAfter   *int    `json:"run_after"`
	MaxRetries *int    `json:"max_retries"`
	RetryDelay *int    `json:"retry_delay"`
	Timeout    *int    `json:"timeout"`
	Priority   *int    `json:"priority"`
	UniqueKey  *string `json:"unique_key"`
	// TraceParent and TraceState are the row's W3C trace context columns.
	TraceParent *string `json:"traceparent"`
	TraceState  *string `json:"tracestate"`
	// ConcurrencyKey, ConcurrencyLimit and Ordered are the row's per-key
	// concurrency columns.
	ConcurrencyKey   *string   `json:"concurrency_key"`
	ConcurrencyLimit *int      `json:"concurrency_limit"`
	Ordered          *bool     `json:"ordered"`
	CreatedAt        time.Time `json:"created_at"` // when the row was inserted
	Reason           string    `json:"reason"`     // names the column: "url: required"
	RejectedAt       time.Time `json:"rejected_at"`
}

// OutboxRejectPage is one page of the outbox's rejects, oldest first;
// NextCursor is left out on the last.
type OutboxRejectPage struct {
	Rejects    []*OutboxReject `json:"rejects"`
	NextCursor string          `json:"next_cursor,omitempty"`
}

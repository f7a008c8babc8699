package rowqtype

import (
	"encoding/json"
	"time"
)

// FailedJob is an entry of a queue's failure log.
type FailedJob struct {
	ID        int64           `json:"id"`
	JobID     int64           `json:"job_id"`
	QueueName string          `json:"queue_name"`
	Category  string          `json:"category"`
	URL       string          `json:"url"`
	Payload   json.RawMessage `json:"payload,omitempty"`
	Result    FailedResult    `json:"result"`
	FailCount int             `json:"fail_count"`
	FailedAt  time.Time       `json:"failed_at"`
	CreatedAt time.Time       `json:"created_at"`
	// The job's concurrency settings (rowq's), which a retry restores;
	// sent only when it has a key.
	ConcurrencyKey   string `json:"concurrency_key,omitempty"`
	ConcurrencyLimit int    `json:"concurrency_limit,omitempty"`
	Ordered          bool   `json:"ordered,omitempty"`
}

// FailedResult is the outcome of a failed job's last delivery.
type FailedResult struct {
	Status  string `json:"status"`  // "failure" or "permanent-failure"
	Code    int    `json:"code"`    // the worker's HTTP status, 0 when none came
	Message string `json:"message"` // the worker's message, or the error
}

// FailedJobPage is one page of a failure log; NextCursor is left out on
// the last.
type FailedJobPage struct {
	FailedJobs []*FailedJob `json:"failed_jobs"`
	NextCursor string       `json:"next_cursor,omitempty"`
}

// FailedBulkRequest is the optional body of POST /queue/{name}/failed/retry
// and DELETE /queue/{name}/failed: the entries to act on, or every entry
// of the queue when IDs is null (or the body absent). Not omitempty: an
// empty list names no entry.
type FailedBulkRequest struct {
	IDs []int64 `json:"ids"`
}

// FailedRetryResult is the answer of POST /queue/{name}/failed/retry.
type FailedRetryResult struct {
	Retried int `json:"retried"` // entries put back in the queue
}

// FailedDeleteResult is the answer of DELETE /queue/{name}/failed.
type FailedDeleteResult struct {
	Deleted int `json:"deleted"` // entries deleted
}

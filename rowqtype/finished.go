package rowqtype

import (
	"encoding/json"
	"time"
)

// Statuses of a finished job (FinishedJob.Status).
const (
	FinishedSucceeded = "succeeded"
	FinishedFailed    = "failed"
	FinishedCancelled = "cancelled"
)

// FinishedJob is a job that left a queue keeping its finished jobs
// (keep_finished), as GET /queue/{name}/job/{id} answers it once the job
// is no longer live, and GET /queue/{name}/finished lists it.
type FinishedJob struct {
	ID        int64           `json:"id"`
	QueueName string          `json:"queue_name"`
	Category  string          `json:"category"`
	URL       string          `json:"url"`
	Payload   json.RawMessage `json:"payload,omitempty"`
	// Status is FinishedSucceeded, FinishedFailed (for good: the failure
	// log has it too) or FinishedCancelled.
	Status string `json:"status"`
	// Attempts counts the deliveries that ended, the last included.
	Attempts  int       `json:"attempts"`
	CreatedAt time.Time `json:"created_at"`
	// StartedAt is when the last attempt became due; left out for a job
	// cancelled before any attempt.
	StartedAt  *time.Time `json:"started_at,omitempty"`
	FinishedAt time.Time  `json:"finished_at"`
	// Message is the last attempt's message: the worker's, a failure's,
	// or rowq's note (a result dropped over --max-result-bytes).
	Message string `json:"message"`
	// Result is what the worker's success returned; left out when none.
	Result json.RawMessage `json:"result,omitempty"`
}

// FinishedJobPage is one page of GET /queue/{name}/finished, the latest
// finished first; NextCursor is left out on the last.
type FinishedJobPage struct {
	FinishedJobs []*FinishedJob `json:"finished_jobs"`
	NextCursor   string         `json:"next_cursor,omitempty"`
}

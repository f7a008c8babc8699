package rowqtype

import (
	"encoding/json"
	"time"
)

// JobHeartbeat is the body of POST /job/{id}/heartbeat: a worker that
// accepted the job renews its lease.
type JobHeartbeat struct {
	// LeaseToken is the delivery's Rowq-Lease-Token.
	LeaseToken string `json:"lease_token"`
	// Lease is the new lease, in seconds from now: 1..86400.
	Lease *float64 `json:"lease"`
	// Progress (0..1) and Message are shown in the job's inspection;
	// left out, the last ones stay.
	Progress *float64 `json:"progress,omitempty"`
	Message  *string  `json:"message,omitempty"`
}

// JobLease is the answer to POST /job/{id}/heartbeat.
type JobLease struct {
	ID             int64     `json:"id"`
	LeaseExpiresAt time.Time `json:"lease_expires_at"`
}

// JobCompletion is the body of POST /job/{id}/complete: the result of an
// accepted job, as a worker would have answered its delivery.
type JobCompletion struct {
	LeaseToken string `json:"lease_token"`
	// Status is "success", "failure" (retried while retries are left) or
	// "permanent-failure".
	Status  string `json:"status"`
	Message string `json:"message,omitempty"`
	// RetryAfter (seconds) replaces the job's backoff before the retry of
	// a failure.
	RetryAfter *float64 `json:"retry_after,omitempty"`
	// Result is any JSON value a success returns, kept in the job's
	// history when its queue keeps finished jobs (at most the server's
	// --max-result-bytes: a larger one answers 413 and records nothing).
	Result json.RawMessage `json:"result,omitempty"`
}

// JobCompleted is the answer to POST /job/{id}/complete.
type JobCompleted struct {
	ID     int64  `json:"id"`
	Status string `json:"status"`
}

// Reasons of a LeaseConflict.
const (
	// LeaseLost: the lease is no longer held (it ran out and the job was
	// retried, failed or delivered again; the job was deleted; or the
	// token is not one of this job's deliveries).
	LeaseLost = "lease_lost"
	// LeaseCompleted: this delivery was completed with another result.
	LeaseCompleted = "completed"
	// LeaseCancelled: the job was cancelled (POST
	// /queue/{name}/job/{id}/cancel).
	LeaseCancelled = "cancelled"
)

// LeaseConflict is the 409 answer of a heartbeat or completion whose
// lease is no longer held: the worker should stop working on the job.
type LeaseConflict struct {
	Error  string `json:"error"`
	Reason string `json:"reason"` // LeaseLost, LeaseCompleted or LeaseCancelled
}

// LeaseRequest is the body of POST /queue/{name}/lease: a pull worker's
// request for jobs. A nil field takes its default.
type LeaseRequest struct {
	// Max bounds the jobs leased: 1..100 (1).
	Max *int `json:"max,omitempty"`
	// Wait is how long to wait for a first job, in seconds: 0..30 (0).
	Wait *float64 `json:"wait,omitempty"`
	// Lease is how long the jobs are leased, in seconds: 1..86400 (60).
	Lease *float64 `json:"lease,omitempty"`
}

// LeasedJob is a job leased to a pull worker, which renews its lease
// (POST /job/{id}/heartbeat) and completes it (POST /job/{id}/complete)
// with its lease token.
type LeasedJob struct {
	ID             int64           `json:"id"`
	QueueName      string          `json:"queue_name"`
	Category       string          `json:"category"`
	Payload        json.RawMessage `json:"payload,omitempty"`
	Attempt        int             `json:"attempt"` // 1 for the first delivery
	MaxRetries     int             `json:"max_retries"`
	Timeout        int             `json:"timeout"` // seconds the job's creator gave it, 0 for none
	Priority       int             `json:"priority"`
	CreatedAt      time.Time       `json:"created_at"`
	LeaseToken     string          `json:"lease_token"`
	LeaseExpiresAt time.Time       `json:"lease_expires_at"`
}

// LeasedJobs is the answer to POST /queue/{name}/lease: the jobs leased,
// none when the wait ended first.
type LeasedJobs struct {
	Jobs []LeasedJob `json:"jobs"`
}

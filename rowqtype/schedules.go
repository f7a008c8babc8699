package rowqtype

import (
	"encoding/json"
	"time"
)

// ScheduleRequest is the body of PUT /schedule/{name}, which creates or
// replaces the schedule. Durations are seconds; nil and "" take the
// server's defaults (timezone UTC, misfire once, max_catchup 100, overlap
// allow).
type ScheduleRequest struct {
	Cron       string          `json:"cron"`               // 5 fields, 6 with seconds first, or @daily… (required)
	Timezone   string          `json:"timezone,omitempty"` // IANA name of the cron's zone
	Category   string          `json:"category"`           // routed like POST /job/{category} (required)
	URL        string          `json:"url"`                // the worker's URL (required)
	Payload    json.RawMessage `json:"payload,omitempty"`
	MaxRetries *int            `json:"max_retries,omitempty"`
	RetryDelay *int            `json:"retry_delay,omitempty"`
	Timeout    *int            `json:"timeout,omitempty"`
	// ConcurrencyKey, ConcurrencyLimit and Ordered go to every job the
	// schedule enqueues, as POST /job takes them (docs/flow-control.md).
	ConcurrencyKey   *string `json:"concurrency_key,omitempty"`
	ConcurrencyLimit *int    `json:"concurrency_limit,omitempty"`
	Ordered          *bool   `json:"ordered,omitempty"`
	Misfire          string  `json:"misfire,omitempty"`     // ticks missed while no node ran: skip, once or all
	MaxCatchup       *int    `json:"max_catchup,omitempty"` // most missed ticks run with misfire all
	Overlap          string  `json:"overlap,omitempty"`     // allow, or skip a tick while the last run's job is pending
	Paused           bool    `json:"paused,omitempty"`      // create or keep it paused
}

// Schedule is a stored schedule.
type Schedule struct {
	Name       string          `json:"name"`
	Cron       string          `json:"cron"`
	Timezone   string          `json:"timezone"`
	Category   string          `json:"category"`
	URL        string          `json:"url"`
	Payload    json.RawMessage `json:"payload,omitempty"`
	MaxRetries int             `json:"max_retries"`
	RetryDelay int             `json:"retry_delay"`
	Timeout    int             `json:"timeout"`
	// The jobs' concurrency settings, sent only when they have a key.
	ConcurrencyKey   string `json:"concurrency_key,omitempty"`
	ConcurrencyLimit int    `json:"concurrency_limit,omitempty"`
	Ordered          bool   `json:"ordered,omitempty"`
	Misfire          string `json:"misfire"`
	MaxCatchup       int    `json:"max_catchup"`
	Overlap          string `json:"overlap"`
	Paused           bool   `json:"paused"`
	// NextRunAt is null while the schedule is paused.
	NextRunAt *time.Time `json:"next_run_at"`
	// NextRuns are the next fire times; while paused, those it would
	// have if resumed now, each marked Paused.
	NextRuns  []NextRun `json:"next_runs"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// NextRun is a fire time in the schedule's zone and in UTC (RFC 3339).
type NextRun struct {
	Local string `json:"local"`
	UTC   string `json:"utc"`
	// Paused: the schedule is paused; this is when it would fire if it
	// were resumed now.
	Paused bool `json:"paused,omitempty"`
}

// ScheduleRun is an entry of a schedule's run history, and the answer of
// POST /schedule/{name}/trigger.
type ScheduleRun struct {
	ID       int64     `json:"id"`
	Schedule string    `json:"schedule"`
	Kind     string    `json:"kind"` // "tick" or "trigger"
	Tick     time.Time `json:"tick"`
	FiredAt  time.Time `json:"fired_at"`
	Node     string    `json:"node"`
	JobID    *int64    `json:"job_id"`               // null when skipped
	Queue    string    `json:"queue_name,omitempty"` // the job's queue; left out when none
	Skipped  bool      `json:"skipped"`
	Reason   string    `json:"reason,omitempty"` // why it was skipped
}

// SchedulePage is one page of GET /schedules, by name; NextCursor is left
// out on the last.
type SchedulePage struct {
	Schedules  []*Schedule `json:"schedules"`
	NextCursor string      `json:"next_cursor,omitempty"`
}

// ScheduleRunPage is one page of a schedule's run history, newest first;
// NextCursor is left out on the last.
type ScheduleRunPage struct {
	Runs       []*ScheduleRun `json:"runs"`
	NextCursor string         `json:"next_cursor,omitempty"`
}

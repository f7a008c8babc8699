package client

import (
	"context"
	"encoding/json"
	"net/http"
	"time"
)

// NewSchedule is a schedule to create or replace. Zero values take the
// server's defaults (timezone UTC, misfire once, max_catchup 100, overlap
// allow). Durations are seconds.
type NewSchedule struct {
	Cron       string          `json:"cron"`
	Timezone   string          `json:"timezone,omitempty"`
	Category   string          `json:"category"`
	URL        string          `json:"url"`
	Payload    json.RawMessage `json:"payload,omitempty"`
	MaxRetries int64           `json:"max_retries,omitempty"`
	RetryDelay int64           `json:"retry_delay,omitempty"`
	Timeout    int64           `json:"timeout,omitempty"`
	Misfire    string          `json:"misfire,omitempty"`     // skip, once or all
	MaxCatchup int64           `json:"max_catchup,omitempty"` // bound for misfire all
	Overlap    string          `json:"overlap,omitempty"`     // allow or skip
	Paused     bool            `json:"paused,omitempty"`
}

// Schedule is a stored schedule.
type Schedule struct {
	Name       string          `json:"name"`
	Cron       string          `json:"cron"`
	Timezone   string          `json:"timezone"`
	Category   string          `json:"category"`
	URL        string          `json:"url"`
	Payload    json.RawMessage `json:"payload,omitempty"`
	MaxRetries int64           `json:"max_retries"`
	RetryDelay int64           `json:"retry_delay"`
	Timeout    int64           `json:"timeout"`
	Misfire    string          `json:"misfire"`
	MaxCatchup int64           `json:"max_catchup"`
	Overlap    string          `json:"overlap"`
	Paused     bool            `json:"paused"`
	// NextRunAt is nil while the schedule is paused.
	NextRunAt *time.Time `json:"next_run_at"`
	// NextRuns are the next fire times (empty while paused).
	NextRuns  []NextRun `json:"next_runs"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// NextRun is a fire time in the schedule's zone and in UTC (RFC 3339).
type NextRun struct {
	Local string `json:"local"`
	UTC   string `json:"utc"`
}

// ScheduleRun is an entry of a schedule's run history.
type ScheduleRun struct {
	ID       int64     `json:"id"`
	Schedule string    `json:"schedule"`
	Kind     string    `json:"kind"` // "tick" or "trigger"
	Tick     time.Time `json:"tick"`
	FiredAt  time.Time `json:"fired_at"`
	Node     string    `json:"node"`
	JobID    *int64    `json:"job_id"` // nil when skipped
	Queue    string    `json:"queue_name,omitempty"`
	Skipped  bool      `json:"skipped"`
	Reason   string    `json:"reason,omitempty"`
}

// SchedulePage is one page of GET /schedules.
type SchedulePage struct {
	Schedules  []*Schedule `json:"schedules"`
	NextCursor string      `json:"next_cursor,omitempty"` // "" on the last page
}

// ScheduleRunPage is one page of a schedule's run history, newest first.
type ScheduleRunPage struct {
	Runs       []*ScheduleRun `json:"runs"`
	NextCursor string         `json:"next_cursor,omitempty"` // "" on the last page
}

// PutSchedule creates or replaces a schedule (PUT /schedule/{name}).
func (c *Client) PutSchedule(ctx context.Context, name string, s *NewSchedule) (*Schedule, error) {
	var out Schedule
	if err := c.Do(ctx, http.MethodPut, "/schedule/"+esc(name), nil, s, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Schedule returns one schedule (GET /schedule/{name}).
func (c *Client) Schedule(ctx context.Context, name string) (*Schedule, error) {
	var out Schedule
	if err := c.Do(ctx, http.MethodGet, "/schedule/"+esc(name), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Schedules returns a page of schedules by name (GET /schedules). opts
// may be nil; its Order is not used.
func (c *Client) Schedules(ctx context.Context, opts *ListOptions) (*SchedulePage, error) {
	var out SchedulePage
	if err := c.Do(ctx, http.MethodGet, "/schedules", opts.query(), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteSchedule removes a schedule and its history (DELETE
// /schedule/{name}) and returns it.
func (c *Client) DeleteSchedule(ctx context.Context, name string) (*Schedule, error) {
	return c.scheduleAction(ctx, http.MethodDelete, name, "")
}

// PauseSchedule stops a schedule's ticks (POST /schedule/{name}/pause).
func (c *Client) PauseSchedule(ctx context.Context, name string) (*Schedule, error) {
	return c.scheduleAction(ctx, http.MethodPost, name, "/pause")
}

// ResumeSchedule resumes a paused schedule from its next tick after now;
// ticks that passed while paused are not run (POST /schedule/{name}/resume).
func (c *Client) ResumeSchedule(ctx context.Context, name string) (*Schedule, error) {
	return c.scheduleAction(ctx, http.MethodPost, name, "/resume")
}

func (c *Client) scheduleAction(ctx context.Context, method, name, suffix string) (*Schedule, error) {
	var out Schedule
	if err := c.Do(ctx, method, "/schedule/"+esc(name)+suffix, nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// TriggerSchedule enqueues one run now, outside the ticks (POST
// /schedule/{name}/trigger).
func (c *Client) TriggerSchedule(ctx context.Context, name string) (*ScheduleRun, error) {
	var out ScheduleRun
	if err := c.Do(ctx, http.MethodPost, "/schedule/"+esc(name)+"/trigger", nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ScheduleRuns returns a page of a schedule's run history, newest first
// (GET /schedule/{name}/runs). opts may be nil; its Order is not used.
func (c *Client) ScheduleRuns(ctx context.Context, name string, opts *ListOptions) (*ScheduleRunPage, error) {
	var out ScheduleRunPage
	if err := c.Do(ctx, http.MethodGet, "/schedule/"+esc(name)+"/runs", opts.query(), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

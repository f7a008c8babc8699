package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// Job is a stored job as the inspection endpoints answer it.
type Job struct {
	ID         int64           `json:"id"`
	QueueName  string          `json:"queue_name"`
	Category   string          `json:"category"`
	URL        string          `json:"url"`
	Payload    json.RawMessage `json:"payload,omitempty"`
	Status     string          `json:"status"` // "claimed" (waiting or deferred) or "grabbed"
	CreatedAt  time.Time       `json:"created_at"`
	NextTry    time.Time       `json:"next_try"`
	Timeout    int             `json:"timeout"`
	FailCount  int             `json:"fail_count"`
	MaxRetries int             `json:"max_retries"`
	RetryDelay int             `json:"retry_delay"`
	GrabbedBy  string          `json:"grabbed_by,omitempty"`
	// GrabbedUntil is when a grabbed job's grab expires unless extended.
	GrabbedUntil *time.Time `json:"grabbed_until,omitempty"`
}

// Kinds of jobs ListJobs lists.
const (
	JobsWaiting  = "waiting"  // due now
	JobsDeferred = "deferred" // due later
	JobsGrabbed  = "grabbed"  // held by a node for delivery
)

// ListOptions page a listing. Zero values take the server's defaults
// (limit 100; jobs newest next_try first, failure log newest failure
// first).
type ListOptions struct {
	Limit  int
	Cursor string // NextCursor of the previous page
	// Order is "desc" or "asc" for jobs, "failed" or "created" for the
	// failure log.
	Order string
}

func (o *ListOptions) query() url.Values {
	q := url.Values{}
	if o == nil {
		return q
	}
	if o.Limit > 0 {
		q.Set("limit", fmt.Sprint(o.Limit))
	}
	if o.Cursor != "" {
		q.Set("cursor", o.Cursor)
	}
	if o.Order != "" {
		q.Set("order", o.Order)
	}
	return q
}

// JobPage is one page of a job listing; NextCursor is "" on the last.
type JobPage struct {
	Jobs       []*Job `json:"jobs"`
	NextCursor string `json:"next_cursor,omitempty"`
}

// ListJobs returns a page of the queue's jobs of one kind (JobsWaiting,
// JobsDeferred or JobsGrabbed): GET /queue/{name}/{kind}.
func (c *Client) ListJobs(ctx context.Context, queue, kind string, opts *ListOptions) (*JobPage, error) {
	var out JobPage
	if err := c.Do(ctx, http.MethodGet, "/queue/"+esc(queue)+"/"+esc(kind), opts.query(), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Job returns one job of the queue (GET /queue/{name}/job/{id}).
func (c *Client) Job(ctx context.Context, queue string, id int64) (*Job, error) {
	var out Job
	if err := c.Do(ctx, http.MethodGet, fmt.Sprintf("/queue/%s/job/%d", esc(queue), id), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteJob deletes one job of the queue, whatever its state, and returns
// it (DELETE /queue/{name}/job/{id}).
func (c *Client) DeleteJob(ctx context.Context, queue string, id int64) (*Job, error) {
	var out Job
	if err := c.Do(ctx, http.MethodDelete, fmt.Sprintf("/queue/%s/job/%d", esc(queue), id), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// FailedJob is an entry of a queue's failure log.
type FailedJob struct {
	ID        int64           `json:"id"`
	JobID     int64           `json:"job_id"`
	QueueName string          `json:"queue_name"`
	Category  string          `json:"category"`
	URL       string          `json:"url"`
	Payload   json.RawMessage `json:"payload,omitempty"`
	Result    struct {
		Status  string `json:"status"`
		Code    int    `json:"code"` // the worker's HTTP status, 0 when none came
		Message string `json:"message"`
	} `json:"result"`
	FailCount int       `json:"fail_count"`
	FailedAt  time.Time `json:"failed_at"`
	CreatedAt time.Time `json:"created_at"`
}

// FailedPage is one page of a failure log; NextCursor is "" on the last.
type FailedPage struct {
	FailedJobs []*FailedJob `json:"failed_jobs"`
	NextCursor string       `json:"next_cursor,omitempty"`
}

// FailedJobs returns a page of the queue's failure log, newest first
// (GET /queue/{name}/failed).
func (c *Client) FailedJobs(ctx context.Context, queue string, opts *ListOptions) (*FailedPage, error) {
	var out FailedPage
	if err := c.Do(ctx, http.MethodGet, "/queue/"+esc(queue)+"/failed", opts.query(), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// FailedJob returns one failure log entry (GET /queue/{name}/failed/{id}).
func (c *Client) FailedJob(ctx context.Context, queue string, id int64) (*FailedJob, error) {
	var out FailedJob
	if err := c.Do(ctx, http.MethodGet, fmt.Sprintf("/queue/%s/failed/%d", esc(queue), id), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteFailedJob deletes one failure log entry and returns it
// (DELETE /queue/{name}/failed/{id}).
func (c *Client) DeleteFailedJob(ctx context.Context, queue string, id int64) (*FailedJob, error) {
	var out FailedJob
	if err := c.Do(ctx, http.MethodDelete, fmt.Sprintf("/queue/%s/failed/%d", esc(queue), id), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

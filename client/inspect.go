package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/rowq/rowq/rowqtype"
)

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

// ListJobs returns a page of the queue's jobs of one kind (JobsWaiting,
// JobsDeferred or JobsGrabbed): GET /queue/{name}/{kind}.
func (c *Client) ListJobs(ctx context.Context, queue, kind string, opts *ListOptions) (*rowqtype.JobPage, error) {
	var out rowqtype.JobPage
	if err := c.Do(ctx, http.MethodGet, "/queue/"+esc(queue)+"/"+esc(kind), opts.query(), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Job returns one job of the queue (GET /queue/{name}/job/{id}).
func (c *Client) Job(ctx context.Context, queue string, id int64) (*rowqtype.Job, error) {
	var out rowqtype.Job
	if err := c.Do(ctx, http.MethodGet, fmt.Sprintf("/queue/%s/job/%d", esc(queue), id), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteJob deletes one job of the queue, whatever its state, and returns
// it (DELETE /queue/{name}/job/{id}).
func (c *Client) DeleteJob(ctx context.Context, queue string, id int64) (*rowqtype.Job, error) {
	var out rowqtype.Job
	if err := c.Do(ctx, http.MethodDelete, fmt.Sprintf("/queue/%s/job/%d", esc(queue), id), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// FailedJobs returns a page of the queue's failure log, newest first
// (GET /queue/{name}/failed).
func (c *Client) FailedJobs(ctx context.Context, queue string, opts *ListOptions) (*rowqtype.FailedJobPage, error) {
	var out rowqtype.FailedJobPage
	if err := c.Do(ctx, http.MethodGet, "/queue/"+esc(queue)+"/failed", opts.query(), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// FailedJob returns one failure log entry (GET /queue/{name}/failed/{id}).
func (c *Client) FailedJob(ctx context.Context, queue string, id int64) (*rowqtype.FailedJob, error) {
	var out rowqtype.FailedJob
	if err := c.Do(ctx, http.MethodGet, fmt.Sprintf("/queue/%s/failed/%d", esc(queue), id), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteFailedJob deletes one failure log entry and returns it
// (DELETE /queue/{name}/failed/{id}).
func (c *Client) DeleteFailedJob(ctx context.Context, queue string, id int64) (*rowqtype.FailedJob, error) {
	var out rowqtype.FailedJob
	if err := c.Do(ctx, http.MethodDelete, fmt.Sprintf("/queue/%s/failed/%d", esc(queue), id), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

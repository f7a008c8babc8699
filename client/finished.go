package client

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/rowq/rowq/rowqtype"
)

// FinishedOptions filter and page GET /queue/{name}/finished. Zero values
// filter nothing and take the server's defaults.
type FinishedOptions struct {
	// Status is rowqtype.FinishedSucceeded, FinishedFailed or
	// FinishedCancelled; "" for all.
	Status   string
	Category string
	// Since (inclusive) and Until (exclusive) bound finished_at.
	Since, Until time.Time
	Limit        int
	Cursor       string // NextCursor of the previous page
}

// FinishedJobs returns a page of the jobs the queue kept after they
// finished (its keep_finished), the latest finished first
// (GET /queue/{name}/finished).
func (c *Client) FinishedJobs(ctx context.Context, queue string, opts *FinishedOptions) (*rowqtype.FinishedJobPage, error) {
	o := &ListOptions{}
	if opts != nil {
		o.Limit, o.Cursor = opts.Limit, opts.Cursor
	}
	q := o.query()
	if opts != nil {
		if opts.Status != "" {
			q.Set("status", opts.Status)
		}
		if opts.Category != "" {
			q.Set("category", opts.Category)
		}
		if !opts.Since.IsZero() {
			q.Set("since", opts.Since.UTC().Format(time.RFC3339Nano))
		}
		if !opts.Until.IsZero() {
			q.Set("until", opts.Until.UTC().Format(time.RFC3339Nano))
		}
	}
	var out rowqtype.FinishedJobPage
	if err := c.Do(ctx, http.MethodGet, "/queue/"+esc(queue)+"/finished", q, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// FinishedJob returns a finished job of a queue that keeps them, with
// its status, attempts, times, last message and result
// (GET /queue/{name}/job/{id}). A job still live answers with its live
// status (rowqtype.JobStatusClaimed, …) and only the fields the two share;
// use Job for it.
func (c *Client) FinishedJob(ctx context.Context, queue string, id int64) (*rowqtype.FinishedJob, error) {
	var out rowqtype.FinishedJob
	if err := c.Do(ctx, http.MethodGet, fmt.Sprintf("/queue/%s/job/%d", esc(queue), id), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

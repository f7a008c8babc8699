package client

import (
	"context"
	"fmt"
	"net/http"

	"github.com/rowq/rowq/rowqtype"
)

// Flows (docs/lifecycle.md): a job's callbacks (on_success, on_failure,
// on_finish) and parents (depends_on) are fields of rowqtype.JobRequest,
// sent by PushJob and PushJobs; PushBatch makes a batch of jobs.

// PushBatch enqueues up to 10,000 jobs (within the server's
// --max-body-bytes) in one transaction as a batch (POST /jobs with
// "batch"): all are stored or none, with the batch, whose callbacks fire
// once when its last job ends. The answer carries
// the jobs in the order given and the batch's id.
func (c *Client) PushBatch(ctx context.Context, batch *rowqtype.BatchRequest, jobs []*rowqtype.BatchJob) (*rowqtype.PushedJobs, error) {
	if batch == nil {
		batch = &rowqtype.BatchRequest{}
	}
	var out rowqtype.PushedJobs
	if err := c.Do(ctx, http.MethodPost, "/jobs", nil, &rowqtype.JobsRequest{Jobs: jobs, Batch: batch}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Batch returns a batch and its counts (GET /batch/{id}).
func (c *Client) Batch(ctx context.Context, id int64) (*rowqtype.Batch, error) {
	var out rowqtype.Batch
	if err := c.Do(ctx, http.MethodGet, fmt.Sprintf("/batch/%d", id), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Batches returns a page of batches, the newest first (GET /batches);
// opts' Order is not used.
func (c *Client) Batches(ctx context.Context, opts *ListOptions) (*rowqtype.BatchPage, error) {
	var out rowqtype.BatchPage
	if err := c.Do(ctx, http.MethodGet, "/batches", pageOnly(opts).query(), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Blocked returns a page of the queue's blocked jobs, lowest id first,
// each with the parents it waits for in Flow.WaitsFor
// (GET /queue/{name}/blocked); opts' Order is not used.
func (c *Client) Blocked(ctx context.Context, queue string, opts *ListOptions) (*rowqtype.JobPage, error) {
	var out rowqtype.JobPage
	if err := c.Do(ctx, http.MethodGet, "/queue/"+esc(queue)+"/blocked", pageOnly(opts).query(), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// pageOnly is opts without an order, for the listings that have one
// order only.
func pageOnly(opts *ListOptions) *ListOptions {
	if opts == nil {
		return nil
	}
	return &ListOptions{Limit: opts.Limit, Cursor: opts.Cursor}
}

package client

import (
	"context"
	"fmt"
	"net/http"

	"github.com/rowq/rowq/rowqtype"
)

// PushJob enqueues a job of category (POST /job/{category}). The answer
// comes after the job is committed.
func (c *Client) PushJob(ctx context.Context, category string, job *rowqtype.JobRequest) (*rowqtype.PushedJob, error) {
	var out rowqtype.PushedJob
	if err := c.Do(ctx, http.MethodPost, "/job/"+esc(category), nil, job, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// PushJobs enqueues up to 1,000 jobs in one transaction (POST /jobs): all
// are stored or none. The answers come in the order of jobs.
func (c *Client) PushJobs(ctx context.Context, jobs []*rowqtype.BatchJob) ([]*rowqtype.PushedJob, error) {
	var out rowqtype.PushedJobs
	if err := c.Do(ctx, http.MethodPost, "/jobs", nil, &rowqtype.JobsRequest{Jobs: jobs}, &out); err != nil {
		return nil, err
	}
	return out.Jobs, nil
}

// PauseQueue pauses a queue (POST /queue/{name}/pause): it keeps accepting
// jobs but dispatches none until resumed.
func (c *Client) PauseQueue(ctx context.Context, name string) (*rowqtype.Queue, error) {
	return c.queueAction(ctx, name, "pause")
}

// ResumeQueue resumes a paused queue (POST /queue/{name}/resume).
func (c *Client) ResumeQueue(ctx context.Context, name string) (*rowqtype.Queue, error) {
	return c.queueAction(ctx, name, "resume")
}

func (c *Client) queueAction(ctx context.Context, name, action string) (*rowqtype.Queue, error) {
	var out rowqtype.Queue
	if err := c.Do(ctx, http.MethodPost, "/queue/"+esc(name)+"/"+action, nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// RetryFailedJob puts one failure log entry back in its queue as a job due
// now, under its old job id and with fail_count 0
// (POST /queue/{queue}/failed/{id}/retry), and returns the job.
func (c *Client) RetryFailedJob(ctx context.Context, queue string, id int64) (*rowqtype.PushedJob, error) {
	var out rowqtype.PushedJob
	if err := c.Do(ctx, http.MethodPost, fmt.Sprintf("/queue/%s/failed/%d/retry", esc(queue), id), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// RetryFailedJobs retries the failure log entries ids of the queue, or
// every entry when ids is nil (POST /queue/{queue}/failed/retry), and
// returns how many it retried.
func (c *Client) RetryFailedJobs(ctx context.Context, queue string, ids []int64) (int, error) {
	var out rowqtype.FailedRetryResult
	err := c.Do(ctx, http.MethodPost, "/queue/"+esc(queue)+"/failed/retry", nil, idsBody(ids), &out)
	return out.Retried, err
}

// DeleteFailedJobs deletes the failure log entries ids of the queue, or
// every entry when ids is nil (DELETE /queue/{queue}/failed), and returns
// how many it deleted.
func (c *Client) DeleteFailedJobs(ctx context.Context, queue string, ids []int64) (int, error) {
	var out rowqtype.FailedDeleteResult
	err := c.Do(ctx, http.MethodDelete, "/queue/"+esc(queue)+"/failed", nil, idsBody(ids), &out)
	return out.Deleted, err
}

// idsBody is the body naming ids, or no body (every entry) for nil.
func idsBody(ids []int64) any {
	if ids == nil {
		return nil
	}
	return &rowqtype.FailedBulkRequest{IDs: ids}
}

package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/rowq/rowq/rowqtype"
)

// Accepted jobs: a worker that answered a delivery with {"status":
// "accepted", "lease": SECONDS} renews the job's lease and reports its
// result with the delivery's lease token (the Rowq-Lease-Token header);
// see docs/workers.md. These calls need a token with the work scope.

// Heartbeat renews the lease of an accepted job (POST /job/{id}/heartbeat).
// A 409 means the worker should stop working on the job: LeaseReason says
// why.
func (c *Client) Heartbeat(ctx context.Context, id int64, hb *rowqtype.JobHeartbeat) (*rowqtype.JobLease, error) {
	var out rowqtype.JobLease
	if err := c.Do(ctx, http.MethodPost, fmt.Sprintf("/job/%d/heartbeat", id), nil, hb, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Complete reports the result of an accepted job (POST
// /job/{id}/complete). The same completion sent again succeeds again; a
// 409 says the lease is no longer held (LeaseReason).
func (c *Client) Complete(ctx context.Context, id int64, done *rowqtype.JobCompletion) (*rowqtype.JobCompleted, error) {
	var out rowqtype.JobCompleted
	if err := c.Do(ctx, http.MethodPost, fmt.Sprintf("/job/%d/complete", id), nil, done, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// CancelJob cancels one job of the queue, whatever its state, and returns
// it as it was (POST /queue/{name}/job/{id}/cancel): a delivery in flight
// is aborted, and a worker holding the job learns it at its next heartbeat.
func (c *Client) CancelJob(ctx context.Context, queue string, id int64) (*rowqtype.Job, error) {
	var out rowqtype.Job
	if err := c.Do(ctx, http.MethodPost, fmt.Sprintf("/queue/%s/job/%d/cancel", esc(queue), id), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// LeaseReason returns the reason of a heartbeat's or completion's 409
// (rowqtype.LeaseLost, LeaseCompleted or LeaseCancelled), or "" when err is
// not such an answer.
func LeaseReason(err error) string {
	var e *Error
	if !errors.As(err, &e) || e.Status != http.StatusConflict {
		return ""
	}
	var lc rowqtype.LeaseConflict
	if json.Unmarshal(e.Body, &lc) != nil {
		return ""
	}
	return lc.Reason
}

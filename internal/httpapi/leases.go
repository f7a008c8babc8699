package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/rowq/rowq/internal/auth"
	"github.com/rowq/rowq/internal/dispatch"
	"github.com/rowq/rowq/internal/validate"
	"github.com/rowq/rowq/rowqtype"
)

// Leases of accepted jobs: a worker that answered a delivery with
// "accepted" renews its lease and reports the result (docs/workers.md).
// The lease token proves the delivery; the work scope lets a token send
// it, and a token confined to queues may send it for its queues' jobs.

// Bounds of the fields of a heartbeat or completion. The message's is
// validate.MaxLeaseMessage, where the Go client's test can read it.
const (
	maxLeaseToken = 128
	maxRetryAfter = 30 * 24 * time.Hour
)

// heartbeatJob answers POST /job/{id}/heartbeat.
func (a *API) heartbeatJob(r *http.Request) (any, error) {
	id, err := pathID(r)
	if err != nil {
		return nil, err
	}
	var req rowqtype.JobHeartbeat
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	if err := checkLeaseToken(req.LeaseToken); err != nil {
		return nil, err
	}
	if req.Lease == nil {
		return nil, errorf(http.StatusBadRequest, "lease: required, seconds 1..%d", int(dispatch.MaxLease.Seconds()))
	}
	lease, err := leaseSeconds(*req.Lease)
	if err != nil {
		return nil, err
	}
	switch {
	case req.Progress != nil && (*req.Progress < 0 || *req.Progress > 1):
		return nil, errorf(http.StatusBadRequest, "progress: must be 0..1, got %v", *req.Progress)
	case req.Message != nil && len(*req.Message) > validate.MaxLeaseMessage:
		return nil, errorf(http.StatusBadRequest, "message: at most %d bytes, got %d", validate.MaxLeaseMessage, len(*req.Message))
	}
	if err := a.allowLease(r.Context(), id, req.LeaseToken); err != nil {
		return nil, err
	}
	until, err := a.cfg.Dispatcher.Heartbeat(r.Context(), &dispatch.Beat{
		ID: id, Token: req.LeaseToken, Lease: lease,
		Progress: req.Progress, Message: req.Message,
	})
	if err != nil {
		return nil, leaseError(err)
	}
	return &rowqtype.JobLease{ID: id, LeaseExpiresAt: until}, nil
}

// completeJob answers POST /job/{id}/complete.
func (a *API) completeJob(r *http.Request) (any, error) {
	id, err := pathID(r)
	if err != nil {
		return nil, err
	}
	var req rowqtype.JobCompletion
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	if err := checkLeaseToken(req.LeaseToken); err != nil {
		return nil, err
	}
	switch req.Status {
	case dispatch.StatusSuccess, dispatch.StatusFailure, dispatch.StatusPermanentFailure:
	case "":
		return nil, errorf(http.StatusBadRequest, "status: required: success, failure or permanent-failure")
	default:
		return nil, errorf(http.StatusBadRequest, "status: want success, failure or permanent-failure, got %q", req.Status)
	}
	if len(req.Message) > validate.MaxLeaseMessage {
		return nil, errorf(http.StatusBadRequest, "message: at most %d bytes, got %d", validate.MaxLeaseMessage, len(req.Message))
	}
	result, err := completionResult(req.Status, req.Result, a.cfg.MaxResult)
	if err != nil {
		return nil, err
	}
	var retryAfter *time.Duration
	if req.RetryAfter != nil {
		switch {
		case req.Status != dispatch.StatusFailure:
			return nil, errorf(http.StatusBadRequest, "retry_after: only with status failure")
		case *req.RetryAfter < 0 || *req.RetryAfter > maxRetryAfter.Seconds():
			return nil, errorf(http.StatusBadRequest, "retry_after: must be 0..%d seconds, got %v", int(maxRetryAfter.Seconds()), *req.RetryAfter)
		}
		d := time.Duration(*req.RetryAfter * float64(time.Second))
		retryAfter = &d
	}
	if err := a.allowLease(r.Context(), id, req.LeaseToken); err != nil {
		return nil, err
	}
	err = a.cfg.Dispatcher.Complete(r.Context(), &dispatch.Completion{
		ID: id, Token: req.LeaseToken, Status: req.Status, Message: req.Message, RetryAfter: retryAfter, Result: result,
	})
	if err != nil {
		return nil, leaseError(err)
	}
	return &rowqtype.JobCompleted{ID: id, Status: req.Status}, nil
}

func checkLeaseToken(t string) error {
	switch {
	case t == "":
		return errorf(http.StatusBadRequest, "lease_token: required: the delivery's Rowq-Lease-Token")
	case len(t) > maxLeaseToken:
		return errorf(http.StatusBadRequest, "lease_token: at most %d characters, got %d", maxLeaseToken, len(t))
	}
	return nil
}

// leaseSeconds checks the length of a lease asked for in seconds (a
// heartbeat's or a lease request's "lease"): 1..86400, the bounds of a
// push worker's "accepted" answer too (dispatch.MaxLease).
func leaseSeconds(v float64) (time.Duration, error) {
	if !(v >= 1 && v <= dispatch.MaxLease.Seconds()) {
		return 0, errorf(http.StatusBadRequest, "lease: must be 1..%d seconds, got %v", int(dispatch.MaxLease.Seconds()), v)
	}
	return time.Duration(v * float64(time.Second)), nil
}

// allowLease answers 403 when the request's token is confined to queues
// and the job the lease token holds is in none of them. A job the lease
// token does not hold is left to the dispatcher, which answers 409 (or
// 200 for a completion sent again).
func (a *API) allowLease(ctx context.Context, id int64, token string) error {
	g := auth.FromContext(ctx)
	if !g.Confined() {
		return nil
	}
	queue, err := a.cfg.Dispatcher.LeaseQueue(ctx, id, token)
	if err != nil {
		return leaseError(err)
	}
	if queue != "" && !g.Queue(queue) {
		return errorf(http.StatusForbidden, "%v", g.QueueError(fmt.Sprintf("job %d's queue", id)))
	}
	return nil
}

// leaseError answers a refused lease with 409 and its reason, and a
// token of the wrong form with 400.
func leaseError(err error) error {
	var le *dispatch.LeaseError
	switch {
	case errors.As(err, &le):
		return &apiError{status: http.StatusConflict, msg: le.Msg, body: &rowqtype.LeaseConflict{Error: le.Msg, Reason: le.Reason}}
	case errors.Is(err, dispatch.ErrLeaseToken):
		return errorf(http.StatusBadRequest, "lease_token: %v", err)
	}
	return err
}

// cancelJob answers POST /queue/{name}/job/{id}/cancel: the job is
// removed whatever its state; a worker holding it learns from its next
// heartbeat or completion (409 "cancelled"), and a delivery in flight is
// aborted. It answers the job as it was.
func (a *API) cancelJob(r *http.Request) (any, error) {
	id, err := pathID(r)
	if err != nil {
		return nil, err
	}
	if err := decodeOptional(r, &struct{}{}); err != nil {
		return nil, err
	}
	queue, err := a.existingQueue(r.Context(), r)
	if err != nil {
		return nil, err
	}
	j, err := a.cfg.Store.JobCancel(r.Context(), queue, id)
	if err != nil {
		return nil, notFound(err, "queue %q has no job %d", queue, id)
	}
	a.cfg.Dispatcher.JobCancelled(j)
	return toJobJSON(j), nil
}

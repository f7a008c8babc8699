package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/rowq/rowq/internal/dispatch"
	"github.com/rowq/rowq/internal/notify"
	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/rowqtype"
)

// Pull queues: POST /queue/{name}/lease leases jobs to a worker that asks
// (docs/workers.md). The queue's leader serves it (dispatch.Pull); a node
// that does not lead the queue forwards the request to the one that does.

// Peers forwards a lease request to the queue's leader on another node
// (*notify.Nudger): its status and body, or notify.ErrNoLeader when no
// other node leads the queue.
type Peers interface {
	Lease(ctx context.Context, queue string, body []byte) (int, []byte, error)
}

// leaderLook spaces the looks for a queue's leader while a lease request
// waits for one (a queue just created, a leader that just changed).
const leaderLook = 100 * time.Millisecond

// leaseJobs answers POST /queue/{name}/lease.
func (a *API) leaseJobs(r *http.Request) (any, error) {
	name := r.PathValue("name")
	if err := checkName("name", name); err != nil {
		return nil, err
	}
	var req rowqtype.LeaseRequest
	if err := decodeOptional(r, &req); err != nil {
		return nil, err
	}
	p := &dispatch.PullRequest{Queue: name, Max: valueOr(req.Max, 1), Lease: dispatch.DefaultPullLease}
	if err := checkRange("max", req.Max, 1, dispatch.MaxPull); err != nil {
		return nil, err
	}
	if req.Wait != nil {
		wait, err := seconds("wait", req.Wait, dispatch.MaxPullWait.Seconds(), true)
		if err != nil {
			return nil, err
		}
		p.Wait = wait
	}
	if req.Lease != nil {
		lease, err := leaseSeconds(*req.Lease)
		if err != nil {
			return nil, err
		}
		p.Lease = lease
	}
	q, err := a.cfg.Store.QueueGet(r.Context(), name)
	if err != nil {
		return nil, notFound(err, "queue %q does not exist", name)
	}
	if !q.Pull() {
		return nil, errorf(http.StatusConflict, "delivery: queue %q delivers by push; its jobs are leased only with \"delivery\": \"pull\"", name)
	}
	forwarded := r.Header.Get(notify.ForwardedHeader) != ""
	deadline := time.Now().Add(p.Wait)
	for {
		jobs, err := a.cfg.Dispatcher.Pull(r.Context(), p)
		if !errors.Is(err, dispatch.ErrNotLeader) {
			if err != nil {
				return nil, err
			}
			return toLeasedJobs(jobs), nil
		}
		if !forwarded && a.cfg.Peers != nil {
			body, _ := json.Marshal(&rowqtype.LeaseRequest{Max: &p.Max, Wait: new(p.Wait.Seconds()), Lease: new(p.Lease.Seconds())})
			code, answer, err := a.cfg.Peers.Lease(r.Context(), name, body)
			switch {
			case err == nil && code == http.StatusOK:
				return json.RawMessage(answer), nil
			case err == nil && json.Valid(answer) && code != http.StatusUnauthorized && code != http.StatusForbidden:
				return nil, &apiError{status: code, msg: string(answer), body: json.RawMessage(answer)}
			case err == nil:
				// Not the leader's own answer to the worker (a proxy's page), or
				// the nodes' key refused: the worker's token is not at fault.
				return nil, errorf(http.StatusBadGateway, "lease: the queue's leader answered %d to this node's forwarded request: %s (check that the nodes share one database's node key and reach each other)", code, strings.ToValidUTF8(string(answer[:min(len(answer), 200)]), ""))
			case r.Context().Err() != nil:
				return nil, r.Context().Err()
			case !errors.Is(err, notify.ErrNoLeader):
				a.log.Debug("forward a lease request to the queue's leader", "queue", name, "err", err)
			}
		}
		// No node leads the queue yet, or the leader just changed: look
		// again until the wait ends, then answer no job (the worker asks
		// again).
		left := time.Until(deadline)
		if left <= 0 {
			return toLeasedJobs(nil), nil
		}
		select {
		case <-r.Context().Done():
			return nil, r.Context().Err()
		case <-time.After(min(left, leaderLook)):
		}
		p.Wait = max(time.Until(deadline), 0)
	}
}

// toLeasedJobs answers a lease request with the jobs leased.
func toLeasedJobs(jobs []dispatch.Pulled) *rowqtype.LeasedJobs {
	out := &rowqtype.LeasedJobs{Jobs: make([]rowqtype.LeasedJob, len(jobs))}
	for i, p := range jobs {
		j := p.Job
		var until time.Time
		if j.GrabbedTil != nil {
			until = *j.GrabbedTil
		}
		out.Jobs[i] = rowqtype.LeasedJob{
			ID: j.ID, QueueName: j.Queue, Category: j.Category, Payload: j.Payload,
			Attempt: j.FailCount + 1, MaxRetries: j.MaxRetries, Timeout: j.Timeout, Priority: j.Priority,
			CreatedAt: j.CreatedAt, LeaseToken: p.Token, LeaseExpiresAt: until,
		}
	}
	return out
}

// checkDelivery validates a queue's delivery setting.
func checkDelivery(v *string) error {
	if v != nil && *v != store.DeliveryPush && *v != store.DeliveryPull {
		return errorf(http.StatusBadRequest, "delivery: must be %q or %q, got %q", store.DeliveryPush, store.DeliveryPull, *v)
	}
	return nil
}

// leaseEnds checks the "finished" of a nudge: the grabs whose leases
// ended on the node that sent it.
func leaseEnds(ends []rowqtype.LeaseEnd) ([]store.JobGrab, error) {
	gs := make([]store.JobGrab, len(ends))
	for i, e := range ends {
		if e.ID <= 0 || e.Grabs <= 0 {
			return nil, errorf(http.StatusBadRequest, "finished[%d]: want a job id and its grab count, got id %d, grabs %d", i, e.ID, e.Grabs)
		}
		gs[i] = store.JobGrab{ID: e.ID, Grabs: e.Grabs}
	}
	return gs, nil
}

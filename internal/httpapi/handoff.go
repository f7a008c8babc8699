package httpapi

import (
	"context"
	"errors"
	"time"

	"github.com/rowq/rowq/internal/store"
)

// Handoff is the dispatcher as the enqueue path sees it for local
// hand-off: a job enqueued on the node that leads its queue, while a worker
// slot is free and nothing is waiting, is inserted already grabbed by this
// node and given to the dispatcher after the commit, with no grab and no
// wake-up in between.
type Handoff interface {
	// Reserve takes a worker slot of queue's dispatcher. On success exactly
	// one of deliver (after the commit) or release (the insert failed) must
	// be called; when hand-off is not possible both are nil.
	Reserve(queue string) (deliver func(*store.Job), release func())
	// Holder returns the node id and grab lease to insert a handed-off job
	// with.
	Holder() (node string, lease time.Duration)
}

// enqueue stores one job and returns its id once it is committed: handed
// off to this node's dispatcher when it can be, else waiting, with a
// wake-up for the dispatcher if this node leads the queue.
func (a *API) enqueue(ctx context.Context, p *store.JobInsertParams) (int64, error) {
	if p.RunAfter == 0 && a.cfg.Handoff != nil {
		if deliver, release := a.cfg.Handoff.Reserve(p.Queue); deliver != nil {
			// Not cancelled with the request: once the insert is under way,
			// its outcome decides whether the slot is used or given back.
			res, err := a.insertGrabbed.Do(context.WithoutCancel(ctx), p)
			if err == nil {
				err = res.err
			}
			if err != nil {
				// If the commit did happen after all (a timeout), the row is
				// grabbed by this node and is rescued after the lease.
				release()
				return 0, err
			}
			deliver(res.job)
			return res.id, nil
		}
	}
	res, err := a.insert.Do(ctx, p)
	if err == nil {
		err = res.err
	}
	if err != nil {
		return 0, err
	}
	if p.RunAfter == 0 && a.cfg.Waker != nil {
		a.cfg.Waker.Wake(p.Queue)
	}
	return res.id, nil
}

// insertGrabbedJobs is insertJobs for handed-off jobs.
func (a *API) insertGrabbedJobs(ctx context.Context, jobs []*store.JobInsertParams) ([]inserted, error) {
	node, lease := a.cfg.Handoff.Holder()
	insert := func(jobs []*store.JobInsertParams) ([]*store.Job, error) {
		return a.cfg.Store.JobsInsertGrabbed(ctx, &store.JobsInsertGrabbedParams{Node: node, Lease: lease, Jobs: jobs})
	}
	stored, err := insert(jobs)
	if err != nil && (len(jobs) == 1 || errors.Is(err, store.ErrUnavailable)) {
		return nil, err
	}
	res := make([]inserted, len(jobs))
	if err == nil {
		for i, j := range stored {
			res[i].id, res[i].job = j.ID, j
		}
		return res, nil
	}
	a.log.Warn("batched enqueue failed; inserting one by one", "jobs", len(jobs), "err", err)
	for i, j := range jobs {
		one, err := insert([]*store.JobInsertParams{j})
		if err != nil {
			res[i].err = err
			continue
		}
		res[i].id, res[i].job = one[0].ID, one[0]
	}
	return res, nil
}

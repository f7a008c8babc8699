package enqueue

import (
	"context"
	"errors"

	"github.com/rowq/rowq/internal/dispatch"
	"github.com/rowq/rowq/internal/store"
)

// Grouped commit: every enqueue that arrives while the previous insert
// runs goes into the next one, one multi-row INSERT and one commit for
// all of them (internal/batch). Jobs due now that this node can deliver at
// once are grouped apart, inserted grabbed by this node.

// inserted is one job's outcome in a grouped commit.
type inserted struct {
	id  int64
	job *store.Job // the stored row, for a hand-off
	err error
}

// handoffJob is a job to insert grabbed for the hand-off h.
type handoffJob struct {
	p *store.JobInsertParams
	h *dispatch.Handoff
}

// insertWaiting is the grouped commit of jobs inserted waiting.
func (s *Service) insertWaiting(ctx context.Context, jobs []*store.JobInsertParams) ([]inserted, error) {
	return s.group(jobs, func(jobs []*store.JobInsertParams) ([]inserted, error) {
		ids, err := s.cfg.Store.JobsInsert(ctx, jobs)
		if err != nil {
			return nil, err
		}
		res := make([]inserted, len(ids))
		for i, id := range ids {
			res[i].id = id
		}
		return res, nil
	})
}

// insertGrabbed is the grouped commit of handed-off jobs. Every hand-off
// of this node's dispatcher carries the same node and lease.
func (s *Service) insertGrabbed(ctx context.Context, items []*handoffJob) ([]inserted, error) {
	node, lease := items[0].h.Node, items[0].h.Lease
	jobs := make([]*store.JobInsertParams, len(items))
	for i, it := range items {
		jobs[i] = it.p
	}
	return s.group(jobs, func(jobs []*store.JobInsertParams) ([]inserted, error) {
		rows, err := s.cfg.Store.JobsInsertGrabbed(ctx, &store.JobsInsertGrabbedParams{Node: node, Lease: lease, Jobs: jobs})
		if err != nil {
			return nil, err
		}
		res := make([]inserted, len(rows))
		for i, j := range rows {
			res[i] = inserted{id: j.ID, job: j}
		}
		return res, nil
	})
}

// group inserts the jobs with one call of insert, in one transaction. If
// that fails for a reason other than the database being away, it inserts
// each job alone, so that one bad job fails only its own enqueue.
func (s *Service) group(jobs []*store.JobInsertParams, insert func([]*store.JobInsertParams) ([]inserted, error)) ([]inserted, error) {
	res, err := insert(jobs)
	if err == nil || len(jobs) == 1 || errors.Is(err, store.ErrUnavailable) {
		return res, err
	}
	s.log.Warn("grouped enqueue failed; inserting one by one", "jobs", len(jobs), "err", err)
	res = make([]inserted, len(jobs))
	for i, j := range jobs {
		one, err := insert([]*store.JobInsertParams{j})
		if err != nil {
			res[i].err = err
			continue
		}
		res[i] = one[0]
	}
	return res, nil
}

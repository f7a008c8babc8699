package enqueue

import (
	"context"
	"fmt"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/tracing"
)

// Flows (docs/lifecycle.md): jobs with callbacks, parents or a batch go
// in by a path of their own (store.FlowStore.JobsInsertFlow), so that an
// enqueue without any keeps its grouped commit and hand-off unchanged.

// PushFlow stores jobs with their flows, and p's batch, in one
// transaction, all or none (routed and checked already; no unique keys).
// Jobs stored blocked wait for their parents; the queues of the others
// are woken, as after PushMany. It hands nothing off.
func (s *Service) PushFlow(ctx context.Context, p *store.FlowInsertParams) (*store.FlowInserted, error) {
	var spans []tracing.Span
	if s.cfg.Tracer != nil {
		spans = make([]tracing.Span, len(p.Jobs))
		for i, j := range p.Jobs {
			spans[i] = s.cfg.Tracer.Enqueue(ctx, j.Job)
		}
	}
	res, err := s.cfg.Store.JobsInsertFlow(ctx, p)
	for i, span := range spans {
		var id int64
		if err == nil {
			id = res.IDs[i]
		}
		span.Enqueued(id, err)
	}
	if err != nil {
		return nil, fmt.Errorf("enqueue %d job(s) with a flow: %w", len(p.Jobs), err)
	}
	ps := make([]*store.JobInsertParams, 0, len(p.Jobs))
	pushed := make([]store.JobPushed, 0, len(p.Jobs))
	for i, j := range p.Jobs {
		if res.Blocked[i] {
			// Counted as pushed now; its queue learns of it when it is
			// released (FlowDone).
			s.cfg.Stats.Pushed(j.Job.Queue, 1)
			continue
		}
		ps = append(ps, j.Job)
		pushed = append(pushed, store.JobPushed{ID: res.IDs[i]})
	}
	s.settle(ps, pushed, false)
	return res, nil
}

// FlowDone tells that ending jobs with a flow made jobs due in queues,
// or due later (callbacks, released dependents: store.FlowStore's
// FlowWatch): each queue's dispatcher is woken, and told to look when
// its next job is due, for a job released or called back with a delay.
func (s *Service) FlowDone(queues []string) {
	if s.cfg.Dispatcher == nil {
		return
	}
	for _, q := range queues {
		s.cfg.Dispatcher.Later(q)
		s.cfg.Dispatcher.Wake(q)
	}
}

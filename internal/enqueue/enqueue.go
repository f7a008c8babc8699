// Package enqueue stores new jobs: it routes a job's category to its
// queue (with a short-lived cache), writes concurrent enqueues with one
// grouped commit, hands a job straight to this node's dispatcher when the
// node leads its queue and a worker slot is free, counts the jobs pushed,
// and wakes the queue's dispatcher when a job is due now. The HTTP API
// decodes and validates requests and calls it; the schedule loop uses its
// routing and waking.
//
// An enqueue returns once its job is committed: a caller that answers
// after Push answers "stored" truthfully.
package enqueue

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/rowq/rowq/internal/batch"
	"github.com/rowq/rowq/internal/dispatch"
	"github.com/rowq/rowq/internal/stats"
	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/tracing"
)

// Store is what enqueueing needs of the database: routings and the
// queues they name, jobs, and jobs with flows.
type Store interface {
	store.RoutingStore
	store.QueueStore
	store.JobStore
	JobsInsertFlow(ctx context.Context, p *store.FlowInsertParams) (*store.FlowInserted, error)
}

// Dispatcher is this node's dispatcher as enqueueing sees it
// (*dispatch.Dispatcher).
type Dispatcher interface {
	// Reserve takes a worker slot of the queue's runner on this node for
	// a job about to be inserted grabbed; nil when hand-off is not
	// possible.
	Reserve(queue string) *dispatch.Handoff
	// Wake tells the queue's leader, on this node or another, that a job
	// is due now.
	Wake(queue string)
	// Later tells the queue's leader, on this node or another, that a job
	// is due later.
	Later(queue string)
}

// Config configures a Service.
type Config struct {
	Store  Store
	Logger *slog.Logger
	// Dispatcher is this node's dispatcher; nil: jobs wait for a
	// dispatcher's poll.
	Dispatcher Dispatcher
	// Stats counts the jobs pushed; nil counts nothing.
	Stats *stats.Recorder
	// DefaultQueue receives jobs of unrouted categories; "" means such
	// jobs are refused (UnroutableError).
	DefaultQueue string
	// RouteCacheTTL is how long an enqueue may use a remembered routing
	// instead of reading it: the time within which a routing or queue
	// change made on another node is seen here. 0 turns the cache off.
	RouteCacheTTL time.Duration
	// Tracer records a span of each job pushed (Push, PushMany); nil
	// records none.
	Tracer *tracing.Tracer
}

// groupMax bounds the jobs of one grouped commit.
const groupMax = 200

// Service enqueues jobs. It is safe for concurrent use; Stop it to write
// the enqueues still pending.
type Service struct {
	cfg    Config
	log    *slog.Logger
	routes *routeCache
	// insert is the grouped commit of jobs inserted waiting; handOff that
	// of jobs inserted grabbed by this node (hand-off).
	insert  *batch.Batcher[*store.JobInsertParams, inserted]
	handOff *batch.Batcher[*handoffJob, inserted]
}

// New returns a Service; its grouped commits run from now until Stop.
func New(cfg Config) *Service {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Service{cfg: cfg, log: cfg.Logger, routes: newRouteCache(cfg.RouteCacheTTL)}
	s.insert = batch.New(s.insertWaiting, groupMax, 0)
	s.handOff = batch.New(s.insertGrabbed, groupMax, 0)
	return s
}

// Start does nothing: the grouped commits run from New on. It is there
// for the lifecycle every service of a node shares.
func (s *Service) Start(context.Context) error { return nil }

// Stop waits for the pending enqueues to be written. It is idempotent.
func (s *Service) Stop(context.Context) error {
	s.insert.Close()
	s.handOff.Close()
	return nil
}

// Push stores one job (p.Queue already routed) and returns its outcome
// once it is committed: the new job's id, or, for a job with a unique key
// that a pending job of the queue holds, that job (Existing). A job due
// now is handed to this node's dispatcher when it can take it at once,
// else its queue's dispatcher is woken. With a Tracer, the job's trace
// parent becomes the span of its enqueue.
func (s *Service) Push(ctx context.Context, p *store.JobInsertParams) (store.JobPushed, error) {
	span := s.cfg.Tracer.Enqueue(ctx, p)
	res, err := s.push(ctx, p)
	span.Enqueued(res.ID, err)
	return res, err
}

func (s *Service) push(ctx context.Context, p *store.JobInsertParams) (store.JobPushed, error) {
	if p.UniqueKey != "" {
		// Not through the grouped commit: a key's holder is found by a
		// statement of its own (see Store.JobsPush).
		res, err := s.pushMany(ctx, []*store.JobInsertParams{p})
		if err != nil {
			return store.JobPushed{}, err
		}
		return res[0], nil
	}
	if h := s.reserve(p); h != nil {
		// Not cancelled with the caller: once the insert is under way,
		// its outcome decides whether the slot is used or given back.
		out, err := s.handOff.Do(context.WithoutCancel(ctx), &handoffJob{p: p, h: h})
		if err == nil {
			err = out.err
		}
		if err != nil {
			// If the commit did happen after all (a timeout), the row is
			// grabbed by this node and is rescued after the lease.
			h.Release()
			return store.JobPushed{}, fmt.Errorf("enqueue job: %w", err)
		}
		h.Deliver(out.job)
		res := store.JobPushed{ID: out.id}
		s.settle([]*store.JobInsertParams{p}, []store.JobPushed{res}, true)
		return res, nil
	}
	out, err := s.insert.Do(ctx, p)
	if err == nil {
		err = out.err
	}
	if err != nil {
		return store.JobPushed{}, fmt.Errorf("enqueue job: %w", err)
	}
	res := store.JobPushed{ID: out.id}
	s.settle([]*store.JobInsertParams{p}, []store.JobPushed{res}, false)
	return res, nil
}

// PushMany stores the jobs (routed already) in one transaction, all or
// none, and returns each one's outcome in the order given, as Push does.
// It hands nothing off: its jobs' queues are woken.
func (s *Service) PushMany(ctx context.Context, ps []*store.JobInsertParams) ([]store.JobPushed, error) {
	if s.cfg.Tracer == nil {
		return s.pushMany(ctx, ps)
	}
	spans := make([]tracing.Span, len(ps))
	for i, p := range ps {
		spans[i] = s.cfg.Tracer.Enqueue(ctx, p)
	}
	res, err := s.pushMany(ctx, ps)
	for i, span := range spans {
		var id int64
		if err == nil {
			id = res[i].ID
		}
		span.Enqueued(id, err)
	}
	return res, err
}

func (s *Service) pushMany(ctx context.Context, ps []*store.JobInsertParams) ([]store.JobPushed, error) {
	res, err := s.cfg.Store.JobsPush(ctx, ps)
	if err != nil {
		return nil, fmt.Errorf("enqueue %d job(s): %w", len(ps), err)
	}
	s.settle(ps, res, false)
	return res, nil
}

// Due tells that queue got a job due now that was committed outside Push,
// such as a retry from the failure log or a schedule's run: its
// dispatcher is woken.
func (s *Service) Due(queue string) {
	if s.cfg.Dispatcher != nil {
		s.cfg.Dispatcher.Wake(queue)
	}
}

// Stored tells that jobs were committed outside Push and PushMany, such
// as the outbox's: they are counted as pushed, and the queues that got a
// job due now are woken, as after PushMany. res are the jobs' outcomes,
// in the order of ps.
func (s *Service) Stored(ps []*store.JobInsertParams, res []store.JobPushed) {
	s.settle(ps, res, false)
}

// settle counts the jobs stored and wakes the queues that got a job, once
// each (for a job due later, so that its leader learns when); handed-off
// jobs are with their dispatcher already.
func (s *Service) settle(ps []*store.JobInsertParams, res []store.JobPushed, handedOff bool) {
	// done: what this call told each queue already; a queue is woken and
	// told of later work at most once each, and a job due now is not left
	// to a look because a job due later came first.
	type told struct{ wake, later bool }
	var done map[string]told
	for i, p := range ps {
		if res[i].Existing {
			continue
		}
		s.cfg.Stats.Pushed(p.Queue, 1)
		if handedOff || s.cfg.Dispatcher == nil {
			continue
		}
		t := done[p.Queue]
		later := p.RunAfter != 0
		if later && t.later || !later && t.wake {
			continue
		}
		if later {
			// Due later: its leader looks when, and wakes then.
			s.cfg.Dispatcher.Later(p.Queue)
			t.later = true
		} else {
			s.cfg.Dispatcher.Wake(p.Queue)
			t.wake = true
		}
		if len(ps) > 1 {
			if done == nil {
				done = map[string]told{}
			}
			done[p.Queue] = t
		}
	}
}

// reserve takes a worker slot of this node's dispatcher for p, when p is
// due now and hand-off is possible.
func (s *Service) reserve(p *store.JobInsertParams) *dispatch.Handoff {
	if p.RunAfter != 0 || s.cfg.Dispatcher == nil {
		return nil
	}
	return s.cfg.Dispatcher.Reserve(p.Queue)
}

// Package lock serves named leases (locks and semaphores) on top of the
// store: acquire with a bounded wait, renew and release, and the wake-ups
// that let a waiter try again as soon as a holder lets go.
//
// The store decides who holds what, in one short transaction per attempt,
// by the database's clock; this package only decides when to try. A
// waiter tries again when a release on this node wakes it, when a release
// on another node is announced (PostgreSQL LISTEN/NOTIFY, where the store
// offers it), and otherwise every poll interval (jittered), so a lease
// that expires is noticed too. Only one waiter per name and node polls the
// database at a time; the others queue behind it in the process, so a
// crowd of waiters costs the database one attempt per poll per node, and
// an idle lock costs nothing.
package lock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/rowq/rowq/internal/store"
)

// ErrNotHeld means the lease named by a renew or release is not live: it
// expired (and may have been taken by another owner), was released, or
// never existed.
var ErrNotHeld = errors.New("lease not held")

// HeldError is the answer to an acquire that could not get the lock
// within its wait: the lock's live holders at the last attempt. None are
// listed when an acquire or release of the name was in progress on another
// node (it may be frozen half-way) and the lock had no holder before it.
type HeldError struct {
	Name    string
	Holders []*store.LockLease
}

func (e *HeldError) Error() string {
	if len(e.Holders) == 0 {
		return fmt.Sprintf("lock %q is being acquired or released by another request", e.Name)
	}
	owners := make([]string, len(e.Holders))
	for i, h := range e.Holders {
		owners[i] = fmt.Sprintf("%q", h.Owner)
	}
	return fmt.Sprintf("lock %q is held by %s", e.Name, strings.Join(owners, ", "))
}

// DefaultPollInterval is how often a waiter tries again when nothing woke
// it; each wait is drawn between half of it and all of it.
const DefaultPollInterval = 100 * time.Millisecond

// Config configures a Service.
type Config struct {
	Store  store.LockStore
	Logger *slog.Logger
	// PollInterval bounds how long a waiter sleeps between attempts when
	// nothing woke it; DefaultPollInterval when zero.
	PollInterval time.Duration
}

// Service acquires, renews and releases leases. It is safe for concurrent
// use.
type Service struct {
	store store.LockStore
	log   *slog.Logger
	poll  time.Duration

	mu     sync.Mutex
	queues map[string]*waitQueue

	closing chan struct{} // closed by Stop: waits end
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
}

// waitQueue is what the waiters of one name on this node share.
type waitQueue struct {
	// turn is held (a value sent) by the one waiter that polls the
	// database; the others block sending.
	turn chan struct{}
	// wake is closed, and replaced, when the lock may have become free.
	wake chan struct{}
	refs int
}

// New returns a Service; Start it to hear releases made on other nodes.
func New(cfg Config) *Service {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	return &Service{store: cfg.Store, log: cfg.Logger, poll: cfg.PollInterval, queues: map[string]*waitQueue{},
		closing: make(chan struct{})}
}

// Start listens for releases on other nodes, if the store announces them
// (LockListen), until Stop. It returns once it listens (or its first try
// failed, or ctx ended), so that waiters it serves next hear every
// release. Where the store cannot announce releases, waiters poll.
func (s *Service) Start(ctx context.Context) error {
	started, once := make(chan struct{}), sync.Once{}
	ready := func() { once.Do(func() { close(started) }) }
	defer func() {
		select {
		case <-started:
		case <-ctx.Done():
		}
	}()
	s.stop, s.done = make(chan struct{}), make(chan struct{})
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	go func() {
		<-s.stop
		cancel()
	}()
	go func() {
		defer close(s.done)
		for backoff := 100 * time.Millisecond; ; backoff = min(2*backoff, 5*time.Second) {
			err := s.store.LockListen(ctx, ready, s.wake)
			ready()
			if ctx.Err() != nil || errors.Is(err, errors.ErrUnsupported) {
				return
			}
			s.log.Warn("listening for lock releases failed; waiters poll meanwhile", "err", err, "retry_in", backoff)
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
		}
	}()
	return nil
}

// Stop ends every wait in progress (each makes a last attempt and answers
// with its outcome, so that a shutting-down server need not wait for them)
// and stops listening. It is idempotent and safe if Start was not called.
func (s *Service) Stop(context.Context) error {
	s.once.Do(func() {
		close(s.closing)
		if s.stop != nil {
			close(s.stop)
			<-s.done
		}
	})
	return nil
}

// AcquireParams are the arguments of Acquire.
type AcquireParams struct {
	Name  string
	Owner string
	TTL   time.Duration
	Limit int
	// Wait is how long to keep trying; 0 tries once.
	Wait time.Duration
}

// Acquire gets p.Owner a lease on p.Name, trying until p.Wait has passed
// or ctx ends. It returns a *HeldError when the lock stayed taken. If
// p.Owner holds a live lease already, that lease is returned unchanged.
// An attempt waits at most store.LockWait for an acquire or release of the
// name in progress elsewhere, so Acquire answers within p.Wait plus that.
func (s *Service) Acquire(ctx context.Context, p *AcquireParams) (*store.LockLease, error) {
	sp := &store.LockAcquireParams{Name: p.Name, Owner: p.Owner, TTL: p.TTL, Limit: p.Limit}
	try := func() (*store.LockLease, error) {
		res, err := s.store.LockAcquire(ctx, sp)
		if err != nil {
			return nil, err
		}
		if res.Lease == nil {
			return nil, &HeldError{Name: p.Name, Holders: res.Holders}
		}
		return res.Lease, nil
	}
	if p.Wait <= 0 {
		return try()
	}
	deadline := time.NewTimer(p.Wait)
	defer deadline.Stop()
	q := s.join(p.Name)
	defer s.leave(p.Name)

	// Queue for the turn to poll; try once more at the deadline so that
	// the answer names the holders of that moment.
	select {
	case q.turn <- struct{}{}:
		defer func() { <-q.turn }()
	case <-deadline.C:
		return try()
	case <-s.closing:
		return try()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	for {
		wake := s.wakeChan(p.Name)
		l, err := try()
		var held *HeldError
		if !errors.As(err, &held) {
			return l, err
		}
		select {
		case <-deadline.C:
			// The wait ended during this attempt (which may have waited
			// store.LockWait for the name): its answer is the last.
			return nil, err
		default:
		}
		pause := time.NewTimer(s.poll/2 + rand.N(s.poll/2+1))
		select {
		case <-wake:
		case <-pause.C:
		case <-deadline.C:
			pause.Stop()
			return try()
		case <-s.closing:
			pause.Stop()
			return try()
		case <-ctx.Done():
			pause.Stop()
			return nil, ctx.Err()
		}
		pause.Stop()
	}
}

// Renew moves a live lease's expiry to the database's now + p.TTL;
// ErrNotHeld if the lease is not live.
func (s *Service) Renew(ctx context.Context, p *store.LockRenewParams) (*store.LockLease, error) {
	l, err := s.store.LockRenew(ctx, p)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("renew lock %q: %w", p.Name, ErrNotHeld)
	}
	return l, err
}

// Release ends a live lease and wakes this node's waiters for the name;
// ErrNotHeld if the lease is not live.
func (s *Service) Release(ctx context.Context, p *store.LockReleaseParams) (*store.LockLease, error) {
	l, err := s.store.LockRelease(ctx, p)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("release lock %q: %w", p.Name, ErrNotHeld)
	}
	if err != nil {
		return nil, err
	}
	s.wake(p.Name)
	return l, nil
}

func (s *Service) join(name string) *waitQueue {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queues[name]
	if q == nil {
		q = &waitQueue{turn: make(chan struct{}, 1), wake: make(chan struct{})}
		s.queues[name] = q
	}
	q.refs++
	return q
}

func (s *Service) leave(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if q := s.queues[name]; q != nil {
		if q.refs--; q.refs == 0 {
			delete(s.queues, name)
		}
	}
}

// wakeChan returns the channel the next wake-up of name closes.
func (s *Service) wakeChan(name string) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queues[name].wake
}

// wake tells this node's waiters for name that it may be free.
func (s *Service) wake(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if q := s.queues[name]; q != nil {
		close(q.wake)
		q.wake = make(chan struct{})
	}
}

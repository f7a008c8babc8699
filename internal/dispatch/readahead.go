package dispatch

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/rowq/rowq/internal/store"
)

// Read-ahead: while a queue has a backlog (its last grab took all it asked
// for), its runner grabs jobs ahead of free worker slots and keeps them in
// memory, and a delivery that finishes takes the next of them in the same
// worker slot. A slot then never waits for a grab's round trip, and grabs
// are larger (a grab refills the read-ahead once half of it is gone),
// which costs the database less per job.
//
// The read-ahead holds at most min(max_workers, BatchSize) jobs. They are
// grabbed like any other (this node, grabbed_until), are extended with the
// node's other grabs, and are given back to waiting when the queue is
// paused or throttled, or the runner stops (store.JobsRelease). After a
// crash they wait for their grab to expire, like the deliveries that were
// in flight; they were never delivered, so a crash still delivers at most
// max_workers jobs twice.
type readAhead struct {
	mu   sync.Mutex
	jobs []*store.Job
	// refill: when a delivery takes a job and at most this many are left,
	// it wakes the runner to grab more.
	refill int
}

func (a *readAhead) len() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.jobs)
}

// add appends jobs and sets the refill mark.
func (a *readAhead) add(jobs []*store.Job, refill int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.jobs = append(a.jobs, jobs...)
	a.refill = refill
}

// take removes and returns up to n jobs from the front.
func (a *readAhead) take(n int) []*store.Job {
	a.mu.Lock()
	defer a.mu.Unlock()
	n = min(n, len(a.jobs))
	out := a.jobs[:n:n]
	a.jobs = a.jobs[n:]
	if len(a.jobs) == 0 {
		a.jobs = nil // let the backing array go
	}
	return out
}

// next is take(1) for a delivery that finished: it returns the next job,
// or nil, and whether the runner should grab more.
func (a *readAhead) next() (j *store.Job, low bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.jobs) == 0 {
		return nil, false
	}
	j = a.jobs[0]
	a.jobs[0] = nil
	a.jobs = a.jobs[1:]
	return j, len(a.jobs) <= a.refill
}

// giveBack puts the read-ahead's jobs back to waiting, for another runner
// or a resume to take at once instead of after their grab expires.
func (r *runner) giveBack() {
	jobs := r.ahead.take(math.MaxInt)
	if len(jobs) == 0 {
		return
	}
	r.keysGone(jobs) // their key slots come free (keys.go)
	if err := r.release(jobs, false); err != nil {
		// They are delivered once their grab expires.
		r.storeErr("give back read-ahead jobs", err)
		return
	}
	r.markBacklog()
}

// release puts jobs this node grabbed (leased: grabbed leased for a
// puller) back to waiting as they were. It is bounded by the hard stop
// too: a stop must not wait for a database that is away; the jobs then
// come back when their grab, or lease, runs out.
func (r *runner) release(jobs []*store.Job, leased bool) error {
	ids := make([]int64, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	ctx, cancel := context.WithTimeout(r.d.deliverCtx, 30*time.Second)
	defer cancel()
	_, err := r.d.cfg.Store.JobsRelease(ctx, &store.JobsReleaseParams{Node: r.d.cfg.Node, IDs: ids, Leased: leased})
	return err
}

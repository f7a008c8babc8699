package dispatch

import (
	"sync"
	"time"

	"github.com/rowq/rowq/internal/store"
)

// Local hand-off: when the node that accepts a job leads the job's queue,
// its runner has a free worker slot and the queue has no due backlog, the
// job is inserted already grabbed by this node and, once committed, handed
// straight to the runner: no grab, no wake-up. The worker slot is reserved
// before the insert, so max_workers holds; crash safety is that of any
// grab (the row names this node and expires after the grab lease).
//
// Worker slots are counted in runner.inflight, which counts slots taken,
// not deliveries running: a grab takes its slots before it asks the
// database and gives back those it did not fill, and a hand-off takes one
// before its insert. Both take with a compare-and-swap against max_workers,
// so together they never exceed it.

// handoffState is a runner's view of whether hand-off keeps FIFO order.
type handoffState struct {
	mu sync.Mutex // orders reservations against halt
	// idle: the last grab came back short, so the queue had no due
	// backlog that a handed-off job would overtake, and no job has since
	// gone waiting for want of a worker slot, nor been rescued.
	idle bool
	// gen counts the events that end idle; a grab's short answer starts
	// idle again only if gen did not move while it ran.
	gen uint64
	// grabbing: a grab holds worker slots it may give back; a hand-off
	// that finds no slot then is not behind deliveries in flight. While
	// idle, a grab takes at most half the free slots, so hand-offs go on
	// during it.
	grabbing bool
}

// takeSlots takes up to n free worker slots and returns how many it took.
// Finding none, it flushes the pending acknowledgements, whose jobs hold
// slots until they commit (runner.ack).
func (r *runner) takeSlots(n int64) int64 {
	max := int64(r.settings.Load().MaxWorkers)
	for {
		cur := r.inflight.Load()
		take := min(n, max-cur)
		if take <= 0 {
			r.d.complete.Flush()
			return 0
		}
		if r.inflight.CompareAndSwap(cur, cur+take) {
			return take
		}
	}
}

// releaseSlots gives back n worker slots and tells the loop one is free.
func (r *runner) releaseSlots(n int64) {
	if n <= 0 {
		return
	}
	r.inflight.Add(-n)
	r.signalFreed()
}

// signalFreed wakes the loop: a slot is free, or the read-ahead runs low.
func (r *runner) signalFreed() {
	select {
	case r.freed <- struct{}{}:
	default:
	}
}

// grabStart notes that a grab begins and returns the generation to pass
// to grabbed, and whether hand-off is on (no due backlog is known).
func (r *runner) grabStart() (gen uint64, idle bool) {
	r.ho.mu.Lock()
	defer r.ho.mu.Unlock()
	r.ho.grabbing = true
	return r.ho.gen, r.ho.idle
}

// grabbed records a grab's outcome: a short answer with no backlog event
// since gen means the queue has no due jobs, so hand-off may start.
func (r *runner) grabbed(short bool, gen uint64) {
	r.ho.mu.Lock()
	defer r.ho.mu.Unlock()
	r.ho.grabbing = false
	r.ho.idle = short && r.ho.gen == gen
}

// markBacklog records that due jobs may be waiting in the database: stop
// handing off until a grab comes back short.
func (r *runner) markBacklog() {
	r.ho.mu.Lock()
	defer r.ho.mu.Unlock()
	r.ho.gen++
	r.ho.idle = false
}

// reserve takes a worker slot for a hand-off, if the queue has no backlog,
// a slot is free and the runner is not stopping. The slot counts as a
// delivery in flight for halt and for extension of this node's grabs.
func (r *runner) reserve() bool {
	r.ho.mu.Lock()
	defer r.ho.mu.Unlock()
	if q := r.settings.Load(); !r.ho.idle || r.stopped() || q.Paused || q.MaxDispatchesPerSecond != nil {
		// A paused queue dispatches nothing, and a throttled one only as
		// its token bucket allows, which only the grab loop keeps.
		return false
	}
	if r.takeSlots(1) == 0 {
		if !r.ho.grabbing {
			// The job goes waiting behind the deliveries in flight:
			// hand-offs stop until a grab has taken it (and any others).
			r.ho.gen++
			r.ho.idle = false
		}
		return false
	}
	r.wg.Add(1)
	return true
}

// halt's close of stop, under the hand-off lock so that no reservation
// adds to wg once the runner has begun to stop.
func (r *runner) closeStop() {
	r.ho.mu.Lock()
	defer r.ho.mu.Unlock()
	close(r.stop)
}

// Reserve takes a worker slot of queue's runner for a job about to be
// inserted already grabbed by this node. It succeeds only if this node
// leads the queue, the runner has a free slot and the queue has no due
// backlog. On success exactly one of deliver (after the commit) or
// release (when the insert failed) must be called; on failure both are
// nil and the job is to be inserted waiting.
func (d *Dispatcher) Reserve(queue string) (deliver func(*store.Job), release func()) {
	d.mu.Lock()
	r := d.runners[queue]
	d.mu.Unlock()
	if r == nil || !d.cfg.Handoff || !r.reserve() {
		return nil, nil
	}
	var once sync.Once
	deliver = func(j *store.Job) {
		once.Do(func() {
			d.cfg.Stats.Popped(queue, 1)
			go func() {
				defer r.wg.Done()
				r.work(j)
			}()
		})
	}
	release = func() {
		once.Do(func() {
			r.releaseSlots(1)
			r.wg.Done()
		})
	}
	return deliver, release
}

// Holder returns the node id and grab lease a handed-off job is inserted
// with.
func (d *Dispatcher) Holder() (node string, lease time.Duration) {
	return d.cfg.Node, d.cfg.GrabLease
}

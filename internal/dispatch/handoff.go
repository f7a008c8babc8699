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
	if q := r.settings.Load(); !r.ho.idle || r.stopped() || q.Paused || q.MaxDispatchesPerSecond != nil || q.Pull() {
		// A paused queue dispatches nothing, and a throttled one only as
		// its token bucket allows, which only the grab loop keeps; a pull
		// queue's jobs wait for a puller.
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
	r.slots.wg.Add(1)
	return true
}

// halt's close of stop, under the hand-off lock so that no reservation
// adds to wg once the runner has begun to stop.
func (r *runner) closeStop() {
	r.ho.mu.Lock()
	defer r.ho.mu.Unlock()
	close(r.stop)
	r.rouse() // a dormant runner's loop ends by way of finish
}

// Handoff is a worker slot of a runner, reserved for one job that the
// enqueue path inserts already grabbed by Node until now + Lease. Exactly
// one of Deliver (after the insert committed) or Release (the insert
// failed) must be called; later calls do nothing.
type Handoff struct {
	// Node and Lease are what the job is inserted grabbed with.
	Node  string
	Lease time.Duration

	r    *runner
	once sync.Once
}

// Reserve takes a worker slot of queue's runner for a job about to be
// inserted already grabbed by this node. It succeeds only if hand-off is
// on, this node leads the queue, the runner has a free slot and the queue
// has no due backlog; otherwise it returns nil and the job is to be
// inserted waiting.
func (d *Dispatcher) Reserve(queue string) *Handoff {
	if !d.cfg.Handoff || !d.fresh() {
		return nil
	}
	r := d.runner(queue)
	if r == nil || !r.reserve() {
		return nil
	}
	return &Handoff{Node: d.cfg.Node, Lease: d.cfg.GrabLease, r: r}
}

// Deliver starts the delivery of j, the stored row of the job inserted
// for this hand-off, in the reserved slot.
func (h *Handoff) Deliver(j *store.Job) {
	h.once.Do(func() {
		h.r.d.cfg.Stats.Grabbed(h.r.name, []*store.Job{j}, time.Now())
		go func() {
			defer h.r.slots.wg.Done()
			if j.ConcurrencyKey != "" && len(h.r.admit([]*store.Job{j})) == 0 {
				// Parked behind its key (keys.go): the run loop, which may
				// sleep parked itself, now polls and recounts its keys.
				h.r.releaseSlots(1)
				h.r.nudge()
				return
			}
			if h.r.settings.Load().Paused {
				// Paused while the insert ran: not delivered now. The
				// read-ahead holds it until the run loop, held, gives it
				// back to waiting (giveBack).
				h.r.ahead.add([]*store.Job{j}, 0)
				h.r.releaseSlots(1)
				h.r.nudge()
				return
			}
			h.r.work(j)
		}()
	})
}

// Release gives the reserved slot back: the job was not inserted (or its
// insert's outcome is unknown, and the row, if any, is rescued once its
// lease has passed).
func (h *Handoff) Release() {
	h.once.Do(func() {
		h.r.releaseSlots(1)
		h.r.slots.wg.Done()
	})
}

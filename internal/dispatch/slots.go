package dispatch

import (
	"sync"
	"sync/atomic"

	"github.com/rowq/rowq/internal/store"
)

// Worker slots: slots.inflight counts the slots taken, not deliveries
// running. takeSlots takes them and releaseSlots gives them back; nothing
// else changes the count but a lease recount (pull.go), which takes and
// gives back slots for leases it found begun or ended elsewhere.
//
// A slot is taken, always with a compare-and-swap against max_workers so
// that together they never exceed it, by a grab before it asks the
// database (runner.fill, pullTurn; the part of the take it did not fill is
// given back in the same function), by a hand-off before its insert
// (handoff.go), and for the ready jobs of keys (startReady). It is given
// back when its worker slot's deliveries end (runner.work), when a
// hand-off's insert failed (Handoff.Release) or its job parks behind its
// key, and when a pulled job's lease ends (leaseEnded, dropLeases).
type slots struct {
	inflight atomic.Int64
	// freed wakes the loop: a slot came free, or the read-ahead runs low.
	freed chan struct{}
	// wg counts the deliveries and reserved hand-offs in flight, which
	// the runner's end waits for.
	wg sync.WaitGroup
}

// free returns how many worker slots of q are free (negative when
// max_workers was lowered below those taken).
func (s *slots) free(q *store.Queue) int64 {
	return int64(q.MaxWorkers) - s.inflight.Load()
}

// takeSlots takes up to n free worker slots and returns how many it took.
// Finding none, it flushes the pending acknowledgements, whose jobs hold
// slots until they commit (runner.ack).
func (r *runner) takeSlots(n int64) int64 {
	max := int64(r.settings.Load().MaxWorkers)
	for {
		cur := r.slots.inflight.Load()
		take := min(n, max-cur)
		if take <= 0 {
			r.d.complete.Flush()
			return 0
		}
		if r.slots.inflight.CompareAndSwap(cur, cur+take) {
			return take
		}
	}
}

// releaseSlots gives back n worker slots and tells the loop one is free.
func (r *runner) releaseSlots(n int64) {
	if n <= 0 {
		return
	}
	r.slots.inflight.Add(-n)
	r.signalFreed()
}

// signalFreed wakes the loop: a slot is free, or the read-ahead runs low.
func (r *runner) signalFreed() {
	select {
	case r.slots.freed <- struct{}{}:
	default:
	}
}

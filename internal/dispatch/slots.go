package dispatch

// Worker slots: runner.inflight counts the slots taken, not deliveries
// running. A grab takes its slots before it asks the database and gives
// back those it did not fill, and a hand-off takes one before its insert
// (handoff.go). Both take with a compare-and-swap against max_workers, so
// together they never exceed it.

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

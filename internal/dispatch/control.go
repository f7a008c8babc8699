package dispatch

// The dispatcher's face to the rest of the node: the enqueue path, the
// schedule loop and the API tell it here that a queue has a job due now
// (Wake), that a nudge came from another node (Nudged), that a queue's
// settings changed (Changed, SetPaused), and reserve worker slots for jobs
// they insert already grabbed (Reserve, handoff.go).

import "github.com/rowq/rowq/internal/store"

// Nudger reaches the leader of a queue on another node (internal/notify).
type Nudger interface {
	// Wake tells the queue's leader on another node that a job is due now.
	Wake(queue string)
	// Changed tells the queue's leader on another node to re-read the
	// queue's settings now.
	Changed(queue string)
	// Cancel tells the queue's leader on another node that a job was
	// cancelled: it aborts the job's delivery if it runs there.
	Cancel(queue string, id int64)
	// Finished tells the queue's leader on another node that the lease of
	// a job's grab ended: the worker slot of a pulled job comes free.
	Finished(queue string, g store.JobGrab)
}

// Wake tells the leader of queue that a job of the queue is due now
// (committed): this node's runner grabs at once, and a leader on another
// node is nudged. It does not wait for the nudge to arrive.
func (d *Dispatcher) Wake(queue string) {
	if !d.wakeLocal(queue) && d.cfg.Nudger != nil {
		d.cfg.Nudger.Wake(queue)
	}
}

// Later tells the leader of queue that a job of the queue is due later
// (committed): this node's runner, if parked, has its queue looked at to
// learn when (probe.go); a leader on another node is nudged, and looks
// when its runner parks again.
func (d *Dispatcher) Later(queue string) {
	r := d.runner(queue)
	switch {
	case r != nil:
		r.later()
	case d.cfg.Nudger != nil:
		d.cfg.Nudger.Wake(queue)
	}
}

// Nudged handles a nudge from another node (POST /queue/{name}/wake): it
// wakes this node's runner of queue, after a leadership cycle when the
// queue's settings changed, and reports whether this node leads the queue.
// A nudge is never passed on.
func (d *Dispatcher) Nudged(queue string, settings bool) bool {
	if settings {
		d.changed(queue)
	}
	return d.wakeLocal(queue)
}

// Changed tells that queue was created, deleted or its settings changed
// (the change has committed): this node runs a leadership cycle now (it
// claims a new queue, re-reads the changed settings, or stops the runner
// of a deleted queue), and the queue's leader, if another node, is nudged
// to do the same.
func (d *Dispatcher) Changed(queue string) {
	d.changed(queue)
	if d.cfg.Nudger != nil {
		d.cfg.Nudger.Changed(queue)
	}
}

// wakeLocal tells the runner of queue, if this node leads it, that a job
// is due now, and reports whether this node leads it.
func (d *Dispatcher) wakeLocal(queue string) bool {
	r := d.runner(queue)
	if r != nil {
		r.nudge()
	}
	return r != nil
}

// runner returns this node's runner of queue, nil when it does not lead it.
func (d *Dispatcher) runner(queue string) *runner {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.runners[queue]
}

// changed asks for a leadership cycle now that reads the queues changed
// since the last and asks after queue if that read does not return it
// (deleted, or no longer led).
func (d *Dispatcher) changed(queue string) {
	d.mu.Lock()
	d.recheck = addName(d.recheck, queue)
	d.mu.Unlock()
	d.refreshNow()
}

// refreshNow asks for a leadership cycle now instead of at the next tick,
// so that a queue created on this node is claimed (and its jobs
// dispatched) without waiting for the refresh interval.
func (d *Dispatcher) refreshNow() {
	select {
	case d.refresh <- struct{}{}:
	default:
	}
}

// pauseMark is a pause or resume applied on this node: the value of
// Dispatcher.pauses it was given, and the state it set.
type pauseMark struct {
	at     uint64
	paused bool
}

// SetPaused applies a pause or a resume of queue to its runner on this
// node at once, without waiting for the next refresh: the API calls it on
// the node that served the request, once the change has committed, before
// Changed. A grab already under way when the pause arrives still starts
// its jobs; jobs in flight finish.
//
// A leadership cycle that read the queue before the commit must not undo
// the change when it applies what it read, nor start a runner for the
// queue in the old state: SetPaused leaves a mark that sync honours until
// a cycle reads the queue afresh. The mark and the settings are written
// under d.mu, which sync holds.
func (d *Dispatcher) SetPaused(queue string, paused bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.pauses++
	d.marks[queue] = pauseMark{at: d.pauses, paused: paused}
	r := d.runners[queue]
	if r == nil {
		return
	}
	old := r.settings.Load()
	if old.Paused == paused {
		return
	}
	q := *old
	q.Paused = paused
	r.settings.Store(&q)
	r.nudge() // resumed: grab now; paused: nothing, the loop skips grabs
}

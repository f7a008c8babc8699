package dispatch

// pauseMark is a pause or resume applied on this node: the value of
// Dispatcher.pauses it was given, and the state it set.
type pauseMark struct {
	at     uint64
	paused bool
}

// SetPaused applies a pause or a resume of queue to its runner on this
// node at once, without waiting for the next refresh: the API calls it on
// the node that served the request, once the change has committed. The
// queue's leader, if another node, re-reads the queue when nudged
// (notify.Nudger.Changed) or at its next refresh. A grab already under way
// when the pause arrives still starts its jobs; jobs in flight finish.
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

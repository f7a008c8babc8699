package dispatch

// SetPaused applies a pause or a resume of queue to its runner on this
// node at once, without waiting for the next refresh: the API calls it on
// the node that served the request. Other nodes (the queue's leader, if
// another) see the change at their next refresh. A grab already under way
// when the pause arrives still starts its jobs; jobs in flight finish.
func (d *Dispatcher) SetPaused(queue string, paused bool) {
	d.mu.Lock()
	r := d.runners[queue]
	d.mu.Unlock()
	if r == nil {
		return
	}
	for {
		old := r.settings.Load()
		if old.Paused == paused {
			return
		}
		q := *old
		q.Paused = paused
		if r.settings.CompareAndSwap(old, &q) {
			break
		}
	}
	r.nudge() // resumed: grab now; paused: nothing, the loop skips grabs
}

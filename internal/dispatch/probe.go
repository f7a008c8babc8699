package dispatch

import (
	"context"
	"slices"
	"time"
)

// The prober stands in for the polls of parked runners: a runner whose
// last grab came back short does not poll its queue, and instead the
// prober looks for due jobs in every parked queue whose polling_interval
// has passed since its last look, with one query (store.JobsDue), and
// wakes those that have some. A thousand idle queues then cost one short
// query per polling interval, not a thousand grab transactions.
//
// Jobs that become due without a wake-up (enqueued on another node,
// deferred, retried, rescued) are found within a queue's
// polling_interval, as before; a job enqueued on this node wakes its
// runner at once.
//
// Rescues go the same way: every RescueInterval the prober asks which
// parked queues hold an expired grab (store.JobsExpired), and only their
// runners rescue.

// probeMaxTick bounds the prober's sleep. It sleeps at most the shortest
// polling_interval of the queues it may have to look at, so a queue that
// parks is looked at within about its interval; a tick with nothing to
// look at reads no database.
const probeMaxTick = 100 * time.Millisecond

func (d *Dispatcher) probe() {
	defer close(d.probeDone)
	t := time.NewTimer(0)
	defer t.Stop()
	var lastRescue time.Time
	for {
		select {
		case <-d.stop:
			return
		case <-t.C:
		}
		next := d.probeOnce()
		if since := time.Since(lastRescue); since >= d.cfg.RescueInterval {
			lastRescue = time.Now()
			d.rescueParked()
			next = min(next, d.cfg.RescueInterval)
		} else {
			next = min(next, d.cfg.RescueInterval-since)
		}
		t.Reset(next)
	}
}

// rescueParked asks which parked queues hold an expired grab and has their
// runners rescue them.
func (d *Dispatcher) rescueParked() {
	var parked []string
	d.mu.Lock()
	for name, r := range d.runners {
		if r.parked.Load() {
			parked = append(parked, name)
		}
	}
	d.mu.Unlock()
	if len(parked) == 0 {
		return
	}
	expired, err := inChunks(parked, d.cfg.Store.JobsExpired)
	if err != nil {
		d.log.Debug("look for expired grabs failed; the parked runners rescue", "err", err)
		expired = parked
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, name := range expired {
		if r := d.runners[name]; r != nil {
			r.rescueNow.Store(true)
			r.nudge()
		}
	}
}

// probeOnce looks at the parked queues that are due for a look and
// returns how long to sleep until the next look falls due.
func (d *Dispatcher) probeOnce() time.Duration {
	now := time.Now()
	next := probeMaxTick
	var look []*runner
	d.mu.Lock()
	for _, r := range d.runners {
		q := r.settings.Load()
		if q.Paused {
			continue
		}
		interval := time.Duration(q.PollingInterval) * time.Millisecond
		if !r.parked.Load() {
			// Awake now, it may park any moment: be back within its
			// interval.
			next = min(next, interval)
			continue
		}
		// Looks falling due within half an interval go together, so that
		// queues with the same interval share one query.
		if wait := time.Unix(0, r.lastLook.Load()).Add(interval).Sub(now); wait <= interval/2 {
			look = append(look, r)
			next = min(next, interval)
		} else {
			next = min(next, wait)
		}
	}
	d.mu.Unlock()
	if len(look) == 0 {
		return max(next, time.Millisecond)
	}
	names := make([]string, len(look))
	for i, r := range look {
		names[i] = r.name
	}
	due, err := inChunks(names, d.cfg.Store.JobsDue)
	if err != nil {
		// Wake them all: each grabs, and backs off on its own if the
		// database is away.
		d.log.Debug("look for due jobs failed; waking the parked runners", "err", err)
		due = names
	}
	stamp := now.UnixNano()
	for _, r := range look {
		r.lastLook.Store(stamp)
	}
	d.mu.Lock()
	for _, name := range due {
		if r := d.runners[name]; r != nil {
			r.nudge()
		}
	}
	d.mu.Unlock()
	return max(next, time.Millisecond)
}

// probeChunk bounds the queue names one look sends, so that a node leading
// very many queues sends several statements of bounded size.
const probeChunk = 1000

// inChunks runs look on names probeChunk at a time and gathers the names
// it returns.
func inChunks(names []string, look func(context.Context, []string) ([]string, error)) ([]string, error) {
	var out []string
	for chunk := range slices.Chunk(names, probeChunk) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		got, err := look(ctx, chunk)
		cancel()
		if err != nil {
			return nil, err
		}
		out = append(out, got...)
	}
	return out, nil
}

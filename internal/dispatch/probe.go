package dispatch

import (
	"context"
	"math"
	"slices"
	"time"

	"github.com/rowq/rowq/internal/store"
)

// The prober stands in for the polls of parked runners, so that an idle
// queue costs next to nothing, however many there are. A runner whose last
// grab came back short parks: it waits for a wake-up, not for its own
// poll. What can make work due in a parked queue, and how the prober
// learns of it:
//
//   - a job enqueued due now, on any node: the enqueue wakes the runner
//     (Wake; from another node, a nudge through internal/notify);
//   - a job enqueued for later, a retry, an accepted job's lease: the
//     queue is looked at (store.JobsNextDue, one statement for every queue
//     due for a look), which tells when its earliest waiting job is due
//     and when its earliest grab or lease runs out; the prober then sleeps
//     until the earliest such time over all queues and wakes that runner,
//     to grab or to rescue. A queue is looked at when its runner parks (at
//     most once per polling_interval), and when a job is enqueued for
//     later or a retry or lease is recorded while it is parked (Later);
//   - anything that escaped both (a nudge lost while the queue changed
//     leader, a job written by another program): the sweep, once a
//     sweepGap, which looks at the parked queues not looked at for a
//     polling_interval, the longest-unlooked first, at most sweepRate of
//     them, with store.JobsExpired as well, at most once a RescueInterval
//     per queue (grabs whose holder unregistered).
//
// So the statements an idle node sends do not grow with its queues: at
// most one look a probeGap for the queues that parked or were told of
// later work (none while they stay idle), and one sweep a sweepGap. What
// grows is how long the sweep takes to come round (about N/sweepRate
// sweepGaps for N queues), which only the jobs no wake-up announced wait
// for.

// probeGap spaces the prober's looks, so that queues parking at about the
// same time share one statement. Nothing due now waits for a look: jobs
// due now come with a wake-up.
const probeGap = 100 * time.Millisecond

// probeMaxSleep bounds the prober's sleep when nothing is known to fall
// due, so that the sweep comes round.
const probeMaxSleep = time.Second

// sweepGap spaces the sweeps: an idle node's one statement a sweepGap,
// whether its queues' polling_intervals are short or long. A sweep shares
// its statement with the looks due at the time.
const sweepGap = time.Second

// sweepRate bounds the queues one sweep looks at: one chunk.
const sweepRate = probeChunk

// probeChunk bounds the queue names one look sends, so that a node leading
// very many queues sends statements of bounded size.
const probeChunk = 1000

func (d *Dispatcher) probe() {
	defer close(d.probeDone)
	t := time.NewTimer(0)
	defer t.Stop()
	p := prober{d: d}
	for {
		select {
		case <-d.stop:
			return
		case <-t.C:
		case <-d.probeKick:
			t.Stop() // since Go 1.23, Reset then drops a tick not received
		}
		next := p.once(time.Now())
		t.Reset(next)
	}
}

// prober is the state of the prober's loop.
type prober struct {
	d         *Dispatcher
	lastLook  time.Time
	lastSweep time.Time
}

// once wakes the parked runners whose work fell due, looks at the queues
// that need a look (and the sweep's share), and returns how long to sleep.
func (p *prober) once(now time.Time) time.Duration {
	d := p.d
	ns := now.UnixNano()
	next := ns + int64(probeMaxSleep)
	mayLook := now.Sub(p.lastLook) >= probeGap
	var look, sweep []*runner
	d.mu.Lock()
	for _, r := range d.runners {
		if !r.parked.Load() || r.settings.Load().Paused {
			continue // awake; or paused, and a resume wakes it
		}
		// A runner woken for a time that the database does not see come yet
		// finds nothing, and has its queue looked at again when it parks.
		// A pull queue grabs only for a waiting lease request, which wakes
		// it itself: its due jobs wake nobody.
		idle := r.idlePuller()
		if at := r.dueAt.Load(); at != 0 && at <= ns && !idle && r.dueAt.CompareAndSwap(at, 0) {
			r.unknown.Store(true)
			r.nudge()
		}
		if at := r.expiresAt.Load(); at != 0 && at <= ns && r.expiresAt.CompareAndSwap(at, 0) {
			r.unknown.Store(true)
			r.rescueNow.Store(true)
			r.nudge()
		}
		if at := r.dueAt.Load(); at != 0 && !idle {
			next = min(next, at)
		}
		if at := r.expiresAt.Load(); at != 0 {
			next = min(next, at)
		}
		if at := r.lookAt.Load(); at != 0 {
			if at <= ns && mayLook {
				look = append(look, r)
			} else {
				next = min(next, max(at, p.lastLook.Add(probeGap).UnixNano()))
			}
			continue
		}
		interval := time.Duration(r.settings.Load().PollingInterval) * time.Millisecond
		if at := r.lookedAt.Load() + int64(interval); at <= ns {
			sweep = append(sweep, r)
		} else {
			next = min(next, at)
		}
	}
	d.mu.Unlock()
	switch {
	case len(sweep) == 0:
	case !mayLook || now.Sub(p.lastSweep) < sweepGap:
		next = min(next, max(p.lastLook.Add(probeGap).UnixNano(), p.lastSweep.Add(sweepGap).UnixNano()))
		sweep = nil
	case len(sweep) > sweepRate:
		sweep = longestUnlooked(sweep, sweepRate)
		next = min(next, now.Add(sweepGap).UnixNano()) // the rest at the next sweep
	}
	if len(sweep) > 0 {
		p.lastSweep = now
	}
	if len(sweep) > 0 || len(look) > 0 {
		p.lastLook = now
		// The queues looked at have new times to sleep until.
		next = min(next, p.look(slices.Concat(look, sweep)))
	}
	return max(time.Duration(next-time.Now().UnixNano()), time.Millisecond)
}

// longestUnlooked returns the n runners of rs looked at longest ago, in
// any order; it reorders rs. It sorts their times, not the runners: one
// sort of integers a sweep, however many queues.
func longestUnlooked(rs []*runner, n int) []*runner {
	times := make([]int64, len(rs))
	for i, r := range rs {
		times[i] = r.lookedAt.Load()
	}
	slices.Sort(times)
	limit := times[n-1]
	out := rs[:0]
	for _, r := range rs {
		if len(out) < n && r.lookedAt.Load() <= limit {
			out = append(out, r)
		}
	}
	return out
}

// look asks when the queues of runners next need them, wakes those with
// work due now, and notes the rest's times; it also asks which hold a grab
// whose holder is gone, of those not asked for a RescueInterval. It returns
// the earliest of the times it noted (UnixNano), when the prober must wake
// next for these queues, or MaxInt64.
func (p *prober) look(runners []*runner) (next int64) {
	next = math.MaxInt64
	d := p.d
	asked := make([]int64, len(runners))
	names := make([]string, len(runners))
	for i, r := range runners {
		asked[i] = r.lookAt.Load()
		names[i] = r.name
	}
	due, err := inChunks(names, d.cfg.Store.JobsNextDue)
	if err != nil {
		// Wake them all: each grabs and rescues, and backs off on its own
		// if the database is away.
		d.log.Debug("look at parked queues failed; waking them", "err", err)
		for _, r := range runners {
			r.rescueNow.Store(true)
			r.nudge()
		}
		return next
	}
	byName := make(map[string]store.QueueDue, len(due))
	for _, q := range due {
		byName[q.Queue] = q
	}
	// The times are from the database's now during the look: counted from
	// after it, a runner is woken a little late rather than too early.
	ns := time.Now().UnixNano()
	for i, r := range runners {
		r.lookedAt.Store(ns)
		r.lookAt.CompareAndSwap(asked[i], 0) // unless asked again meanwhile
		q, ok := byName[r.name]
		if !ok {
			q = store.QueueDue{Job: store.Never, Expiry: store.Never}
		}
		r.dueAt.Store(at(ns, q.Job))
		r.expiresAt.Store(at(ns, q.Expiry))
		if q.Expiry <= 0 {
			r.rescueNow.Store(true)
		}
		if q.Expiry <= 0 || q.Job <= 0 && !r.idlePuller() {
			r.dueAt.Store(0)
			r.nudge()
		}
		if at := r.dueAt.Load(); at != 0 && !r.idlePuller() {
			next = min(next, at)
		}
		if at := r.expiresAt.Load(); at != 0 {
			next = min(next, at)
		}
		if r.lookAt.Load() != 0 {
			next = min(next, ns+int64(probeGap)) // asked again meanwhile
		}
		interval := time.Duration(r.settings.Load().PollingInterval) * time.Millisecond
		next = min(next, ns+int64(max(interval, sweepGap)))
	}
	// Grabs whose holder unregistered: asked of each queue that has a grab
	// or a lease at all, at most once a RescueInterval, and of a queue
	// whose runner started cold at its first look that finds one. A queue
	// the look found no grab or lease in has none to rescue: most idle
	// queues are not asked.
	var sweepNames []string
	for _, r := range runners {
		if q, ok := byName[r.name]; !ok || q.Expiry == store.Never {
			continue
		}
		if ns-r.expiredAt >= int64(d.cfg.RescueInterval) {
			r.expiredAt = ns
			sweepNames = append(sweepNames, r.name)
		}
	}
	if len(sweepNames) == 0 {
		return next
	}
	expired, err := inChunks(sweepNames, d.cfg.Store.JobsExpired)
	if err != nil {
		d.log.Debug("look for expired grabs failed", "err", err)
		return next
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, name := range expired {
		if r := d.runners[name]; r != nil {
			r.rescueNow.Store(true)
			r.nudge()
		}
	}
	return next
}

// idlePuller reports whether r serves a pull queue and no lease request
// waits: its due jobs are for later requests.
func (r *runner) idlePuller() bool {
	return r.settings.Load().Pull() && r.pullers() == 0
}

// at returns the UnixNano of now + in, or 0 for Never.
func at(now int64, in time.Duration) int64 {
	if in == store.Never {
		return 0
	}
	return now + int64(in)
}

// parking tells the prober that r parks: its queue is looked at once its
// polling_interval has passed since the last look, in case its grab left
// jobs due later or grabs or leases to expire; at once if it got work due
// later meanwhile (later).
func (r *runner) parking(now time.Time) {
	at := now.UnixNano()
	if !r.unknown.Swap(false) {
		interval := time.Duration(r.settings.Load().PollingInterval) * time.Millisecond
		at = max(at, r.lookedAt.Load()+int64(interval))
		if asked := r.lookAt.Load(); asked != 0 && asked <= at {
			return // a look is asked for already, no later
		}
	}
	r.lookAt.Store(at)
	r.d.kickProber()
}

// later tells the prober that r's queue got work due later (a deferred
// job, a retry, a lease): it is looked at now if r is parked, else as soon
// as it parks.
func (r *runner) later() {
	r.unknown.Store(true)
	if r.parked.Load() {
		r.parking(time.Now())
	}
}

func (d *Dispatcher) kickProber() {
	select {
	case d.probeKick <- struct{}{}:
	default:
	}
}

// inChunks runs look on names probeChunk at a time and gathers what it
// returns.
func inChunks[T any](names []string, look func(context.Context, []string) ([]T, error)) ([]T, error) {
	var out []T
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

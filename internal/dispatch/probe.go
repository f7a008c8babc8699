package dispatch

import (
	"container/heap"
	"context"
	"slices"
	"sync"
	"sync/atomic"
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

// lookRetry is how long the prober waits to look again at queues whose
// look failed.
const lookRetry = time.Second

// sweepGap spaces the sweeps: an idle node's one statement a sweepGap,
// whether its queues' polling_intervals are short or long. A sweep shares
// its statement with the looks due at the time.
const sweepGap = time.Second

// sweepRate bounds the queues one sweep looks at. It is what an idle node
// spends the most on (a look reads an index entry per queue: 1,000 a
// second cost MariaDB about 1 % of a core), and what bounds the wait of a
// job no wake-up announced: about N/sweepRate seconds with N queues.
const sweepRate = 500

// probeChunk bounds the queue names one look sends, so that a node leading
// very many queues sends statements of bounded size.
const probeChunk = 1000

// probeState is the prober's view of a runner: whether it is parked, and
// the times (UnixNano, 0 for none) at which it needs the prober: lookAt,
// when its queue is to be looked at; lookedAt, its last look; dueAt, when
// its earliest waiting job falls due; expiresAt, when its earliest grab or
// lease runs out.
type probeState struct {
	// parked: the last grab came back short and the runner waits for a
	// wake-up, not for its own poll.
	parked                             atomic.Bool
	lookAt, lookedAt, dueAt, expiresAt atomic.Int64
	// unknown: the queue got work due later since its last look (later).
	unknown atomic.Bool
	// rescueNow: the prober saw an expired grab or lease in this parked
	// queue.
	rescueNow atomic.Bool
	// expiredAt is when the prober's sweep last asked whether the queue
	// holds a grab whose holder is gone (UnixNano; the prober's own).
	expiredAt int64
	// heap and key are the runner's index (-1: absent) and key in the
	// prober's two heaps, events and sweep; the prober's mu guards them.
	heap [2]int
	key  [2]int64
}

// The prober's heaps: events orders parked runners by the earliest of
// their lookAt, dueAt and expiresAt; sweep by when their last look gets
// older than their polling_interval.
const (
	events = iota
	sweeps
)

// prober is the state of the prober's loop. Its heaps hold the parked
// runners that need it at some time, so that a round costs what it
// wakes or looks at, not what the node leads: an idle queue is an entry
// in each heap and nothing else.
type prober struct {
	d         *Dispatcher
	mu        sync.Mutex
	heaps     [2]runnerHeap
	lastLook  time.Time // the prober's own
	lastSweep time.Time
}

func newProber(d *Dispatcher) *prober {
	return &prober{d: d, heaps: [2]runnerHeap{{which: events}, {which: sweeps}}}
}

func (d *Dispatcher) probe() {
	defer close(d.probeDone)
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-d.stop:
			return
		case <-t.C:
		case <-d.probeKick:
			t.Stop() // since Go 1.23, Reset then drops a tick not received
		}
		next := d.prober.once(time.Now())
		t.Reset(next)
	}
}

// schedule puts r in the heaps at the times it needs the prober, or takes
// it out of those it needs none of. The runner calls it whenever it
// changes those times (parking), the prober after each look.
func (p *prober) schedule(r *runner) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.place(r)
}

// place is schedule with p.mu held.
func (p *prober) place(r *runner) {
	ev, sw := r.needs()
	p.heaps[events].set(r, ev)
	p.heaps[sweeps].set(r, sw)
}

// needs returns when r next needs the prober for an event (its lookAt,
// dueAt or expiresAt) and for the sweep, 0 for never: a runner that is not
// parked, or is paused (a resume wakes it), needs nothing.
func (r *runner) needs() (event, sweep int64) {
	q := r.settings.Load()
	if !r.probe.parked.Load() || q.Paused || r.stopped() {
		return 0, 0
	}
	earliest := func(a, b int64) int64 {
		if a == 0 || b != 0 && b < a {
			return b
		}
		return a
	}
	// A pull queue grabs only for a waiting lease request, which wakes it
	// itself: its due jobs wake nobody.
	if !r.idlePuller() {
		event = r.probe.dueAt.Load()
	}
	event = earliest(event, r.probe.expiresAt.Load())
	look := r.probe.lookAt.Load()
	event = earliest(event, look)
	if look == 0 {
		interval := time.Duration(q.PollingInterval) * time.Millisecond
		sweep = r.probe.lookedAt.Load() + int64(interval)
	}
	return event, sweep
}

// once wakes the parked runners whose work fell due, looks at the queues
// that need a look (and the sweep's share), and returns how long to sleep.
// Nothing due now waits for a look: jobs due now come with a wake-up.
func (p *prober) once(now time.Time) time.Duration {
	ns := now.UnixNano()
	mayLook := now.Sub(p.lastLook) >= probeGap
	var look, later []*runner
	p.mu.Lock()
	for r := p.heaps[events].due(ns); r != nil; r = p.heaps[events].due(ns) {
		if ev, _ := r.needs(); ev == 0 {
			continue // awake, paused or stopped: it is placed when it parks
		}
		// A runner woken for a time that the database does not see come yet
		// finds nothing, and has its queue looked at again when it parks.
		if at := r.probe.dueAt.Load(); at != 0 && at <= ns && !r.idlePuller() && r.probe.dueAt.CompareAndSwap(at, 0) {
			r.probe.unknown.Store(true)
			r.nudge()
		}
		if at := r.probe.expiresAt.Load(); at != 0 && at <= ns && r.probe.expiresAt.CompareAndSwap(at, 0) {
			r.probe.unknown.Store(true)
			r.probe.rescueNow.Store(true)
			r.nudge()
		}
		if at := r.probe.lookAt.Load(); at != 0 && at <= ns && mayLook {
			look = append(look, r)
			continue
		}
		later = append(later, r)
	}
	if mayLook && now.Sub(p.lastSweep) >= sweepGap {
		// The queues not looked at for their polling_interval, those
		// longest overdue first, at most sweepRate of them.
		for len(look) < sweepRate {
			r := p.heaps[sweeps].due(ns)
			if r == nil {
				break
			}
			if _, sw := r.needs(); sw != 0 {
				look = append(look, r)
			}
		}
		p.lastSweep = now
	}
	for _, r := range later {
		p.place(r)
	}
	// A look asked for before the gap has passed waits for it.
	lookNext := max(ns, p.lastLook.Add(probeGap).UnixNano())
	p.mu.Unlock()
	if len(look) > 0 {
		p.lastLook = now
		p.look(look)
		lookNext = p.lastLook.Add(probeGap).UnixNano()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	next := ns + int64(probeMaxSleep)
	if at, ok := p.heaps[events].top(); ok {
		next = min(next, max(at, lookNext))
	}
	if at, ok := p.heaps[sweeps].top(); ok {
		next = min(next, max(at, lookNext, p.lastSweep.Add(sweepGap).UnixNano()))
	}
	return max(time.Duration(next-time.Now().UnixNano()), time.Millisecond)
}

// look asks when the queues of runners next need them, wakes those with
// work due now, notes the rest's times and places them in the heaps; it
// also asks which hold a grab whose holder is gone, of those not asked for
// a RescueInterval.
func (p *prober) look(runners []*runner) {
	d := p.d
	asked := make([]int64, len(runners))
	names := make([]string, len(runners))
	for i, r := range runners {
		asked[i] = r.probe.lookAt.Load()
		names[i] = r.name
	}
	due, err := inChunks(names, d.cfg.Store.JobsNextDue)
	if err != nil {
		// Look again in a while. Waking them all instead, to grab and
		// rescue each on its own, would send as many statements to a
		// database that is away or slow, and give each a goroutine.
		d.log.Debug("look at parked queues failed; looking again", "queues", len(runners), "in", lookRetry, "err", err)
		again := time.Now().Add(lookRetry).UnixNano()
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, r := range runners {
			r.probe.lookAt.Store(again)
			p.place(r)
		}
		return
	}
	byName := make(map[string]store.QueueDue, len(due))
	for _, q := range due {
		byName[q.Queue] = q
	}
	// The times are from the database's now during the look: counted from
	// after it, a runner is woken a little late rather than too early.
	ns := time.Now().UnixNano()
	for i, r := range runners {
		r.probe.lookedAt.Store(ns)
		r.probe.lookAt.CompareAndSwap(asked[i], 0) // unless asked again meanwhile
		q, ok := byName[r.name]
		if !ok {
			q = store.QueueDue{Job: store.Never, Expiry: store.Never}
		}
		r.probe.dueAt.Store(at(ns, q.Job))
		r.probe.expiresAt.Store(at(ns, q.Expiry))
		if q.Expiry <= 0 {
			r.probe.rescueNow.Store(true)
		}
		if q.Expiry <= 0 || q.Job <= 0 && !r.idlePuller() {
			r.probe.dueAt.Store(0)
			r.nudge()
		}
	}
	p.mu.Lock()
	for _, r := range runners {
		p.place(r)
	}
	p.mu.Unlock()
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
		if ns-r.probe.expiredAt >= int64(d.cfg.RescueInterval) {
			r.probe.expiredAt = ns
			sweepNames = append(sweepNames, r.name)
		}
	}
	if len(sweepNames) == 0 {
		return
	}
	expired, err := inChunks(sweepNames, d.cfg.Store.JobsExpired)
	if err != nil {
		d.log.Debug("look for expired grabs failed", "err", err)
		return
	}
	for _, name := range expired {
		if r := d.runner(name); r != nil {
			r.probe.rescueNow.Store(true)
			r.nudge()
		}
	}
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
	if !r.probe.unknown.Swap(false) {
		interval := time.Duration(r.settings.Load().PollingInterval) * time.Millisecond
		at = max(at, r.probe.lookedAt.Load()+int64(interval))
		if asked := r.probe.lookAt.Load(); asked != 0 && asked <= at {
			at = 0 // a look is asked for already, no later
		}
	}
	if at != 0 {
		r.probe.lookAt.Store(at)
	}
	r.d.prober.schedule(r)
	r.d.kickProber()
}

// later tells the prober that r's queue got work due later (a deferred
// job, a retry, a lease): it is looked at now if r is parked, else as soon
// as it parks.
func (r *runner) later() {
	r.probe.unknown.Store(true)
	if r.probe.parked.Load() {
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

// runnerHeap is a min-heap of runners by their key in it (probeState).
type runnerHeap struct {
	which int
	rs    []*runner
}

func (h *runnerHeap) Len() int { return len(h.rs) }
func (h *runnerHeap) Less(i, j int) bool {
	return h.rs[i].probe.key[h.which] < h.rs[j].probe.key[h.which]
}
func (h *runnerHeap) Swap(i, j int) {
	h.rs[i], h.rs[j] = h.rs[j], h.rs[i]
	h.rs[i].probe.heap[h.which] = i
	h.rs[j].probe.heap[h.which] = j
}
func (h *runnerHeap) Push(x any) {
	r := x.(*runner)
	r.probe.heap[h.which] = len(h.rs)
	h.rs = append(h.rs, r)
}
func (h *runnerHeap) Pop() any {
	n := len(h.rs) - 1
	r := h.rs[n]
	h.rs[n] = nil
	h.rs = h.rs[:n]
	r.probe.heap[h.which] = -1
	return r
}

// set gives r the key at, placing it in the heap, moving it, or taking it
// out (at 0).
func (h *runnerHeap) set(r *runner, at int64) {
	i := r.probe.heap[h.which]
	switch {
	case at == 0 && i >= 0:
		heap.Remove(h, i)
	case at == 0:
	case i >= 0:
		r.probe.key[h.which] = at
		heap.Fix(h, i)
	default:
		r.probe.key[h.which] = at
		heap.Push(h, r)
	}
}

// due takes out and returns the runner with the earliest key if that is
// not after now, else nil.
func (h *runnerHeap) due(now int64) *runner {
	if len(h.rs) == 0 || h.rs[0].probe.key[h.which] > now {
		return nil
	}
	return heap.Pop(h).(*runner)
}

// top returns the earliest key.
func (h *runnerHeap) top() (int64, bool) {
	if len(h.rs) == 0 {
		return 0, false
	}
	return h.rs[0].probe.key[h.which], true
}

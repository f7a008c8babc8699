package dispatch

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rowq/rowq/internal/store"
)

// runner dispatches one queue while this node leads it. Its run loop
// (run) has a goroutine only while the queue has work: a runner parked
// with nothing to time is dormant, an entry of the prober's (probe.go),
// and a nudge starts its loop again.
type runner struct {
	d        *Dispatcher
	name     string
	log      atomic.Pointer[slog.Logger] // made at the first log line (logger)
	settings atomic.Pointer[store.Queue]

	wake     chan struct{} // a job may be due now
	stop     chan struct{}
	stopOnce sync.Once
	done     sync.WaitGroup // held until the loop has ended for good: no delivery left
	// life is lifeRunning while a goroutine runs the loop, lifeDormant
	// while none does (rouse).
	life    atomic.Int32
	turn    turnState   // the loop's memory, its goroutine's alone
	failing atomic.Bool // the last store call failed: log the next failure quietly
	bucket  *bucket     // max_dispatches_per_second; used by the loop only
	slots   slots       // worker slots (slots.go)
	probe   probeState  // the prober's view of a parked runner (probe.go)
	flow    hostFlow    // worker hosts slowed down or held back (flow.go)
	ho      handoffState
	ahead   readAhead
	acking  atomic.Int64 // deliveries waiting for their acknowledgement
	pull    pullState    // a pull queue's pullers and leases (pull.go)
	keys    keyRoom      // per-key concurrency and order (keys.go)
}

// dozeAfter is how long a runner parked with nothing to time keeps its
// goroutine before it goes dormant: a queue that parks between jobs
// coming now and then is woken by a channel send, not a new goroutine
// (measured: dozing at once cost MariaDB's one-job-a-request rate 9 %).
const dozeAfter = 2 * time.Second

// The run loop's life (runner.life).
const (
	lifeRunning int32 = iota
	lifeDormant
)

// turnState is what the run loop carries from one turn to the next, and
// across a dormancy: it is read and written only by the goroutine that
// runs the loop, and a goroutine going dormant writes it before it says
// so (runner.rest).
type turnState struct {
	lastRescue, lastExtend time.Time
	// backoff: the last store call of a turn failed; wait so long.
	backoff time.Duration
	// full: the last grab took all it asked for, so more jobs are likely
	// due: read ahead.
	full bool
	// look: grab this turn; false when a parked runner woke only for its
	// extension (the prober looks for its due jobs).
	look bool
	// park: the runner waited parked; its rescue is then the prober's to
	// start (probe.rescueNow), with the other parked queues' at once.
	park bool
}

// step is what one turn did: whether to turn again at once, how long the
// throttle lets the loop wait at most (0: no bound), the worker slots
// free at its end, and the outcome of its store call, if it made one
// (ran): full, it took all it asked for; err, with what it tried.
type step struct {
	again bool
	wait  time.Duration
	free  int64
	ran   bool
	full  bool
	err   error
	what  string
}

// logger returns the runner's logger, made at its first use: an idle
// queue logs nothing, and keeps no logger.
func (r *runner) logger() *slog.Logger {
	if l := r.log.Load(); l != nil {
		return l
	}
	l := r.d.log.With("queue", r.name)
	if !r.log.CompareAndSwap(nil, l) {
		return r.log.Load()
	}
	return l
}

// storeErr logs a failed store call loudly only when the queue was healthy,
// so an outage logs one warning per queue, not one per attempt.
func (r *runner) storeErr(what string, err error, attrs ...any) {
	attrs = append(attrs, "err", err)
	if r.failing.Swap(true) {
		r.logger().Debug(what+" failed", attrs...)
		return
	}
	r.logger().Warn(what+" failed; retrying until the database answers", attrs...)
}

func (r *runner) storeOK() {
	if r.failing.Swap(false) {
		r.logger().Info("database answers again")
	}
}

func newRunner(d *Dispatcher, q *store.Queue) *runner {
	r := &runner{
		d:     d,
		name:  q.Name,
		wake:  make(chan struct{}, 1),
		stop:  make(chan struct{}),
		slots: slots{freed: make(chan struct{}, 1)},
	}
	r.done.Add(1)
	r.settings.Store(q)
	r.flow.open = d.cfg.BreakerOpen
	r.flow.anyDirty = &d.hostsDirty
	r.turn = turnState{lastExtend: time.Now(), look: true}
	r.probe.heap = [2]int{-1, -1}
	return r
}

// start runs the loop. A cold runner (Dispatcher.sync: many queues led at
// once) starts dormant instead: no grab and no rescue yet, and the prober
// looks at its queue at once (probe.unknown), asking as well for grabs of
// a holder that is gone (probe.expiredAt is 0). A throttled queue polls
// itself, so it starts as any.
func (r *runner) start(cold bool) {
	if !cold || r.settings.Load().MaxDispatchesPerSecond != nil {
		r.life.Store(lifeRunning)
		go r.run()
		return
	}
	now := time.Now()
	r.turn.lastRescue, r.turn.park = now, true
	r.probe.unknown.Store(true)
	r.probe.parked.Store(true)
	r.life.Store(lifeDormant)
	r.parking(now)
}

// nudge wakes the loop: a job may be due now.
func (r *runner) nudge() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
	r.rouse()
}

// rouse gives a dormant runner a goroutine again.
func (r *runner) rouse() {
	if r.life.CompareAndSwap(lifeDormant, lifeRunning) {
		go r.run()
	}
}

// halt stops grabbing and waits until the deliveries in flight are done.
func (r *runner) halt() {
	r.stopOnce.Do(r.closeStop)
	r.done.Wait()
}

func (r *runner) stopped() bool {
	select {
	case <-r.stop:
		return true
	default:
		return false
	}
}

// run is the loop: each turn does the upkeep, serves the queue by its
// delivery (pushTurn, pullTurn), and rests until there is more to do. It
// returns when the runner goes dormant, or, after finish, when it stops.
func (r *runner) run() {
	r.probe.parked.Store(false)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	t := &r.turn
	for !r.stopped() {
		now := time.Now()
		r.upkeep(now)
		q := r.settings.Load()
		// hold: paused, or the node is stale (Dispatcher.fresh).
		hold := q.Paused || !r.d.fresh()
		var s step
		if q.Pull() {
			s = r.pullTurn(q, now, hold)
		} else {
			s = r.pushTurn(q, now, hold)
		}
		if s.ran {
			t.full = s.full
			if s.err != nil {
				t.backoff = min(max(2*t.backoff, 100*time.Millisecond), 5*time.Second)
				r.storeErr(s.what, s.err)
			} else {
				t.backoff = 0
				r.storeOK()
			}
		}
		if s.again {
			continue
		}
		if !r.rest(q, s, timer) {
			return // dormant
		}
	}
	r.finish()
}

// upkeep rescues the queue's expired grabs every RescueInterval (a parked
// runner when the prober says), extends this node's grabs every third of
// the grab lease, and counts the keys' jobs again when a lease ended.
func (r *runner) upkeep(now time.Time) {
	t, cfg := &r.turn, &r.d.cfg
	if r.probe.rescueNow.Swap(false) || !t.park && now.Sub(t.lastRescue) >= cfg.RescueInterval {
		// Extend this node's grabs first: after an outage longer than the
		// grab lease, deliveries of this node whose outcome is still being
		// recorded (by this runner or one it replaced) must not be
		// rescued and delivered a second time. With none, an idle
		// queue's rescue is its only statement.
		t.lastRescue = now
		if r.holding() || r.d.finishing(r.name) {
			t.lastExtend = now
			r.extend()
		}
		r.rescue()
	}
	if r.keys.recount.Swap(false) {
		r.recountKeys()
	}
	if r.holding() && now.Sub(t.lastExtend) >= cfg.GrabLease/3 {
		t.lastExtend = now
		r.extend()
	}
}

// pushTurn is a turn of the loop for a push queue: it starts jobs of the
// read-ahead and of keys with room in free worker slots, then grabs.
func (r *runner) pushTurn(q *store.Queue, now time.Time, hold bool) step {
	if r.pull.ready {
		// No longer a pull queue: its pullers get no job, and its leases
		// hold no push slot.
		r.answerPullers(time.Time{})
		r.dropLeases()
	}
	// Pullers that came before the runner saw the queue become a pull
	// queue wait for it; those that do not wait learn now.
	r.answerPullers(now)
	if (hold || q.MaxDispatchesPerSecond != nil) && r.ahead.len() > 0 {
		// Paused, stale (the jobs may be another node's by now), or
		// throttled since the read-ahead was grabbed: only grabs take
		// tokens from the bucket.
		r.giveBack()
	}
	if hold {
		r.giveBackParked() // as the read-ahead
		return step{free: r.slots.free(q)}
	}
	free := r.slots.free(q)
	if free > 0 && r.ahead.len() > 0 {
		// Deliveries ended and found the read-ahead empty before this
		// grab refilled it: start its jobs in their slots.
		n := int(r.takeSlots(free))
		jobs := r.ahead.take(n)
		r.releaseSlots(int64(n - len(jobs)))
		r.deliver(jobs)
		free -= int64(len(jobs))
	}
	if free > 0 && r.keysReady() {
		// Keys with parked jobs got room with no worker slot in hand
		// (keys.go).
		free -= r.startReady(free)
	}
	if !r.turn.look {
		return step{free: free}
	}
	return r.fill(q, now, free)
}

// fill grabs jobs for the free worker slots, and ahead of them while the
// queue has a backlog (readahead.go), as planGrab sizes it; it starts
// those it has slots for.
func (r *runner) fill(q *store.Queue, now time.Time, free int64) step {
	tb := r.throttle(q, now)
	tokens := -1
	if tb != nil {
		tokens = tb.available(now)
	}
	p := planGrab(int(max(free, 0)), r.ahead.len(), int(q.MaxWorkers), r.d.cfg.BatchSize, r.turn.full, tokens)
	switch {
	case p.throttled:
		// Throttled: wait for the next token (or the poll).
		return step{free: free, wait: tb.untilNext(now)}
	case p.n <= 0:
		// No free slot, and the read-ahead is full enough.
		return step{free: free}
	}
	gen, idle := r.grabStart()
	p = p.sharing(idle)
	took := int(r.takeSlots(int64(p.start)))
	n := p.n - (p.start - took)
	if n <= 0 {
		r.grabbed(false, gen)
		return step{again: true} // hand-offs took the free slots meanwhile
	}
	jobs, err := r.grab(n)
	if tb != nil {
		tb.take(len(jobs))
	}
	got := len(jobs)
	jobs = r.admit(jobs) // parks keyed jobs whose key is full
	if r.settings.Load().Paused {
		// Paused while the grab ran: start none of its jobs, even one
		// enqueued after the pause answered. They wait in the read-ahead,
		// which the next turn, held, gives back to waiting (giveBack).
		r.releaseSlots(int64(took))
		r.ahead.add(jobs, p.ahead/2)
		r.grabbed(false, gen)
		return step{again: true, free: free, ran: true, err: err, what: "grab jobs"}
	}
	started := min(len(jobs), took)
	r.releaseSlots(int64(took - started))
	r.deliver(jobs[:started])
	r.ahead.add(jobs[started:], p.ahead/2)
	r.grabbed(err == nil && got < n, gen)
	full := err == nil && got == n
	return step{again: full, free: free, ran: true, full: full, err: err, what: "grab jobs"}
}

// grabPlan is the size of a push queue's next grab (planGrab).
type grabPlan struct {
	// n is how many jobs to ask for, start how many of them to start at
	// once in free worker slots (the rest go to the read-ahead), ahead
	// the read-ahead's size. n <= 0: no grab.
	n, start, ahead int
	// throttled: slots are free, but the throttle has no token for them.
	throttled bool
}

// planGrab sizes a grab: free worker slots, have jobs in the read-ahead,
// batch the most a grab takes, backlog whether the last grab took all it
// asked for, tokens the throttle's tokens (-1: not throttled). While a
// backlog drains (and no throttle counts tokens), the grab takes jobs
// ahead of the free slots, up to min(maxWorkers, batch), and refills once
// half the read-ahead is gone.
func planGrab(free, have, maxWorkers, batch int, backlog bool, tokens int) grabPlan {
	p := grabPlan{}
	if backlog && tokens < 0 {
		p.ahead = min(maxWorkers, batch)
	}
	p.n = min(free+p.ahead-have, batch)
	if tokens >= 0 {
		p.n = min(p.n, tokens)
	}
	switch {
	case free > 0 && p.n <= 0 && tokens >= 0:
		return grabPlan{throttled: true}
	case p.n <= 0 || have > p.ahead/2:
		return grabPlan{}
	}
	p.start = min(p.n, free)
	return p
}

// sharing is p when hand-off is off; when it is on (idle: no due backlog
// is known, so the grab is a poll or follows a wake-up and will find few
// jobs), the grab takes only half the free slots, leaving the rest to the
// hand-offs that arrive while it runs. Taking them all would send those
// jobs waiting, each waking the runner for another such grab.
func (p grabPlan) sharing(idle bool) grabPlan {
	if idle && p.start > 0 {
		keep := max(1, p.start/2)
		p.n -= p.start - keep
		p.start = keep
	}
	return p
}

// rest waits for what comes next: a wake-up, a free worker slot (when all
// were taken), the poll, or the next extension or rescue. A runner with
// no due backlog known parks: the prober looks for due jobs, for this
// queue and every other idle one with one query. A throttled queue polls
// itself, to keep its token bucket; so does a queue with parked keyed
// jobs: their keys' ends on other nodes are counted at its rescues
// (keys.go). A parked runner with nothing to time that nothing wakes for
// dozeAfter goes dormant: rest reports false, and the goroutine ends.
func (r *runner) rest(q *store.Queue, s step, timer *time.Timer) bool {
	t, cfg := &r.turn, &r.d.cfg
	wait := time.Duration(q.PollingInterval) * time.Millisecond
	if s.wait > 0 {
		wait = min(wait, s.wait)
	}
	t.park = !t.full && t.backoff == 0 && q.MaxDispatchesPerSecond == nil && r.parkedJobs() == 0
	if t.park {
		wait = time.Hour
	} else {
		wait = min(wait, cfg.RescueInterval-time.Since(t.lastRescue))
	}
	if t.backoff > 0 {
		// The database is away: back off instead of polling.
		wait = t.backoff
		t.lastRescue = time.Now()
	}
	if r.holding() {
		wait = min(wait, cfg.GrabLease/3-time.Since(t.lastExtend))
	}
	var freed chan struct{}
	if s.free <= 0 || r.ahead.len() > 0 {
		freed = r.slots.freed
	}
	t.look = true
	// Parked with nothing to time: dormant, unless woken within
	// dozeAfter (a busy queue parks and wakes again and again).
	doze := t.park && freed == nil && wait == time.Hour
	if doze {
		wait = dozeAfter
	}
	timer.Reset(max(wait, time.Millisecond))
	r.probe.parked.Store(t.park)
	if t.park {
		r.parking(time.Now())
	}
	select {
	case <-r.stop:
	case <-r.wake:
	case <-freed:
	case <-timer.C:
		t.look = !t.park
		if doze {
			t.look = true
			return !r.doze()
		}
	}
	r.probe.parked.Store(false)
	if !timer.Stop() {
		select {
		case <-timer.C:
		default:
		}
	}
	return true
}

// doze makes the runner, parked, dormant and reports whether it is, or
// whether its loop goes on: a wake-up or the stop came as it went. A rouse after life
// says dormant starts a new goroutine; one before it left a wake-up, or
// the stop, which doze takes. The turn state is written before life is.
func (r *runner) doze() bool {
	r.life.Store(lifeDormant)
	select {
	case <-r.wake:
	default:
		if !r.stopped() {
			return true
		}
	}
	// Go on, unless a rouse already started another goroutine, which
	// turns as this one would have.
	if !r.life.CompareAndSwap(lifeDormant, lifeRunning) {
		return true
	}
	r.probe.parked.Store(false)
	return false
}

// finish ends the loop for good: it gives back what it holds undelivered,
// answers the pullers, and waits for the deliveries in flight.
func (r *runner) finish() {
	r.giveBack()
	r.giveBackParked()
	r.answerPullers(time.Time{})
	r.drain(r.turn.lastExtend)
	r.done.Done()
}

// drain keeps the grabs of the deliveries still in flight extended until
// they finish.
func (r *runner) drain(lastExtend time.Time) {
	finished := make(chan struct{})
	go func() { r.slots.wg.Wait(); close(finished) }()
	every := r.d.cfg.GrabLease / 3
	t := time.NewTimer(max(every-time.Since(lastExtend), time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-finished:
			return
		case <-t.C:
			r.extend()
			t.Reset(every)
		}
	}
}

// grab grabs up to n due jobs for delivery, leaving out the keys that
// keys.go holds back.
func (r *runner) grab(n int) ([]*store.Job, error) {
	p := &store.JobsGrabParams{Queue: r.name, Node: r.d.cfg.Node, Limit: n, Lease: r.d.cfg.GrabLease}
	if t := r.keys.table.Load(); t != nil {
		p.SkipKeys, p.NoKeys = t.skipped()
	}
	return r.grabWith(p)
}

// grabWith runs the grab p, and counts and traces it.
func (r *runner) grabWith(p *store.JobsGrabParams) ([]*store.Job, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	began := time.Now()
	jobs, err := r.d.cfg.Store.JobsGrab(ctx, p)
	r.d.cfg.Stats.Grabbed(r.name, jobs, time.Now())
	r.d.cfg.Tracer.Grab(r.name, began, jobs, err)
	return jobs, err
}

func (r *runner) rescue() {
	r.expireLeases()
	r.keys.recount.Store(false) // the expired leases are counted here
	r.recountKeys()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := r.d.cfg.Store.JobsRescue(ctx, r.name)
	if err != nil {
		r.storeErr("rescue expired grabs", err)
	} else if n > 0 {
		r.logger().Info("rescued jobs whose holder vanished", "jobs", n)
		r.markBacklog()
		r.nudge()
	}
}

func (r *runner) extend() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := r.d.cfg.Store.JobsExtend(ctx, &store.JobsExtendParams{Queue: r.name, Node: r.d.cfg.Node, Lease: r.d.cfg.GrabLease}); err != nil {
		r.storeErr("extend grabs", err)
	}
}

// deliver delivers grabbed jobs; their worker slots were taken before the
// grab.
func (r *runner) deliver(jobs []*store.Job) {
	for _, j := range jobs {
		r.slots.wg.Go(func() { r.work(j) })
	}
}

// holding reports whether this runner holds grabs to extend: deliveries in
// flight, read-ahead or parked jobs (a pulled job's slot holds a lease,
// which no node extends).
func (r *runner) holding() bool {
	return r.slots.inflight.Load()-r.pull.held.Load() > 0 || r.ahead.len() > 0 || r.parkedJobs() > 0
}

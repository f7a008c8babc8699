package dispatch

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rowq/rowq/internal/store"
)

// runner dispatches one queue while this node leads it.
type runner struct {
	d        *Dispatcher
	name     string
	log      *slog.Logger
	settings atomic.Pointer[store.Queue]

	wake     chan struct{} // a job may be due now
	freed    chan struct{} // a delivery finished
	inflight atomic.Int64
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{} // run has returned: no delivery left
	wg       sync.WaitGroup
	failing  atomic.Bool // the last store call failed: log the next failure quietly
	bucket   *bucket     // max_dispatches_per_second; used by run only
	flow     hostFlow    // worker hosts slowed down or held back (flow.go)
	ho       handoffState
	// parked: the last grab came back short and the runner waits for a
	// wake-up, not for its own poll: the dispatcher's prober looks after
	// all parked queues at once (probe.go), with these times (UnixNano, 0
	// for none): lookAt, when the queue is to be looked at; lookedAt, its
	// last look; dueAt, when its earliest waiting job falls due; expiresAt,
	// when its earliest grab or lease runs out.
	parked                             atomic.Bool
	lookAt, lookedAt, dueAt, expiresAt atomic.Int64
	// unknown: the queue got work due later since its last look (later).
	unknown atomic.Bool
	// cold: start parked, leaving the first look and rescue to the
	// prober (Dispatcher.sync).
	cold bool
	// expiredAt is when the prober's sweep last asked whether the queue
	// holds a grab whose holder is gone (UnixNano; the prober's own).
	expiredAt int64
	// rescueNow: the prober saw an expired grab or lease in this parked
	// queue.
	rescueNow atomic.Bool
	ahead     readAhead
	acking    atomic.Int64 // deliveries waiting for their acknowledgement
	pull      pullState    // a pull queue's pullers and leases (pull.go)
	// keys counts the keyed jobs in delivery and holds the parked ones
	// (keys.go); nil until the runner meets a keyed job. keysMu orders its
	// making.
	keys   atomic.Pointer[keyTable]
	keysMu sync.Mutex
	// keysRecount: a lease ended; count the keys' jobs in delivery again
	// (keysLeaseEnded).
	keysRecount atomic.Bool
}

// storeErr logs a failed store call loudly only when the queue was healthy,
// so an outage logs one warning per queue, not one per attempt.
func (r *runner) storeErr(what string, err error, attrs ...any) {
	attrs = append(attrs, "err", err)
	if r.failing.Swap(true) {
		r.log.Debug(what+" failed", attrs...)
		return
	}
	r.log.Warn(what+" failed; retrying until the database answers", attrs...)
}

func (r *runner) storeOK() {
	if r.failing.Swap(false) {
		r.log.Info("database answers again")
	}
}

func newRunner(d *Dispatcher, q *store.Queue) *runner {
	r := &runner{
		d:     d,
		name:  q.Name,
		log:   d.log.With("queue", q.Name),
		wake:  make(chan struct{}, 1),
		freed: make(chan struct{}, 1),
		stop:  make(chan struct{}),
		done:  make(chan struct{}),
	}
	r.settings.Store(q)
	r.flow.open = d.cfg.BreakerOpen
	r.flow.anyDirty = &d.hostsDirty
	return r
}

func (r *runner) nudge() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// halt stops grabbing and waits until the deliveries in flight are done.
func (r *runner) halt() {
	r.stopOnce.Do(r.closeStop)
	<-r.done
}

func (r *runner) stopped() bool {
	select {
	case <-r.stop:
		return true
	default:
		return false
	}
}

func (r *runner) run() {
	defer close(r.done)
	cfg := &r.d.cfg
	var (
		lastRescue time.Time
		lastExtend = time.Now()
		backoff    time.Duration
		timer      = time.NewTimer(time.Hour)
		// full: the last grab took all it asked for, so more jobs are
		// likely due: read ahead.
		full bool
		// look: grab this round; false when a parked runner woke only for
		// its extension (the prober looks for its due jobs).
		look = true
		// park: the runner waited parked; its rescue is then the prober's
		// to start (rescueNow), with the other parked queues' at once.
		park bool
	)
	if r.cold && r.settings.Load().MaxDispatchesPerSecond == nil {
		// No grab and no rescue yet: park, and the prober looks at once
		// (unknown), asking as well for grabs of a holder that is gone
		// (expiredAt is 0). A throttled queue polls itself, so it starts
		// as any.
		look, park = false, true
		lastRescue = time.Now()
		r.unknown.Store(true)
	}
	defer timer.Stop()
	for !r.stopped() {
		now := time.Now()
		if r.rescueNow.Swap(false) || !park && now.Sub(lastRescue) >= cfg.RescueInterval {
			// Extend this node's grabs first: after an outage longer than the
			// grab lease, deliveries of this node whose outcome is still being
			// recorded (by this runner or one it replaced) must not be
			// rescued and delivered a second time. With none, an idle
			// queue's rescue is its only statement.
			lastRescue = now
			if r.holding() || r.d.finishing(r.name) {
				lastExtend = now
				r.extend()
			}
			r.rescue()
		}
		if r.keysRecount.Swap(false) {
			r.recountKeys()
		}
		if r.holding() && now.Sub(lastExtend) >= cfg.GrabLease/3 {
			lastExtend = now
			r.extend()
		}
		q := r.settings.Load()
		// hold: paused, or the node is stale (Dispatcher.fresh).
		hold := q.Paused || !r.d.fresh()
		var free int64
		wait := time.Duration(q.PollingInterval) * time.Millisecond
		if q.Pull() {
			if r.ahead.len() > 0 {
				r.giveBack() // read ahead while it was a push queue
			}
			r.giveBackParked()
			again, throttled, err := r.pullTurn(q, now, hold)
			switch {
			case err != nil:
				backoff = min(max(2*backoff, 100*time.Millisecond), 5*time.Second)
				r.storeErr("grab jobs for a lease request", err)
			case again:
				backoff = 0
				r.storeOK()
				continue // more may be due, and pullers wait
			default:
				backoff = 0
				r.storeOK()
			}
			if throttled > 0 {
				wait = min(wait, throttled)
			}
			full = false
			// With every slot taken, a slot coming free serves a waiting
			// puller.
			free = int64(q.MaxWorkers) - r.inflight.Load()
		} else {
			if r.pull.ready {
				// No longer a pull queue: its pullers get no job, and its
				// leases hold no push slot.
				r.answerPullers(time.Time{})
				r.dropLeases()
			}
			// Pullers that came before the runner saw the queue become a
			// pull queue wait for it; those that do not wait learn now.
			r.answerPullers(now)
			if (hold || q.MaxDispatchesPerSecond != nil) && r.ahead.len() > 0 {
				// Paused, stale (the jobs may be another node's by now), or
				// throttled since the read-ahead was grabbed: only grabs take
				// tokens from the bucket.
				r.giveBack()
			}
			if hold {
				r.giveBackParked() // as the read-ahead
			}
			free = int64(q.MaxWorkers) - r.inflight.Load()
			if free > 0 && !hold && r.ahead.len() > 0 {
				// Deliveries ended and found the read-ahead empty before this
				// grab refilled it: start its jobs in their slots.
				n := int(r.takeSlots(free))
				jobs := r.ahead.take(n)
				r.releaseSlots(int64(n - len(jobs)))
				r.start(jobs)
				free -= int64(len(jobs))
			}
			if free > 0 && !hold && r.keysReady() {
				// Keys with parked jobs got room with no worker slot in hand
				// (keys.go).
				free -= r.startReady(free)
			}
			if !hold && look {
				tb := r.throttle(q, now)
				// While draining a backlog, grab ahead of the free slots
				// (readahead.go); refill once half the read-ahead is gone.
				ahead, have := 0, r.ahead.len()
				if full && tb == nil {
					ahead = min(int(q.MaxWorkers), cfg.BatchSize)
				}
				slots := int(max(free, 0))
				n := min(slots+ahead-have, cfg.BatchSize)
				if tb != nil {
					n = min(n, tb.available(now))
				}
				switch {
				case slots > 0 && n <= 0 && tb != nil:
					// Throttled: wait for the next token (or the poll).
					wait = min(wait, tb.untilNext(now))
				case n <= 0 || have > ahead/2:
					// No free slot, and the read-ahead is full enough.
				default:
					gen, idle := r.grabStart()
					mine := min(n, slots) // the jobs to start now, in free slots
					if idle && mine > 0 {
						// No due backlog is known, so this grab is a poll or
						// follows a wake-up and will find few jobs: leave half
						// the free slots to the hand-offs that arrive while it
						// runs. Taking them all would send those jobs waiting,
						// each waking the runner for another such grab.
						n -= mine - max(1, mine/2)
						mine = max(1, mine/2)
					}
					took := int(r.takeSlots(int64(mine)))
					n -= mine - took
					if n <= 0 {
						r.grabbed(false, gen)
						continue // hand-offs took the free slots meanwhile
					}
					jobs, err := r.grab(n)
					if tb != nil {
						tb.take(len(jobs))
					}
					got := len(jobs)
					jobs = r.admit(jobs) // parks keyed jobs whose key is full
					started := min(len(jobs), took)
					r.releaseSlots(int64(took - started))
					r.start(jobs[:started])
					r.ahead.add(jobs[started:], ahead/2)
					r.grabbed(err == nil && got < n, gen)
					full = err == nil && got == n
					switch {
					case err != nil:
						backoff = min(max(2*backoff, 100*time.Millisecond), 5*time.Second)
						r.storeErr("grab jobs", err)
					case got == n:
						backoff = 0
						r.storeOK()
						continue // more may be due
					default:
						backoff = 0
						r.storeOK()
					}
				}
			}
		}
		// Parked: no due backlog is known, so the prober looks for due
		// jobs, for this queue and every other idle one with one query.
		// A throttled queue polls itself, to keep its token bucket.
		// So does a queue with parked keyed jobs: their keys' ends on other
		// nodes are counted at its rescues (keys.go).
		park = !full && backoff == 0 && q.MaxDispatchesPerSecond == nil && r.parkedJobs() == 0
		if park {
			wait = time.Hour
		} else {
			wait = min(wait, cfg.RescueInterval-time.Since(lastRescue))
		}
		if backoff > 0 {
			// The database is away: back off instead of polling.
			wait = backoff
			lastRescue = time.Now()
		}
		// Wake for a new job, a free worker slot (when all were busy), the
		// poll, or the next extension or rescue.
		if r.holding() {
			wait = min(wait, cfg.GrabLease/3-time.Since(lastExtend))
		}
		var freed chan struct{}
		if free <= 0 || r.ahead.len() > 0 {
			freed = r.freed
		}
		timer.Reset(max(wait, time.Millisecond))
		r.parked.Store(park)
		if park {
			r.parking(time.Now())
		}
		look = true
		select {
		case <-r.stop:
		case <-r.wake:
		case <-freed:
		case <-timer.C:
			look = !park
		}
		r.parked.Store(false)
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
	r.giveBack()
	r.giveBackParked()
	r.answerPullers(time.Time{})
	r.drain(lastExtend)
}

// drain keeps the grabs of the deliveries still in flight extended until
// they finish.
func (r *runner) drain(lastExtend time.Time) {
	finished := make(chan struct{})
	go func() { r.wg.Wait(); close(finished) }()
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
	if t := r.keys.Load(); t != nil {
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
	r.keysRecount.Store(false) // the expired leases are counted here
	r.recountKeys()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := r.d.cfg.Store.JobsRescue(ctx, r.name)
	if err != nil {
		r.storeErr("rescue expired grabs", err)
	} else if n > 0 {
		r.log.Info("rescued jobs whose holder vanished", "jobs", n)
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

// start delivers grabbed jobs; their worker slots were taken before the
// grab.
func (r *runner) start(jobs []*store.Job) {
	for _, j := range jobs {
		r.wg.Go(func() { r.work(j) })
	}
}

// holding reports whether this runner holds grabs to extend: deliveries in
// flight, read-ahead or parked jobs (a pulled job's slot holds a lease,
// which no node extends).
func (r *runner) holding() bool {
	return r.inflight.Load()-r.pull.held.Load() > 0 || r.ahead.len() > 0 || r.parkedJobs() > 0
}

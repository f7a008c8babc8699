package dispatch

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rowq/rowq/internal/store"
)

// Pull queues (store.DeliveryPull): workers ask for jobs (Pull, POST
// /queue/{name}/lease) instead of being sent them. The queue's leader
// serves them: its runner grabs as for push, so worker slots, the
// throttle, priorities, order and pauses apply as they do there, but it
// grabs only for a waiting lease request (a puller), as many jobs as the
// puller asks for and slots allow, in one statement that leaves them
// leased to the puller (store.JobsGrabParams.Leased), and hands them over
// instead of POSTing them. With no puller waiting it grabs nothing.
//
// Unlike an accepted push delivery, whose job gives its worker slot back,
// a pulled job keeps its slot until its lease ends: completed or failed
// (Complete), cancelled (JobCancelled) or run out (expireLeases). So
// max_workers bounds the queue's leased and unfinished jobs. The leader
// counts them in memory (runner.leases) and learns of the ends that
// happen on other nodes through a nudge (Nudger.Finished); since only the
// leader grabs, its count can only be too high, never too low, and it
// re-reads the queue's leases (store.JobsLeased) when it starts leading the
// queue and, while pullers wait for a slot, at most once a second, which
// mends a nudge that was lost.
//
// A puller waits for jobs: the runner is woken by an enqueue through any
// node (Wake, or a nudge from the node that took the job), by the prober
// (a deferred or retried job fell due), or by a slot coming free; no
// puller polls. A puller whose request went away before it got its jobs
// gives them back to waiting (unpull); one that goes away after, while
// its answer is written, leaves them leased: they come back when their
// lease runs out, as a failure.

// Bounds and defaults of a lease request.
const (
	// MaxPull bounds the jobs of one lease request.
	MaxPull = 100
	// MaxPullWait bounds how long a lease request waits for jobs.
	MaxPullWait = 30 * time.Second
	// DefaultPullLease is the lease of a request that names none.
	DefaultPullLease = time.Minute
)

// pullGrace bounds how long a lease request that does not wait (wait 0)
// waits for the runner's answer, which comes at its next look: a runner
// held up by the database must not hold the request for long.
const pullGrace = 5 * time.Second

// leaseRecount spaces the re-reads of a pull queue's leases while pullers
// wait for a free slot.
const leaseRecount = time.Second

// ErrNotLeader is Pull's answer on a node that does not lead the queue:
// the request is for the queue's leader.
var ErrNotLeader = errors.New("this node does not lead the queue")

// PullRequest is a worker's request for jobs of a pull queue.
type PullRequest struct {
	Queue string
	Max   int           // 1..MaxPull
	Wait  time.Duration // 0..MaxPullWait: how long to wait for a first job
	Lease time.Duration // 1s..MaxLease
}

// Pulled is a job leased to a puller, with the token that holds it.
type Pulled struct {
	Job   *store.Job // leased until Job.GrabbedTil
	Token string
}

// puller is a lease request waiting on a runner.
type puller struct {
	max      int
	lease    time.Duration
	deadline time.Time
	// out takes the runner's one answer (nil: no job); it is sent only
	// for a puller the runner took off the waiting list.
	out chan []*store.Job
	// gone: the request stopped waiting (its wait ended, or it went
	// away), so a runner that took it answers it rather than putting it
	// back. Guarded by pullState.mu.
	gone bool
}

// leaseSlot is a pulled job holding a worker slot (runner.leases): the
// grab its lease names, and when it was counted (runner.leaseSeq).
type leaseSlot struct {
	grabs int
	seq   uint64
}

// pullState is a runner's pull side.
type pullState struct {
	mu      sync.Mutex
	waiting []*puller // oldest first
	// leases holds the jobs leased to pullers that hold a worker slot, by
	// job id; seq numbers the entries, so that a re-read keeps those
	// counted after it began.
	leases map[int64]leaseSlot
	seq    uint64
	// held is len(leases), read without the lock (runner.holding).
	held atomic.Int64

	// Used by the run loop only: ready means the leases were read since
	// the queue became a pull queue here; counted is when they were last.
	ready   bool
	counted time.Time
}

// Pull leases up to p.Max due jobs of p.Queue to the caller, waiting up to
// p.Wait for a first one, and returns them with their lease tokens; none
// when the wait ends first. It returns ErrNotLeader when this node does
// not lead the queue, and ctx's error when ctx ends first (the caller went
// away): jobs grabbed for it meanwhile go back to waiting.
func (d *Dispatcher) Pull(ctx context.Context, p *PullRequest) ([]Pulled, error) {
	select {
	case <-d.pullsEnded:
		return nil, nil // the node is stopping
	default:
	}
	r := d.runner(p.Queue)
	if r == nil {
		return nil, ErrNotLeader
	}
	pl := &puller{max: p.Max, lease: p.Lease, deadline: time.Now().Add(p.Wait), out: make(chan []*store.Job, 1)}
	if !r.addPuller(pl) {
		return nil, nil // the runner is stopping
	}
	r.nudge()
	wait := p.Wait
	if wait == 0 {
		wait = pullGrace // the runner answers at its next look
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	var (
		jobs     []*store.Job
		answered bool
	)
	select {
	case jobs = <-pl.out:
		answered = true
	case <-t.C:
	case <-ctx.Done():
	case <-r.stop:
	case <-d.pullsEnded:
	}
	if !answered && !r.removePuller(pl) {
		jobs = <-pl.out // the runner is serving it: its answer comes next
	}
	if err := ctx.Err(); err != nil {
		r.unpull(jobs)
		return nil, err
	}
	out := make([]Pulled, len(jobs))
	for i, j := range jobs {
		out[i] = Pulled{Job: j, Token: d.leaseToken(j.ID, j.Grabs)}
	}
	return out, nil
}

// EndPulls answers the lease requests that wait with what they have (no
// job), and every later one at once: the node is stopping, and its HTTP
// server waits for the requests in flight, which would otherwise wait out
// their long polls. The workers ask another node. It is idempotent.
func (d *Dispatcher) EndPulls() {
	d.endPullsOnce.Do(func() { close(d.pullsEnded) })
}

// addPuller puts pl on the waiting list, unless the runner is stopping.
func (r *runner) addPuller(pl *puller) bool {
	r.pull.mu.Lock()
	defer r.pull.mu.Unlock()
	if r.stopped() {
		return false
	}
	r.pull.waiting = append(r.pull.waiting, pl)
	return true
}

// removePuller takes pl off the waiting list and reports whether it was
// there; false means the runner took it and answers it (even if it finds
// no job: pl is gone).
func (r *runner) removePuller(pl *puller) bool {
	r.pull.mu.Lock()
	defer r.pull.mu.Unlock()
	pl.gone = true
	for i, w := range r.pull.waiting {
		if w == pl {
			r.pull.waiting = append(r.pull.waiting[:i], r.pull.waiting[i+1:]...)
			return true
		}
	}
	return false
}

// popPuller takes the oldest waiting puller, or returns nil.
func (r *runner) popPuller() *puller {
	r.pull.mu.Lock()
	defer r.pull.mu.Unlock()
	if len(r.pull.waiting) == 0 {
		return nil
	}
	pl := r.pull.waiting[0]
	r.pull.waiting = r.pull.waiting[1:]
	return pl
}

// requeue puts a puller the runner took, and got no job for, back at the
// front of the list, or answers it with no job when it stopped waiting
// meanwhile.
func (r *runner) requeue(pl *puller) {
	r.pull.mu.Lock()
	defer r.pull.mu.Unlock()
	if pl.gone {
		pl.out <- nil
		return
	}
	r.pull.waiting = append([]*puller{pl}, r.pull.waiting...)
}

// pullers returns how many pullers wait.
func (r *runner) pullers() int {
	r.pull.mu.Lock()
	defer r.pull.mu.Unlock()
	return len(r.pull.waiting)
}

// answerPullers answers the waiting pullers with no job: those whose wait
// has ended by now, or all when now is zero (the runner stops, or the
// queue is no longer a pull queue).
func (r *runner) answerPullers(now time.Time) {
	r.pull.mu.Lock()
	defer r.pull.mu.Unlock()
	keep := r.pull.waiting[:0]
	for _, pl := range r.pull.waiting {
		if now.IsZero() || !now.Before(pl.deadline) {
			pl.out <- nil
			continue
		}
		keep = append(keep, pl)
	}
	clear(r.pull.waiting[len(keep):])
	r.pull.waiting = keep
}

// pullTurn is a turn of the run loop for a pull queue: it serves the
// oldest waiting puller if a worker slot is free (and a token, when
// throttled), with one grab. Its step turns again at once when the grab
// filled its puller's ask and another waits; with every slot taken, a
// slot coming free serves a waiting puller.
func (r *runner) pullTurn(q *store.Queue, now time.Time, hold bool) step {
	if r.ahead.len() > 0 {
		r.giveBack() // read ahead while it was a push queue
	}
	r.giveBackParked()
	again, wait, err := r.servePuller(q, now, hold)
	return step{again: again, wait: wait, free: r.slots.free(q), ran: true, err: err, what: "grab jobs for a lease request"}
}

// servePuller serves the oldest waiting puller (pullTurn). It reports
// whether to look again at once, how long the throttle wants the loop to
// wait (0: no throttle wait), and the grab's error.
func (r *runner) servePuller(q *store.Queue, now time.Time, hold bool) (again bool, wait time.Duration, err error) {
	if !r.pull.ready {
		if err := r.countLeases(); err != nil {
			r.answerPullers(now)
			return false, 0, err
		}
		r.pull.ready = true
	}
	if r.pullers() == 0 {
		return false, 0, nil
	}
	free := r.slots.free(q)
	if free <= 0 && !hold && time.Since(r.pull.counted) >= leaseRecount {
		// Ends of leases on other nodes come by nudges: mend a lost one.
		if err := r.countLeases(); err != nil {
			r.storeErr("count leased jobs", err)
		}
		free = r.slots.free(q)
	}
	n := int(max(free, 0))
	tb := r.throttle(q, now)
	if tb != nil {
		n = min(n, tb.available(now))
	}
	if hold || n <= 0 {
		// Paused, stale, no free slot or no token: a puller that does not
		// wait learns it now.
		r.answerPullers(now)
		if !hold && free > 0 && tb != nil {
			wait = tb.untilNext(now)
		}
		return false, wait, nil
	}
	pl := r.popPuller()
	if pl == nil {
		return false, 0, nil
	}
	took := int(r.takeSlots(int64(min(n, pl.max, r.d.cfg.BatchSize))))
	if took == 0 {
		r.requeue(pl) // a completion's release raced the read of free
		return false, 0, nil
	}
	jobs, err := r.grabLeased(took, pl.lease)
	if tb != nil {
		tb.take(len(jobs))
	}
	r.releaseSlots(int64(took - len(jobs)))
	r.holdLeases(jobs)
	if len(jobs) == 0 && time.Now().Before(pl.deadline) {
		r.requeue(pl) // it waits for the next job
	} else {
		pl.out <- jobs
	}
	if err == nil && len(jobs) < took {
		// No more due jobs: those that do not wait learn it now.
		r.answerPullers(time.Now())
	}
	return err == nil && len(jobs) == took && r.pullers() > 0, 0, err
}

// grabLeased grabs up to n due jobs leased for lease.
func (r *runner) grabLeased(n int, lease time.Duration) ([]*store.Job, error) {
	return r.grabWith(&store.JobsGrabParams{Queue: r.name, Node: r.d.cfg.Node, Limit: n, Lease: lease, Leased: true})
}

// holdLeases counts pulled jobs as holding their worker slots, which the
// grab took.
func (r *runner) holdLeases(jobs []*store.Job) {
	if len(jobs) == 0 {
		return
	}
	r.later() // their leases run out some day: the prober learns when
	r.pull.mu.Lock()
	defer r.pull.mu.Unlock()
	if r.pull.leases == nil {
		r.pull.leases = map[int64]leaseSlot{}
	}
	for _, j := range jobs {
		r.pull.seq++
		r.pull.leases[j.ID] = leaseSlot{grabs: j.Grabs, seq: r.pull.seq}
	}
	r.pull.held.Add(int64(len(jobs)))
}

// leaseEnded gives back the worker slot of a pulled job whose lease ended
// (completed, cancelled, expired or given back), if it holds one.
func (r *runner) leaseEnded(g store.JobGrab) {
	r.keysLeaseEnded()
	r.pull.mu.Lock()
	e, ok := r.pull.leases[g.ID]
	ok = ok && e.grabs == g.Grabs
	if ok {
		delete(r.pull.leases, g.ID)
	}
	r.pull.mu.Unlock()
	if ok {
		r.pull.held.Add(-1)
		r.releaseSlots(1)
	}
}

// countLeases re-reads the queue's leased jobs: each holds a worker slot.
// Entries counted before the read that it no longer finds have ended on
// another node (and their nudge was lost); leases it finds that no entry
// holds were made by another leader, or by a push worker's acceptance
// before the queue became a pull queue.
func (r *runner) countLeases() error {
	r.pull.mu.Lock()
	seq := r.pull.seq
	r.pull.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got, err := r.d.cfg.Store.JobsLeased(ctx, r.name)
	if err != nil {
		return err
	}
	r.pull.counted = time.Now()
	found := make(map[int64]int, len(got))
	for _, g := range got {
		found[g.ID] = g.Grabs
	}
	var delta int64
	r.pull.mu.Lock()
	if r.pull.leases == nil {
		r.pull.leases = map[int64]leaseSlot{}
	}
	for id, e := range r.pull.leases {
		if grabs, ok := found[id]; e.seq <= seq && (!ok || grabs != e.grabs) {
			delete(r.pull.leases, id)
			delta--
		}
	}
	for id, grabs := range found {
		if _, ok := r.pull.leases[id]; !ok {
			r.pull.seq++
			r.pull.leases[id] = leaseSlot{grabs: grabs, seq: r.pull.seq}
			delta++
		}
	}
	r.pull.mu.Unlock()
	r.pull.held.Add(delta)
	if delta > 0 {
		r.slots.inflight.Add(delta) // leases made elsewhere hold slots, over max_workers or not
	} else {
		r.releaseSlots(-delta)
	}
	return nil
}

// dropLeases forgets the pulled jobs' slots: the queue is no longer a
// pull queue here (its leases run on; they hold no push slot).
func (r *runner) dropLeases() {
	r.pull.mu.Lock()
	n := int64(len(r.pull.leases))
	r.pull.leases = nil
	r.pull.mu.Unlock()
	r.pull.held.Add(-n)
	r.releaseSlots(n)
	r.pull.ready = false
}

// unpull gives jobs grabbed for a puller that went away back to waiting.
// If that fails they stay leased, and come back when their lease runs
// out, as a failure.
func (r *runner) unpull(jobs []*store.Job) {
	if len(jobs) == 0 {
		return
	}
	if err := r.release(jobs, true); err != nil {
		r.logger().Warn("give back jobs of a lease request that went away failed; they come back when their lease runs out", "jobs", len(jobs), "err", err)
		return
	}
	r.logger().Debug("gave back jobs of a lease request that went away", "jobs", len(jobs))
	for _, j := range jobs {
		r.leaseEnded(store.JobGrab{ID: j.ID, Grabs: j.Grabs})
	}
	r.markBacklog()
	r.nudge()
}

// leaseEnded tells the leader of queue that the lease of grab g ended
// (completed, failed or cancelled through this node): its worker slot, if
// it holds one, comes free. A leader on another node is nudged.
func (d *Dispatcher) leaseEnded(queue string, g store.JobGrab) {
	r := d.runner(queue)
	switch {
	case r != nil:
		r.leaseEnded(g)
	case d.cfg.Nudger != nil:
		d.cfg.Nudger.Finished(queue, g)
	}
}

// LeasesEnded handles a nudge from another node (POST /queue/{name}/wake
// with "finished"): the leases of grabs gs of queue ended there.
func (d *Dispatcher) LeasesEnded(queue string, gs []store.JobGrab) {
	r := d.runner(queue)
	if r == nil {
		return
	}
	for _, g := range gs {
		r.leaseEnded(g)
	}
}

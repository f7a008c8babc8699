// Package dispatch delivers jobs to workers. A Dispatcher keeps its node
// registered, claims the queues that have no live leader, and runs one
// runner per queue it leads: the runner grabs due jobs in batches (at most
// max_workers in flight), POSTs each to its worker, and acknowledges,
// retries or fails it by the worker's answer. It also extends its grabs
// while deliveries run and rescues grabs whose holder vanished. A runner
// with nothing to do parks, and one prober per node looks for work in all
// parked queues at once (probe.go).
//
// The Dispatcher is the node's one door to dispatching: the enqueue path,
// the schedule loop and the API call Wake, Nudged, Changed and SetPaused
// (control.go) and Reserve (handoff.go); it reaches the leaders of queues
// on other nodes through a Nudger (internal/notify).
//
// Files: dispatch.go the Dispatcher and its leadership cycle; runner.go a
// queue's grab loop; slots.go worker slots; readahead.go jobs grabbed
// ahead of free slots; deliver.go a slot's deliveries and their outcome;
// protocol.go the HTTP request to a worker and its answer; flow.go flow
// control per worker host (429/503 and Retry-After, circuit breaker); keys.go
// per-key concurrency and ordering; lease.go accepted jobs: lease tokens,
// heartbeats, completions, expiry; backoff.go retry delays; throttle.go
// max_dispatches_per_second; probe.go the prober of parked queues.
//
// Exclusion does not rest on leadership alone: a job is grabbed by one
// atomic statement and every acknowledgement is guarded by the holder's
// node id, so even two runners of one queue cannot deliver a job twice
// unless a grab expires while its delivery still runs, which extension
// prevents while the holder is healthy.
package dispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rowq/rowq/internal/batch"
	"github.com/rowq/rowq/internal/egress"
	"github.com/rowq/rowq/internal/signing"
	"github.com/rowq/rowq/internal/stats"
	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/tracing"
)

// ackGap spaces the acknowledgements' DELETEs: under load each one then
// removes the jobs of ackGap's worth of deliveries, a fraction of the
// commits, which are most of the database's cost per job. No client waits
// for an acknowledgement, but its job's worker slot stays taken until it
// commits (so that a crash redelivers at most max_workers jobs): a runner
// whose slots mostly wait for acknowledgements flushes them (runner.ack).
const ackGap = 6 * time.Millisecond

// Config configures a Dispatcher. Zero durations and sizes take the
// defaults noted.
type Config struct {
	Store  store.Store
	Logger *slog.Logger
	// Node is this process's node id; Host the address it is reached at.
	Node, Host string
	// Client delivers jobs; per-job timeouts come from the job. Its
	// dialer should be guarded by WorkerURLs (egress.Policy.Guard), and
	// it should follow no redirect.
	Client    *http.Client
	UserAgent string
	// WorkerURLs is checked before each delivery (nil: any http(s) URL
	// but link-local and metadata addresses); a URL it refuses, or an
	// *egress.Error from the dialer, fails the job for good.
	WorkerURLs *egress.Policy
	// Signer signs deliveries (Standard Webhooks); nil signs none.
	Signer *signing.Signer
	// LeaseKey signs the lease tokens of deliveries (lease.go); every node
	// of a database must have the same. Empty: a random key, whose tokens
	// only this node verifies.
	LeaseKey []byte
	// RefreshInterval is how often the node heartbeats, claims queues and
	// reloads queue settings (1s).
	RefreshInterval time.Duration
	// NodeTTL is how long a registration lasts without a heartbeat: the
	// time within which another node takes over a dead node's queues (10s).
	NodeTTL time.Duration
	// GrabLease is how long a grab lasts unless extended; grabs are
	// extended every GrabLease/3 while their deliveries run (30s).
	GrabLease time.Duration
	// RescueInterval is how often a runner frees expired grabs of its
	// queue (5s).
	RescueInterval time.Duration
	// BreakerOpen is how long a worker host's circuit breaker first stays
	// open (30s; flow.go).
	BreakerOpen time.Duration
	// BatchSize bounds the jobs taken by one grab (100).
	BatchSize int
	// Stats counts grabs, deliveries and busy workers; nil counts nothing.
	Stats *stats.Recorder
	// Handoff lets Reserve hand jobs enqueued on this node straight to
	// its runners (see handoff.go).
	Handoff bool
	// Nudger wakes the leaders of queues on other nodes; nil wakes only
	// this node's runners.
	Nudger Nudger
	// Tracer records spans of grabs and deliveries; nil records none.
	// Either way a delivery carries its job's trace context.
	Tracer *tracing.Tracer
}

func (c *Config) setDefaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.RefreshInterval, time.Second)
	def(&c.NodeTTL, 10*time.Second)
	def(&c.GrabLease, 30*time.Second)
	def(&c.RescueInterval, 5*time.Second)
	def(&c.BreakerOpen, defaultBreakerOpen)
	if c.BatchSize <= 0 {
		c.BatchSize = 100
	}
	if c.Client == nil {
		c.Client = http.DefaultClient
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if len(c.LeaseKey) == 0 {
		c.LeaseKey = newLeaseKey()
	}
}

// Dispatcher runs the queues this node leads.
type Dispatcher struct {
	cfg Config
	log *slog.Logger

	// deliverCtx bounds deliveries and their acknowledgements; it ends at
	// the hard stop.
	deliverCtx context.Context
	hardStop   context.CancelFunc
	complete   *batch.Batcher[*store.Job, struct{}]
	// heads groups the head checks of single ordered keys (keys.go) that
	// come at once, from the ends of many keys' deliveries, into one
	// statement per queue.
	heads *batch.Batcher[keyAsk, int64]
	// hostsDirty is set when a runner's worker hosts changed since the
	// last saveHosts (flow.go).
	hostsDirty atomic.Bool
	// holds puts back the jobs held back for their worker host (flow.go).
	holds *batch.Batcher[store.JobDelay, struct{}]
	// succeed records the successes workers report (Complete) many at a
	// time: the queue of each job, "" for a grab that held none.
	succeed *batch.Batcher[store.JobGrab, string]

	// deliveries holds the deliveries running on this node, by job id
	// (*delivery), so that a cancelled job's request can be aborted.
	deliveries sync.Map
	// macs pools the HMACs of lease tokens (lease.go).
	macs sync.Pool

	mu      sync.Mutex
	runners map[string]*runner
	retired sync.WaitGroup // runners stopped but still finishing deliveries
	acks    sync.WaitGroup // acknowledgements in the background (runner.ackLater)
	// retiring counts, per queue, the stopped runners still finishing
	// deliveries.
	retiring map[string]int
	// pauses counts the pauses and resumes applied on this node
	// (SetPaused); marks holds the latest of each queue until a leadership
	// cycle whose read began after it (see sync).
	pauses uint64
	marks  map[string]pauseMark

	startOnce, stopOnce sync.Once
	stop                chan struct{}
	refresh             chan struct{} // run a leadership cycle now
	loopDone            chan struct{}
	probeDone           chan struct{}
	probeKick           chan struct{} // a runner parked or has work due later
	healthy             bool
	lastBeat            atomic.Int64 // UnixNano of the last heartbeat that succeeded
	// session is the node's database session (session.go), open since
	// sessionSince; noSession: opening one failed, and that was logged.
	// They belong to the leadership cycle.
	session      store.NodeSession
	sessionSince time.Time
	noSession    bool

	cluster atomic.Pointer[store.Cluster] // the live nodes as the last cycle read them
	// The leadership cycle's memory (cycle): the last count of queues per
	// node and the cycles since; the queues led as last read, d.pauses
	// when that read began, and the cycles since; whether the last cycle
	// claimed or yielded queues.
	counted               *store.Cluster
	sinceCount, sinceRead int
	led                   []*store.Queue
	ledPauses             uint64
	moving                bool

	// pullsEnded is closed by EndPulls: lease requests wait no more.
	pullsEnded   chan struct{}
	endPullsOnce sync.Once
}

// LiveNodes returns the live nodes, with the queues each leads, as this
// node's last leadership cycle read them (at most a refresh interval ago),
// or nil before the first: for the services that elect one node among the
// live ones (the outbox's mover), at no cost to the database.
func (d *Dispatcher) LiveNodes() *store.Cluster { return d.cluster.Load() }

// New returns a Dispatcher; Start runs it.
func New(cfg Config) *Dispatcher {
	cfg.setDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	d := &Dispatcher{
		cfg:        cfg,
		log:        cfg.Logger,
		deliverCtx: ctx,
		hardStop:   cancel,
		runners:    map[string]*runner{},
		retiring:   map[string]int{},
		marks:      map[string]pauseMark{},
		stop:       make(chan struct{}),
		pullsEnded: make(chan struct{}),
		refresh:    make(chan struct{}, 1),
		loopDone:   make(chan struct{}),
		probeDone:  make(chan struct{}),
		probeKick:  make(chan struct{}, 1),
		healthy:    true,
	}
	d.complete = batch.New(func(ctx context.Context, jobs []*store.Job) ([]struct{}, error) {
		p := &store.JobsCompleteParams{Node: cfg.Node, IDs: make([]int64, len(jobs))}
		for i, j := range jobs {
			p.IDs[i] = j.ID
			if j.Ordered {
				p.Ordered = append(p.Ordered, j.ID)
			}
		}
		_, err := cfg.Store.JobsComplete(ctx, p)
		return make([]struct{}, len(jobs)), err
	}, 500, ackGap)
	d.heads = batch.New(func(ctx context.Context, asks []keyAsk) ([]int64, error) {
		return headsOf(ctx, cfg.Store, asks)
	}, headsMax, 0)
	d.holds = batch.New(func(ctx context.Context, jobs []store.JobDelay) ([]struct{}, error) {
		_, err := cfg.Store.JobsDefer(ctx, &store.JobsDeferParams{Node: cfg.Node, Jobs: jobs})
		return make([]struct{}, len(jobs)), err
	}, 500, 0)
	d.succeed = batch.New(func(ctx context.Context, gs []store.JobGrab) ([]string, error) {
		return cfg.Store.JobsSucceed(ctx, &store.JobsSucceedParams{Grabs: gs, Status: StatusSuccess})
	}, 500, 0)
	return d
}

// Start registers the node and starts the leadership loop. A first
// heartbeat that fails is logged, not returned: the loop keeps trying
// until the database answers.
func (d *Dispatcher) Start(ctx context.Context) error {
	d.startOnce.Do(func() {
		if err := d.cycle(ctx, true); err != nil {
			d.log.Warn("first heartbeat failed; the dispatcher keeps trying", "err", err)
		}
		go d.loop()
		go d.probe()
	})
	return nil
}

func (d *Dispatcher) loop() {
	defer close(d.loopDone)
	t := time.NewTicker(d.cfg.RefreshInterval)
	defer t.Stop()
	var lastPurge time.Time
	for {
		full := false
		select {
		case <-d.stop:
			return
		case <-t.C:
		case <-d.refresh:
			full = true
		}
		ctx, cancel := context.WithTimeout(context.Background(), d.cfg.NodeTTL)
		d.cycle(ctx, full)
		cancel()
		d.saveHosts()
		if time.Since(lastPurge) >= time.Minute {
			lastPurge = time.Now()
			d.purgeResults()
		}
	}
}

// countEvery and readEvery bound how many leadership cycles in a row reuse
// the last count of queues per node (store.NodesLive) and the last read of
// the queues this node leads (store.QueuesLed) while nothing says they
// changed: both read every queue, so that a cycle of a node leading
// 10,000 idle queues would read 20,000 rows a second doing nothing. What
// the reuse can miss (a queue deleted, a settings change through another
// node whose nudge was lost) is rare, and applies within that many cycles.
const (
	countEvery = 30
	readEvery  = 30
)

// coldAbove is how many queues a leadership cycle may start leading before
// their runners start cold (sync).
const coldAbove = 100

// cycle holds the node's database session, heartbeats, reaps the nodes
// whose session ended (session.go), claims free queues up to its share or
// yields queues beyond it (spread.go), and starts or stops runners to match
// the queues this node leads.
//
// What it reads each time costs the same however many queues there are: a
// glance at the live nodes and whether any queue is free
// (store.NodesGlance). It counts the queues per node only when the glance
// shows a change (a node came or went, a queue is free), while queues
// move, when full (a queue was created or changed through this node, or
// another node said so) or every countEvery cycles; and it reads the
// queues it leads only after a claim, when full, after an outage or a new
// database session, or every readEvery cycles. Between reads this node
// cannot lose a queue (claims take only queues of nodes that are not
// live), so what the reuse can miss is a settings change made through
// another node whose nudge was lost: it applies at the next read.
func (d *Dispatcher) cycle(ctx context.Context, full bool) error {
	d.mu.Lock()
	pauses := d.pauses
	d.mu.Unlock()
	// stale: a heartbeat succeeded once, but not within the TTL; the
	// runners hold back until this cycle's heartbeat.
	stale := d.lastBeat.Load() != 0 && !d.fresh()
	since := d.sessionSince
	session := d.holdSession(ctx)
	full = full || stale || !d.healthy || d.sessionSince != since
	err := d.cfg.Store.NodeHeartbeat(ctx, &store.NodeHeartbeatParams{ID: d.cfg.Node, Host: d.cfg.Host, TTL: d.cfg.NodeTTL, Session: session})
	if err == nil {
		d.lastBeat.Store(time.Now().UnixNano())
		err = d.reap(ctx)
	}
	var claim, yield int
	if err == nil {
		var c *store.Cluster
		if c, err = d.clusterNow(ctx, full); err == nil {
			d.cluster.Store(c)
			claim, yield = share(c, d.cfg.Node)
			d.moving = claim > 0 || yield > 0
		}
	}
	if err == nil && claim > 0 {
		err = d.cfg.Store.QueuesClaim(ctx, &store.QueuesClaimParams{Node: d.cfg.Node, Limit: claim})
		full = true // read what it got
	}
	var led []*store.Queue
	reused := false // led is the read an earlier cycle applied
	if err == nil {
		if full || d.led == nil || d.sinceRead >= readEvery {
			if led, err = d.cfg.Store.QueuesLed(ctx, d.cfg.Node); err == nil {
				d.led, d.ledPauses, d.sinceRead = led, pauses, 0
			}
		} else {
			led, pauses, reused = d.led, d.ledPauses, true
			d.sinceRead++
		}
	}
	if err != nil {
		if d.healthy {
			d.log.Warn("leadership refresh failed; retrying", "err", err)
			d.healthy = false
		}
		d.led, d.counted = nil, nil // read afresh once the database answers
		// Without a heartbeat for a whole TTL, another node may have taken
		// our queues: stop dispatching until the database answers again.
		if !d.fresh() {
			d.sync(nil, pauses)
		}
		return err
	}
	if !d.healthy {
		d.log.Info("leadership refresh recovered")
		d.healthy = true
	}
	var yielded []string
	if yield > 0 {
		// The runners stop grabbing before the queues are given up, so the
		// next leader's runner and this one do not both grab (a grab is
		// atomic, so they could not take the same job anyway). Deliveries
		// in flight finish here; they stay grabbed by this node.
		d.mu.Lock()
		yielded = d.toYield(led, yield)
		d.mu.Unlock()
		led = slices.DeleteFunc(slices.Clone(led), func(q *store.Queue) bool { return slices.Contains(yielded, q.Name) })
	}
	if !reused || len(yielded) > 0 {
		// Applying a read again would change nothing: a node leading many
		// idle queues walks none of them.
		d.sync(led, pauses)
	}
	if len(yielded) > 0 {
		if err := d.cfg.Store.QueuesYield(ctx, &store.QueuesYieldParams{Node: d.cfg.Node, Queues: yielded}); err != nil {
			// Still led: the next cycle starts their runners again.
			d.log.Warn("yielding queues to other nodes failed", "queues", len(yielded), "err", err)
			d.led = nil
		} else {
			d.log.Info("yielded queues to other nodes", "queues", len(yielded))
			d.led = led
		}
	}
	if stale {
		d.nudgeAll() // runners held back while the node was stale go on
	}
	return nil
}

// clusterNow returns the live nodes with the queues each leads: counted
// afresh when the cycle must (see cycle), else the last count with this
// node's own share as it stands.
func (d *Dispatcher) clusterNow(ctx context.Context, full bool) (*store.Cluster, error) {
	last := d.counted
	count := full || last == nil || d.moving || d.sinceCount >= countEvery
	if !count {
		// The glance decides whether to count; a cycle that counts anyway
		// skips it.
		g, err := d.cfg.Store.NodesGlance(ctx)
		if err != nil {
			return nil, err
		}
		count = g.Free || !sameNodes(last, g.Nodes)
	}
	if count {
		c, err := d.cfg.Store.NodesLive(ctx)
		if err != nil {
			return nil, err
		}
		d.counted, d.sinceCount = c, 0
		return c, nil
	}
	d.sinceCount++
	c := &store.Cluster{Queues: last.Queues, Nodes: slices.Clone(last.Nodes)}
	for i, n := range c.Nodes {
		if n.ID == d.cfg.Node && d.led != nil {
			me := *n
			me.Leads = len(d.led)
			c.Nodes[i] = &me
		}
	}
	return c, nil
}

// sameNodes reports whether c holds exactly the nodes ids, in order.
func sameNodes(c *store.Cluster, ids []string) bool {
	return slices.EqualFunc(c.Nodes, ids, func(n *store.Node, id string) bool { return n.ID == id })
}

// fresh reports whether this node's registration is known to be live: a
// heartbeat succeeded within the node TTL. A node frozen (SIGSTOP, a
// stalled VM) or cut off for longer may have lost its queues and grabs to
// other nodes, and may not know it yet: its runners start no delivery, and
// it hands nothing off, until a heartbeat succeeds again, after which the
// leadership cycle stops the runners of the queues it lost.
func (d *Dispatcher) fresh() bool {
	return time.Since(time.Unix(0, d.lastBeat.Load())) <= d.cfg.NodeTTL
}

// nudgeAll wakes every runner.
func (d *Dispatcher) nudgeAll() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, r := range d.runners {
		r.nudge()
	}
}

// sync starts runners for newly led queues, updates the settings of the
// others, and stops the runners of queues no longer led. pauses is
// d.pauses when the read of led began: a pause or resume applied here
// since then (SetPaused, after its commit) is newer than what led says,
// and is kept.
func (d *Dispatcher) sync(led []*store.Queue, pauses uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	select {
	case <-d.stop:
		return // Stop retires every runner
	default:
	}
	// Many queues led at once (a node starting, or taking over a dead
	// node's share) start cold: parked, their first look and rescue left
	// to the prober, which asks for a thousand queues per statement,
	// instead of a grab and a rescue each.
	fresh := 0
	for _, q := range led {
		if d.runners[q.Name] == nil {
			fresh++
		}
	}
	cold := fresh > coldAbove
	keep := make(map[string]bool, len(led))
	for _, q := range led {
		keep[q.Name] = true
		if m, ok := d.marks[q.Name]; ok && m.at > pauses && m.paused != q.Paused {
			c := *q
			c.Paused = m.paused
			q = &c
		}
		if r, ok := d.runners[q.Name]; ok {
			if old := r.settings.Swap(q); old.Paused && !q.Paused {
				r.nudge() // resumed: grab at once, not at the next poll
			}
			continue
		}
		r := newRunner(d, q)
		r.cold = cold
		d.runners[q.Name] = r
		if !cold {
			d.log.Info("leading queue", "queue", q.Name)
		}
		go r.run()
	}
	if cold {
		d.log.Info("leading queues", "queues", fresh)
	}
	for name, m := range d.marks {
		if m.at <= pauses {
			delete(d.marks, name) // led was read after it
		}
	}
	for name, r := range d.runners {
		if !keep[name] {
			d.log.Info("no longer leading queue", "queue", name)
			delete(d.runners, name)
			d.retire(r)
		}
	}
}

// retire stops r and lets its deliveries finish; d.mu is held. r stops
// before retire returns, so before a yield gives its queue up: from then
// on it starts no keyed job, whose key the next leader counts
// (keys.go).
func (d *Dispatcher) retire(r *runner) {
	r.stopOnce.Do(r.closeStop)
	d.retired.Add(1)
	d.retiring[r.name]++
	go func() {
		defer d.retired.Done()
		r.halt()
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.retiring[r.name]--; d.retiring[r.name] == 0 {
			delete(d.retiring, r.name)
		}
	}()
}

// finishing reports whether a stopped runner of queue still finishes
// deliveries on this node.
func (d *Dispatcher) finishing(queue string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.retiring[queue] > 0
}

// Stop stops taking jobs, lets deliveries in flight finish until ctx ends
// (the shutdown timeout), then cancels the rest, gives up the queues and
// deregisters the node. Cancelled deliveries stay grabbed until their grab
// expires and are then delivered again. Stop is idempotent and safe if
// Start was never called; a second call returns nil.
func (d *Dispatcher) Stop(ctx context.Context) error {
	var errs []error
	d.stopOnce.Do(func() {
		close(d.stop)
		d.startOnce.Do(func() { close(d.loopDone); close(d.probeDone) }) // a Start after Stop does nothing
		<-d.loopDone
		<-d.probeDone
		d.mu.Lock()
		for name, r := range d.runners {
			delete(d.runners, name)
			d.retire(r)
		}
		d.mu.Unlock()
		finished := make(chan struct{})
		go func() {
			d.retired.Wait() // no delivery left to start an acknowledgement
			d.acks.Wait()
			close(finished)
		}()
		select {
		case <-finished:
		case <-ctx.Done():
			d.log.Warn("shutdown timeout: cancelling deliveries in flight")
			d.hardStop()
			<-finished
		}
		d.hardStop()
		d.complete.Close()
		d.heads.Close()
		d.holds.Close()
		d.succeed.Close()
		bg, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := d.cfg.Store.QueuesRelease(bg, d.cfg.Node); err != nil {
			errs = append(errs, fmt.Errorf("release queues: %w", err))
		}
		if err := d.cfg.Store.NodeDelete(bg, d.cfg.Node); err != nil {
			errs = append(errs, fmt.Errorf("deregister node: %w", err))
		}
		if err := d.closeSession(); err != nil {
			errs = append(errs, fmt.Errorf("close database session: %w", err))
		}
	})
	return errors.Join(errs...)
}

// retryStore runs op until it succeeds, the job turns out not to be ours
// (ErrNotFound), or the hard stop. It backs off between attempts.
func (d *Dispatcher) retryStore(log *slog.Logger, what string, op func(ctx context.Context) error) error {
	wait := 50 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(d.deliverCtx, 30*time.Second)
		err := op(ctx)
		cancel()
		if err == nil || errors.Is(err, store.ErrNotFound) {
			return err
		}
		log.Warn(what+" failed; retrying", "err", err, "in", wait)
		select {
		case <-d.deliverCtx.Done():
			return d.deliverCtx.Err()
		case <-time.After(wait):
		}
		wait = min(wait*2, 5*time.Second)
	}
}

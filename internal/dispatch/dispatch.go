// Package dispatch delivers jobs to workers. A Dispatcher keeps its node
// registered, claims the queues that have no live leader, and runs one
// runner per queue it leads: the runner grabs due jobs in batches (at most
// max_workers in flight), POSTs each to its worker, and acknowledges,
// retries or fails it by the worker's answer. It also extends its grabs
// while deliveries run and rescues grabs whose holder vanished. A runner
// with nothing to do parks, and one prober per node looks for work in all
// parked queues at once (probe.go); a parked runner with nothing to time
// holds no goroutine.
//
// The Dispatcher is the node's one door to dispatching: the enqueue path,
// the schedule loop and the API call Wake, Nudged, Changed and SetPaused
// (control.go), Reserve (handoff.go), Pull (pull.go) and the lease calls
// (lease.go); it reaches the leaders of queues on other nodes through a
// Nudger (internal/notify). What it asks of the database is Store
// (store.go).
//
// Files: dispatch.go the Dispatcher and its leadership cycle; session.go
// the node's database session and the reap of nodes whose session ended;
// spread.go the spread of queues over the live nodes; control.go the
// Dispatcher's face to the rest of the node; store.go the store methods
// it calls; runner.go a queue's loop, its turns and its dormancy; slots.go
// worker slots; readahead.go jobs grabbed ahead of free slots; handoff.go
// jobs handed to a runner by the enqueue path; deliver.go a slot's
// deliveries and their outcome; protocol.go the HTTP request to a worker
// and its answer; flow.go flow control per worker host (429/503 and
// Retry-After, circuit breaker); keys.go per-key concurrency and ordering;
// lease.go accepted jobs: lease tokens, heartbeats, completions, expiry;
// finished.go the prune of the history of finished jobs;
// pull.go pull queues: lease requests and their worker slots; backoff.go
// retry delays; throttle.go max_dispatches_per_second; probe.go the prober
// of parked queues and its heaps.
//
// Exclusion does not rest on leadership alone: a job is grabbed by one
// atomic statement and every acknowledgement is guarded by the holder's
// node id, so even two runners of one queue cannot deliver a job twice
// unless a grab expires while its delivery still runs, which extension
// prevents while the holder is healthy.
package dispatch

import (
	"cmp"
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
// whose slots mostly wait for acknowledgements flushes them (runner.ack,
// runner.ackAsync).
const ackGap = 6 * time.Millisecond

// Config configures a Dispatcher. Zero durations and sizes take the
// defaults noted.
type Config struct {
	Store  Store
	Logger *slog.Logger
	// Pruned, when not nil, is told how many history rows each prune of a
	// queue's finished jobs deleted (finished.go): /metrics counts them.
	Pruned func(n int64)
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
	// time within which another node takes over a dead node's queues
	// when its database session cannot tell (0: 10s, or 1.5s where the
	// node keeps a lease instead of a session; session.go).
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
	// MaxResultBytes caps the result a worker's success may carry
	// (DefaultMaxResultBytes; 1..MaxMaxResultBytes): a push success over
	// it stands with its result dropped (protocol.go).
	MaxResultBytes int
}

func (c *Config) setDefaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.RefreshInterval, time.Second)
	def(&c.GrabLease, 30*time.Second)
	def(&c.RescueInterval, 5*time.Second)
	def(&c.BreakerOpen, defaultBreakerOpen)
	if c.BatchSize <= 0 {
		c.BatchSize = 100
	}
	if c.MaxResultBytes <= 0 {
		c.MaxResultBytes = DefaultMaxResultBytes
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

	// deliverCtx bounds the acknowledgements and other writes of
	// deliveries; it ends at the hard stop (stopHard), which also cancels
	// the deliveries themselves.
	deliverCtx context.Context
	hardStop   context.CancelFunc
	complete   *batch.Batcher[ackItem, struct{}]
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
	succeed *batch.Batcher[success, string]

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
	prober              *prober
	healthy             bool
	lastBeat            atomic.Int64 // UnixNano of the last heartbeat that succeeded
	// session is the node's database session (session.go), open since
	// sessionSince; noSession: opening one failed, and that was logged.
	// They belong to the leadership cycle.
	session      store.NodeSession
	sessionSince time.Time
	noSession    bool
	// lease: the node keeps a lease instead of a session (session.go),
	// renewed by keepLease, which leaseDone waits for; lapsed: a renewal
	// came after the lease had lapsed, and the leadership cycle has not
	// read every queue since.
	lease     atomic.Bool
	lapsed    atomic.Bool
	leaseDone sync.WaitGroup
	// pruning: the prune of finished jobs running in the background
	// (finished.go), at most one at a time (pruneBusy).
	pruning   sync.WaitGroup
	pruneBusy atomic.Bool

	cluster atomic.Pointer[store.Cluster] // the live nodes as the last cycle read them
	// The leadership cycle's memory (cycle): the last count of queues per
	// node and the cycles since; the queues led as last read, d.pauses
	// when that read began, and the cycles since; whether the last cycle
	// claimed or yielded queues.
	counted                          *store.Cluster
	sinceCount, sinceRead, sinceFull int
	led                              []*store.Queue
	ledAt                            time.Time // the database's clock at the last read that found queues
	moving                           bool
	// recheck names the queues told changed since the last cycle: a read
	// of changes that does not return one asks whether it is still led.
	recheck map[string]bool

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
	d.prober = newProber(d)
	d.complete = batch.New(func(ctx context.Context, acks []ackItem) ([]struct{}, error) {
		p := &store.JobsCompleteParams{Node: cfg.Node, IDs: make([]int64, len(acks))}
		for i, a := range acks {
			p.IDs[i] = a.job.ID
			if a.job.Ordered {
				p.Ordered = append(p.Ordered, a.job.ID)
			}
			if a.keep {
				p.Keep = append(p.Keep, *a.note)
			}
			if a.flow {
				p.Flow = append(p.Flow, *a.note)
			}
		}
		_, err := cfg.Store.JobsComplete(ctx, p)
		return make([]struct{}, len(acks)), err
	}, 500, ackGap)
	d.heads = batch.New(func(ctx context.Context, asks []keyAsk) ([]int64, error) {
		return headsOf(ctx, cfg.Store, asks)
	}, headsMax, 0)
	d.holds = batch.New(func(ctx context.Context, jobs []store.JobDelay) ([]struct{}, error) {
		_, err := cfg.Store.JobsDefer(ctx, &store.JobsDeferParams{Node: cfg.Node, Jobs: jobs})
		return make([]struct{}, len(jobs)), err
	}, 500, 0)
	d.succeed = batch.New(func(ctx context.Context, ss []success) ([]string, error) {
		p := &store.JobsSucceedParams{Grabs: make([]store.JobGrab, len(ss)), Status: StatusSuccess}
		for i, s := range ss {
			p.Grabs[i] = s.grab
			if s.message != "" || s.result != nil {
				if p.Notes == nil {
					p.Notes = make([]store.FinishNote, len(ss))
				}
				p.Notes[i] = store.FinishNote{ID: s.grab.ID, Message: s.message, Result: s.result}
			}
		}
		return cfg.Store.JobsSucceed(ctx, p)
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
		changed := false
		select {
		case <-d.stop:
			return
		case <-t.C:
		case <-d.refresh:
			changed = true
		}
		ctx, cancel := context.WithTimeout(context.Background(), d.ttl())
		d.cycle(ctx, changed)
		cancel()
		d.saveHosts()
		if time.Since(lastPurge) >= time.Minute {
			lastPurge = time.Now()
			d.purgeResults()
			d.pruneLater()
		}
	}
}

// How often the leadership cycle reads what it otherwise reuses. The
// count of queues per node (store.NodesLive) and the full read of the
// queues this node leads (store.QueuesLed) both read every queue, so they
// come only when something says they changed (a node came or went, a
// queue is free, a claim, an outage, a new database session) or every
// fullEvery cycles; what they can miss in between is a queue deleted
// through another node whose nudge was lost. Every readEvery cycles, and
// at once when told that a queue changed, the cycle reads only the queues
// it leads whose settings changed since its last read, which costs what
// changed: a settings change through another node whose nudge was lost
// applies within readEvery cycles.
const (
	fullEvery = 600
	readEvery = 5
)

// sinceSlack is how far back before its last read the cycle asks for
// changed queues: a change whose statement read the clock before that
// read but committed after it is still seen.
const sinceSlack = 5 * time.Second

// coldAbove is how many queues a leadership cycle may start leading before
// their runners start cold (sync).
const coldAbove = 100

// cycle holds the node's database session, heartbeats, reaps the nodes
// whose session ended (session.go), claims free queues up to its share or
// yields queues beyond it (spread.go), and starts, updates or stops runners
// to match the queues this node leads.
//
// What it reads each time costs the same however many queues there are: a
// glance at the live nodes and whether any queue is free
// (store.NodesGlance), and, every readEvery cycles or when changed (a
// queue was changed through this node, or another node said so), the
// queues it leads whose settings changed. It counts the queues per node
// and reads all it leads only when it must (see fullEvery). Between full
// reads this node cannot lose a queue (claims take only queues of nodes
// that are not live), and it learns of a queue deleted from the nudge
// that names it (recheck).
func (d *Dispatcher) cycle(ctx context.Context, changed bool) error {
	d.mu.Lock()
	pauses := d.pauses
	recheck := d.recheck
	d.recheck = nil
	d.mu.Unlock()
	// stale: a heartbeat succeeded once, but not within the TTL; the
	// runners hold back until this cycle's heartbeat.
	stale := d.lastBeat.Load() != 0 && !d.fresh()
	lapsed := d.lapsed.Load()
	since := d.sessionSince
	session := d.holdSession(ctx)
	all := stale || lapsed || !d.healthy || d.sessionSince != since
	var err error
	switch {
	case !d.lease.Load():
		err = d.cfg.Store.NodeHeartbeat(ctx, &store.NodeHeartbeatParams{ID: d.cfg.Node, Host: d.cfg.Host, TTL: d.ttl(), Session: session})
		if err == nil {
			d.lastBeat.Store(time.Now().UnixNano())
			err = d.reap(ctx)
		}
	case d.lastBeat.Load() == 0 || !d.fresh() && !lapsed:
		// keepLease renews the lease; the cycle only when it has none.
		err = d.renewLease(ctx, time.Now())
	}
	var claim, yield int
	if err == nil {
		var c *store.Cluster
		if c, err = d.clusterNow(ctx, all); err == nil {
			d.cluster.Store(c)
			claim, yield = share(c, d.cfg.Node)
			d.moving = claim > 0 || yield > 0
		}
	}
	if err == nil && claim > 0 {
		err = d.cfg.Store.QueuesClaim(ctx, &store.QueuesClaimParams{Node: d.cfg.Node, Limit: claim})
		all = true // read what it got
	}
	var rd ledRead
	if err == nil {
		rd, err = d.readLed(ctx, all, changed || len(recheck) > 0, recheck)
	}
	if err != nil {
		if d.healthy {
			d.log.Warn("leadership refresh failed; retrying", "err", err)
			d.healthy = false
		}
		d.led, d.counted = nil, nil // read afresh once the database answers
		d.mu.Lock()
		for name := range recheck {
			d.recheck = addName(d.recheck, name) // asked again next cycle
		}
		d.mu.Unlock()
		// Without a heartbeat for a whole TTL, another node may have taken
		// our queues: stop dispatching until the database answers again.
		if !d.fresh() {
			d.sync(ledRead{read: true, all: true}, pauses)
		}
		return err
	}
	if !d.healthy {
		d.log.Info("leadership refresh recovered")
		d.healthy = true
	}
	d.spread(ctx, rd, pauses, yield)
	if lapsed {
		d.lapsed.Store(false)
		stale = true
	}
	if stale {
		d.nudgeAll() // runners held back while the node was stale go on
	}
	return nil
}

// ledRead is what a leadership cycle read of the queues this node leads:
// all of them, or those that changed (and those of recheck that are gone);
// or nothing, when it reused its last read.
type ledRead struct {
	queues []*store.Queue
	// read: the queues were read (all of them, or the changed ones).
	read, all bool
	gone      []string
}

// readLed reads the queues this node leads: all of them when all, or
// when fullEvery cycles have passed; else those changed since the last
// read when changed, or every readEvery cycles; else nothing. Queues of
// recheck, named by a change, that the read of changes does not return
// are asked after: one no longer led (deleted) is gone.
func (d *Dispatcher) readLed(ctx context.Context, all, changed bool, recheck map[string]bool) (ledRead, error) {
	all = all || d.led == nil || d.sinceFull >= fullEvery
	if !all && !changed && d.sinceRead < readEvery {
		d.sinceRead++
		d.sinceFull++
		return ledRead{}, nil
	}
	p := &store.QueuesLedParams{Node: d.cfg.Node}
	if !all && !d.ledAt.IsZero() {
		p.Since = d.ledAt.Add(-sinceSlack)
	}
	got, err := d.cfg.Store.QueuesLed(ctx, p)
	if err != nil {
		return ledRead{}, err
	}
	if !got.At.IsZero() {
		d.ledAt = got.At
	}
	d.sinceRead = 0
	rd := ledRead{queues: got.Queues, read: true, all: p.Since.IsZero()}
	if rd.all {
		d.sinceFull = 0
		d.led = got.Queues
		return rd, nil
	}
	d.sinceFull++
	for _, q := range got.Queues {
		delete(recheck, q.Name)
	}
	for name := range recheck {
		if d.runner(name) == nil {
			continue
		}
		n, err := d.cfg.Store.QueueLeader(ctx, name)
		switch {
		case errors.Is(err, store.ErrNotFound) || err == nil && n.ID != d.cfg.Node:
			rd.gone = append(rd.gone, name)
		case err != nil:
			return ledRead{}, err
		}
	}
	if len(rd.gone) > 0 {
		// The last count holds the queues gone: its share would have this
		// node claim as many (and read all it leads), where there are
		// none to claim.
		d.counted = nil
	}
	d.led = mergeLed(d.led, got.Queues, rd.gone)
	return rd, nil
}

// mergeLed returns led, sorted by name, with the queues of changed put in
// (replacing those of the same name) and those named in gone taken out.
func mergeLed(led, changed []*store.Queue, gone []string) []*store.Queue {
	if len(changed) == 0 && len(gone) == 0 {
		return led
	}
	byName := func(q *store.Queue, name string) int { return cmp.Compare(q.Name, name) }
	out := slices.Clone(led)
	for _, q := range changed {
		if i, found := slices.BinarySearchFunc(out, q.Name, byName); found {
			out[i] = q
		} else {
			out = slices.Insert(out, i, q)
		}
	}
	for _, name := range gone {
		if i, found := slices.BinarySearchFunc(out, name, byName); found {
			out = slices.Delete(out, i, i+1)
		}
	}
	return out
}

// spread applies the cycle's read rd, giving up yield queues to other
// nodes first: the runners stop grabbing before the queues are given up,
// so the next leader's runner and this one do not both grab (a grab is
// atomic, so they could not take the same job anyway). Deliveries in
// flight finish here; they stay grabbed by this node.
func (d *Dispatcher) spread(ctx context.Context, rd ledRead, pauses uint64, yield int) {
	var yielded []string
	if yield > 0 {
		d.mu.Lock()
		yielded = d.toYield(d.led, yield)
		d.mu.Unlock()
		rd.gone = append(rd.gone, yielded...)
	}
	// Applying nothing walks no runner: a node leading many idle queues
	// walks none of them.
	d.sync(rd, pauses)
	if len(yielded) == 0 {
		return
	}
	if err := d.cfg.Store.QueuesYield(ctx, &store.QueuesYieldParams{Node: d.cfg.Node, Queues: yielded}); err != nil {
		// Still led: the next cycle reads them all and starts their
		// runners again.
		d.log.Warn("yielding queues to other nodes failed", "queues", len(yielded), "err", err)
		d.led = nil
		return
	}
	d.log.Info("yielded queues to other nodes", "queues", len(yielded))
	d.led = mergeLed(d.led, nil, yielded)
}

// addName adds name to the set m, making it if nil.
func addName(m map[string]bool, name string) map[string]bool {
	if m == nil {
		m = map[string]bool{}
	}
	m[name] = true
	return m
}

// clusterNow returns the live nodes with the queues each leads: counted
// afresh when the cycle must (see cycle), else the last count with this
// node's own share as it stands.
func (d *Dispatcher) clusterNow(ctx context.Context, full bool) (*store.Cluster, error) {
	last := d.counted
	count := full || last == nil || d.moving || d.sinceCount >= fullEvery
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
	return !d.lapsed.Load() && time.Since(time.Unix(0, d.lastBeat.Load())) <= d.ttl()
}

// nudgeAll wakes every runner.
func (d *Dispatcher) nudgeAll() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, r := range d.runners {
		r.nudge()
	}
}

// sync applies rd: it starts runners for newly led queues, updates the
// settings of the others, and stops the runners of queues no longer led
// (those rd names gone; after a read of all, those it does not hold).
// pauses is d.pauses when the read began: a pause or resume applied here
// since then (SetPaused, after its commit) is newer than what rd says, and
// is kept.
func (d *Dispatcher) sync(rd ledRead, pauses uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	select {
	case <-d.stop:
		return // Stop retires every runner
	default:
	}
	gone := make(map[string]bool, len(rd.gone))
	for _, name := range rd.gone {
		gone[name] = true
	}
	// Many queues led at once (a node starting, or taking over a dead
	// node's share) start cold: parked, their first look and rescue left
	// to the prober, which asks for a thousand queues per statement,
	// instead of a grab and a rescue each.
	fresh := 0
	for _, q := range rd.queues {
		if d.runners[q.Name] == nil && !gone[q.Name] {
			fresh++
		}
	}
	cold := fresh > coldAbove
	keep := make(map[string]bool, len(rd.queues))
	for _, q := range rd.queues {
		if gone[q.Name] {
			continue
		}
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
		d.runners[q.Name] = r
		if !cold {
			d.log.Info("leading queue", "queue", q.Name)
		}
		r.start(cold)
	}
	if cold {
		d.log.Info("leading queues", "queues", fresh)
	}
	if rd.read {
		for name, m := range d.marks {
			if m.at <= pauses {
				delete(d.marks, name) // read after it
			}
		}
	}
	if rd.all {
		for name := range d.runners {
			if !keep[name] {
				gone[name] = true
			}
		}
	}
	for name := range gone {
		if r := d.runners[name]; r != nil {
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
		d.pruning.Wait()   // it stops between two batches
		d.leaseDone.Wait() // no renewal after the deregistration below
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
			d.stopHard()
			<-finished
		}
		d.stopHard()
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

// stopHard ends deliverCtx and cancels the deliveries in flight (their
// contexts are not derived from it: see runner.process). A delivery that
// starts after the Range finds deliverCtx ended, and cancels itself.
func (d *Dispatcher) stopHard() {
	d.hardStop()
	d.deliveries.Range(func(_, v any) bool {
		v.(*delivery).cancel(context.Canceled)
		return true
	})
}

// retryStore runs op until it succeeds, the job turns out not to be ours
// (ErrNotFound), or the hard stop. It backs off between attempts, and
// bounds each attempt to 30 s. log gives the logger for its warnings,
// called only when an attempt failed.
func (d *Dispatcher) retryStore(log func() *slog.Logger, what string, op func(ctx context.Context) error) error {
	return d.retryStoreWithin(log, what, 30*time.Second, op)
}

// retryStoreWithin is retryStore with each attempt bounded to limit; 0
// sets no bound of its own (op is bounded otherwise, as an acknowledgement
// by its batch's timeout), and each attempt then costs no timer.
func (d *Dispatcher) retryStoreWithin(log func() *slog.Logger, what string, limit time.Duration, op func(ctx context.Context) error) error {
	wait := 50 * time.Millisecond
	for {
		ctx, cancel := d.deliverCtx, context.CancelFunc(func() {})
		if limit > 0 {
			ctx, cancel = context.WithTimeout(d.deliverCtx, limit)
		}
		err := op(ctx)
		cancel()
		if err == nil || errors.Is(err, store.ErrNotFound) {
			return err
		}
		log().Warn(what+" failed; retrying", "err", err, "in", wait)
		select {
		case <-d.deliverCtx.Done():
			return d.deliverCtx.Err()
		case <-time.After(wait):
		}
		wait = min(wait*2, 5*time.Second)
	}
}

// Package chaos is the chaos suite behind `rowq chaos`: it starts several
// `rowq serve` processes on one database, drives a steady load of jobs
// through all of them to a checking worker, injects faults on a schedule
// (SIGKILL or SIGSTOP of the node leading the queue, a misbehaving worker,
// a database fault by an operator's command: a restart, a Galera member
// killed, a failover), optionally checks a lock and a schedule under the
// same faults, and reports what was lost, what was delivered twice or
// under another id than the one answered, which nodes were reaped and why,
// and how long each takeover took.
package chaos

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rowq/rowq/client"
	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/backend"
	"github.com/rowq/rowq/rowqtype"
)

// Fault kinds, as --faults names them.
const (
	FaultKill      = "kill"       // SIGKILL the queue's leader, start a replacement
	FaultStop      = "stop"       // SIGSTOP the queue's leader for StopFor, then SIGCONT
	FaultWorker    = "worker"     // the worker misbehaves on every third delivery for WorkerFaultFor
	FaultDB        = "db"         // run DBFaultCmd
	FaultDBRestart = "db-restart" // FaultDB's older name
)

// Options configures a run.
type Options struct {
	Exe string // the rowq binary the nodes run
	// DatabaseURL is the nodes' database, and the one the run itself reads
	// (the soak's table sizes, the database probes).
	DatabaseURL string
	// NodeDatabaseURLs, when set, give node i the URL i mod len (a
	// replacement takes the URL of the node it replaces), so that each
	// node writes through its own member of a cluster.
	NodeDatabaseURLs []string
	Dir              string // node logs (and the default SQLite file) go here
	Nodes            int
	Rate             float64 // jobs per second offered, spread over the nodes
	Duration         time.Duration
	MaxWorkers       int
	// Keys, when > 0, spreads the jobs over this many concurrency keys
	// ("k<seq mod Keys>"), each with KeyLimit: the faults then meet parked
	// jobs and per-key counts (docs/flow-control.md).
	Keys, KeyLimit int
	Faults         []string // kinds, taking turns, one every Every
	Every          time.Duration
	// StopFor is how long a stopped node stays stopped.
	StopFor time.Duration
	// WorkerFaultFor is how long a worker fault lasts.
	WorkerFaultFor time.Duration
	// DBFaultCmd is a shell command that injects a database fault and
	// ends when the fault is over (restart a server, kill and restart a
	// Galera member, fail a primary over), for FaultDB.
	DBFaultCmd string
	// The nodes' settings; a NodeTTL of 0 leaves the server's default.
	NodeTTL, GrabLease, RefreshInterval, RescueInterval time.Duration
	NodeLogLevel                                        string
	// JobTimeout is the jobs' timeout (whole seconds); WorkTime how long
	// the worker takes over a normal delivery.
	JobTimeout, WorkTime time.Duration
	// LockClients take a lock through different nodes (0: no lock check).
	LockClients int
	// Schedule runs a schedule every second and counts its runs per tick.
	Schedule bool
	// DrainTimeout bounds the wait for every accepted job after the load;
	// Settle is the wait after that, for late duplicates to show.
	DrainTimeout, Settle time.Duration
	// Sample, when set, takes a Sample this often while the load runs:
	// each node's memory and goroutines, the tables' sizes, the latency
	// of the interval's deliveries (a soak).
	Sample time.Duration
	Log    *slog.Logger // progress; nil for none
}

// Validate checks the options; its messages name the flag.
func (o *Options) Validate() error {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	check(o.Exe != "", "exe: must be set")
	check(strings.Contains(o.DatabaseURL, "://"), "database-url: want mysql://…, postgres://… or sqlite://path, got %q", o.DatabaseURL)
	for _, u := range o.NodeDatabaseURLs {
		check(strings.Contains(u, "://"), "node-database-url: want mysql://…, postgres://… or sqlite://path, got %q", backend.Redact(u))
		check(sameDialect(u, o.DatabaseURL), "node-database-url: %q is not a database of database-url's kind (%s)", backend.Redact(u), dialect(o.DatabaseURL))
	}
	check(o.NodeTTL >= 0, "node-ttl: must not be negative (0: the server's default), got %v", o.NodeTTL)
	check(o.Nodes >= 1 && o.Nodes <= 50, "nodes: must be 1..50, got %d", o.Nodes)
	check(o.Rate > 0 && o.Rate <= 100000, "rate: must be in (0, 100000], got %v", o.Rate)
	check(o.Duration >= time.Second, "duration: must be at least 1s, got %v", o.Duration)
	check(o.MaxWorkers >= 1 && o.MaxWorkers <= 10000, "max-workers: must be 1..10000, got %d", o.MaxWorkers)
	check(o.Keys >= 0, "keys: must not be negative, got %d", o.Keys)
	check(o.Keys == 0 || o.KeyLimit >= 1 && o.KeyLimit <= 10000, "key-limit: must be 1..10000, got %d", o.KeyLimit)
	check(o.Every >= 100*time.Millisecond, "every: must be at least 100ms, got %v", o.Every)
	if slices.Contains(o.Faults, FaultStop) {
		check(o.StopFor < o.Every, "stop-for: must be shorter than every (%v), so that stops do not overlap, got %v", o.Every, o.StopFor)
	}
	check(o.JobTimeout >= time.Second && o.JobTimeout%time.Second == 0, "job-timeout: whole seconds, at least 1s, got %v", o.JobTimeout)
	check(o.LockClients >= 0, "lock-clients: must not be negative")
	check(o.Sample == 0 || o.Sample >= time.Second, "sample: must be 0 (none) or at least 1s, got %v", o.Sample)
	for _, f := range o.Faults {
		switch f {
		case FaultKill, FaultStop, FaultWorker:
		case FaultDB, FaultDBRestart:
			check(o.DBFaultCmd != "", "faults: %s needs --db-fault-cmd", f)
		default:
			check(false, "faults: unknown fault %q (want kill, stop, worker, db)", f)
		}
	}
	return errors.Join(errs...)
}

// sameDialect reports whether two database URLs name the same kind of
// database.
func sameDialect(a, b string) bool {
	norm := func(u string) string {
		if d := dialect(u); d != "postgresql" {
			return d
		}
		return "postgres"
	}
	return norm(a) == norm(b)
}

// Spread is a measured duration per event, in milliseconds.
type Spread struct {
	N      int     `json:"n"`
	Max    int64   `json:"max"`
	Median int64   `json:"median"`
	Each   []int64 `json:"each"`
}

func spread(ds []time.Duration) *Spread {
	if len(ds) == 0 {
		return nil
	}
	s := &Spread{N: len(ds)}
	for _, d := range ds {
		s.Each = append(s.Each, d.Milliseconds())
	}
	sorted := slices.Clone(s.Each)
	slices.Sort(sorted)
	s.Max, s.Median = sorted[len(sorted)-1], sorted[len(sorted)/2]
	return s
}

// LockResult is what the lock check measured.
type LockResult struct {
	Clients      int `json:"clients"`
	Acquisitions int `json:"acquisitions"`
	// DoubleHolds counts a client entering the protected resource while
	// another client's lease, by the other's own conservative reckoning,
	// was still valid and not released.
	DoubleHolds int `json:"double_holds"`
	// StaleRejected counts writes the resource refused for a token older
	// than one it had seen.
	StaleRejected int `json:"stale_rejected"`
	// TokensNotIncreasing counts acquires whose fencing token was not
	// above every token handed out before the acquire was sent.
	TokensNotIncreasing int `json:"tokens_not_increasing"`
	// Errors are acquire requests that failed (a node down, a timeout).
	Errors int `json:"errors"`
}

// ScheduleResult is what the schedule check measured.
type ScheduleResult struct {
	Ticks   int `json:"ticks"`   // ticks from the first run to the last
	Runs    int `json:"runs"`    // runs recorded for those ticks
	Lost    int `json:"lost"`    // ticks without a run
	Doubled int `json:"doubled"` // runs beyond the first for a tick
	Skipped int `json:"skipped"` // runs recorded as skipped
	Jobs    int `json:"jobs_delivered"`
	// KilledFirers counts the kills of a node that had fired one of the
	// schedule's ticks (a killed node fires nothing after its kill).
	KilledFirers int `json:"killed_firers"`
}

// Result is a run's report, printed as one JSON line.
type Result struct {
	Database   string  `json:"database"`
	Nodes      int     `json:"nodes"`
	Rate       float64 `json:"rate"`
	DurationS  float64 `json:"duration_s"`
	Faults     string  `json:"faults"`
	Keys       int     `json:"keys,omitempty"`
	KeyLimit   int     `json:"key_limit,omitempty"`
	EveryS     float64 `json:"every_s"`
	NodeTTLS   float64 `json:"node_ttl_s"`
	GrabLeaseS float64 `json:"grab_lease_s"`
	// NodeDatabaseURLs are the nodes' own database URLs, passwords
	// hidden (--node-database-url).
	NodeDatabaseURLs []string `json:"node_database_urls,omitempty"`
	Kills            int      `json:"kills"`
	KillsSkipped     int      `json:"kills_skipped"`
	Stops            int      `json:"stops"`
	// DBFaults counts the database faults run; DBFaultErrors those whose
	// command exited non-zero (still counted, and measured: the fault may
	// have happened).
	DBFaults      int `json:"db_faults"`
	DBFaultErrors int `json:"db_fault_errors"`
	// WorkerFaults counts the misbehaviours injected, by kind.
	WorkerFaults map[string]int `json:"worker_faults"`

	Accepted int `json:"accepted"`
	// EnqueueErrors counts enqueues not answered 200, by status code, or
	// "conn" (refused or reset) and "timeout".
	EnqueueErrors map[string]int `json:"enqueue_errors"`
	// RefusedWithoutRetryAfter counts enqueues answered 5xx without a
	// Retry-After header.
	RefusedWithoutRetryAfter int   `json:"refused_without_retry_after"`
	Delivered                int   `json:"delivered"` // accepted jobs answered success at least once
	Lost                     int   `json:"lost"`      // accepted jobs never answered success
	LostSeqs                 []int `json:"lost_seqs,omitempty"`
	// Duplicates are deliveries beyond a job's first, but for Retries;
	// DuplicatesAfterSuccess those of them that follow a delivery the
	// worker answered success (its acknowledgement was not committed).
	Duplicates             int `json:"duplicates"`
	DuplicatesAfterSuccess int `json:"duplicates_after_success"`
	// Retries are deliveries that follow an injected worker failure.
	Retries int `json:"retries"`
	// DeliveredUnaccepted are jobs whose enqueue failed but which were
	// delivered: stored, though the client was not told.
	DeliveredUnaccepted int `json:"delivered_unaccepted"`
	// IDsChecked counts the accepted jobs delivered at least once, whose
	// delivered ids were compared with the id answered at enqueue;
	// IDMismatches those of them delivered under another id
	// (IDMismatchSeqs: the first 20).
	IDsChecked     int   `json:"ids_checked"`
	IDMismatches   int   `json:"id_mismatches"`
	IDMismatchSeqs []int `json:"id_mismatch_seqs,omitempty"`
	// FailedLog is the queue's failure log at the end.
	FailedLog int `json:"failed_log"`
	// InFlightAtKills sums the deliveries open at the worker from the
	// killed node at each kill.
	InFlightAtKills *int `json:"in_flight_at_kills,omitempty"`
	// FailoverMS is, per kill, the time to the next delivery by any other
	// node.
	FailoverMS *Spread `json:"failover_ms,omitempty"`
	// RedeliveryMS is, per kill, the time until every job the killed node
	// held (grabbed a moment before the kill, or open at the worker) and
	// had not completed was delivered by another node.
	RedeliveryMS *Spread `json:"redelivery_ms,omitempty"`
	// NotRedelivered counts held jobs never delivered again.
	NotRedelivered *int `json:"not_redelivered,omitempty"`
	// StopFailoverMS is, per SIGSTOP, the time to the next delivery by any
	// other node.
	StopFailoverMS *Spread `json:"stop_failover_ms,omitempty"`
	// StaleAfterCont counts jobs a stopped node held at the SIGSTOP and
	// delivered after its SIGCONT although another node had delivered them
	// between the SIGSTOP and that delivery: jobs it had lost.
	StaleAfterCont *int `json:"stale_after_cont,omitempty"`
	// DBResumeMS is, per database fault, the time from the command's end
	// to the next delivery.
	DBResumeMS *Spread `json:"db_resume_ms,omitempty"`
	// DBGapMS is, per database fault, the longest time without a delivery
	// from the command's start to DBGapAfter after its end (or to the
	// run's last delivery, if earlier).
	DBGapMS *Spread `json:"db_gap_ms,omitempty"`
	// Reaps are the nodes' reaps of other nodes, read from their logs and
	// classed by why the reaped node was gone.
	Reaps *ReapResult `json:"reaps,omitempty"`

	Lock     *LockResult     `json:"lock,omitempty"`
	Schedule *ScheduleResult `json:"schedule,omitempty"`
	// Samples are a soak's samples (Options.Sample), in order.
	Samples []*Sample `json:"samples,omitempty"`

	Drained bool `json:"drained"`
	// NotMeasured names what this run did not measure, and why.
	NotMeasured []string `json:"not_measured,omitempty"`
	ElapsedS    float64  `json:"elapsed_s"`
}

// Failed reports whether the run broke a guarantee: a job lost or
// delivered under another id than the one answered, a live node reaped,
// an enqueue refused without Retry-After, a lock held twice or a fencing
// token not above those handed out before, a schedule tick lost or
// doubled, or jobs not drained.
func (r *Result) Failed() error {
	var errs []error
	if r.Lost > 0 {
		errs = append(errs, fmt.Errorf("%d accepted jobs lost", r.Lost))
	}
	if r.IDMismatches > 0 {
		errs = append(errs, fmt.Errorf("%d jobs delivered under another id than the one answered at enqueue", r.IDMismatches))
	}
	if r.Reaps != nil && r.Reaps.Live > 0 {
		errs = append(errs, fmt.Errorf("%d reaps of a live node", r.Reaps.Live))
	}
	if r.RefusedWithoutRetryAfter > 0 {
		errs = append(errs, fmt.Errorf("%d enqueues refused without Retry-After", r.RefusedWithoutRetryAfter))
	}
	if !r.Drained {
		errs = append(errs, errors.New("the queue did not drain in time"))
	}
	if r.Lock != nil && r.Lock.DoubleHolds > 0 {
		errs = append(errs, fmt.Errorf("lock held twice %d times", r.Lock.DoubleHolds))
	}
	if r.Lock != nil && r.Lock.TokensNotIncreasing > 0 {
		errs = append(errs, fmt.Errorf("%d fencing tokens not above those handed out before", r.Lock.TokensNotIncreasing))
	}
	if r.Schedule != nil && r.Schedule.Lost+r.Schedule.Doubled > 0 {
		errs = append(errs, fmt.Errorf("schedule ticks lost %d, doubled %d", r.Schedule.Lost, r.Schedule.Doubled))
	}
	return errors.Join(errs...)
}

// killRecord is one SIGKILL: the node, when, and the jobs it held a moment
// before (from GET /queue/{name}/grabbed).
type killRecord struct {
	node string
	at   time.Time
	held []int
}

// stopRecord is one SIGSTOP and its SIGCONT (zero until sent), and the
// jobs the node held a moment before the SIGSTOP.
type stopRecord struct {
	node     string
	at, cont time.Time
	held     []int
}

// run is one chaos run's state.
type run struct {
	o        *Options
	id       string
	log      *slog.Logger
	began    time.Time
	c        *cluster
	w        *worker
	queue    string
	category string
	total    int
	accepted []atomic.Bool
	// answered is, per job, the id its enqueue was answered (0: none).
	answered []atomic.Int64
	// pushedAt is, per job, when its enqueue was sent (UnixNano; 0: not
	// yet), kept for a soak's latency.
	pushedAt []atomic.Int64

	mu      sync.Mutex
	enqErrs map[string]int
	// refusedNoRetryAfter counts enqueues answered 5xx without Retry-After.
	refusedNoRetryAfter int
	kills               []*killRecord
	skipped             int
	stops               []*stopRecord
	dbFaults            []*dbFaultRecord
	bg                  sync.WaitGroup // SIGCONTs and replacements under way
	startErrs           []error
}

// Run performs a chaos run and returns its report. A returned error means
// the run could not be carried out; a broken guarantee is in the Result
// (see Result.Failed).
func Run(ctx context.Context, o Options) (*Result, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	began := time.Now()
	id := randomID()
	r := &run{o: &o, id: id, log: o.Log, began: began, queue: "chaos_" + id, category: "chaos-" + id,
		total: int(o.Rate * o.Duration.Seconds()), enqErrs: map[string]int{}}
	r.accepted = make([]atomic.Bool, r.total)
	r.answered = make([]atomic.Int64, r.total)
	var err error
	if r.w, err = newWorker(r.total, o.JobTimeout, o.WorkTime, o.Sample > 0); err != nil {
		return nil, err
	}
	defer r.w.close()
	var st store.Store
	if o.Sample > 0 {
		r.pushedAt = make([]atomic.Int64, r.total)
		if st, err = backend.Open(o.DatabaseURL); err != nil {
			return nil, err
		}
		defer st.Close()
	}
	r.c = newCluster(r.o, id)
	defer r.c.close(15 * time.Second)

	for i := range o.Nodes {
		n, err := r.c.start(ctx, i)
		if err != nil {
			return nil, err
		}
		r.log.Info("node up", "node", n.id, "addr", n.addr, "i", i+1, "database", backend.Redact(n.dbURL))
	}
	api := r.c.pick().api
	if _, err := api.PutQueue(ctx, r.queue, &rowqtype.QueueRequest{MaxWorkers: &o.MaxWorkers}); err != nil {
		return nil, err
	}
	if _, err := api.PutRouting(ctx, r.category, r.queue); err != nil {
		return nil, err
	}
	if _, err := r.findLeader(ctx, 30*time.Second); err != nil {
		return nil, err
	}
	var sched *scheduleCheck
	if o.Schedule {
		if sched, err = startScheduleCheck(ctx, r); err != nil {
			return nil, err
		}
	}
	lctx, stopLocks := context.WithCancel(ctx)
	defer stopLocks()
	locks := startLockCheck(lctx, r)

	loadDone := make(chan struct{})
	loadBegan := time.Now()
	go func() {
		defer close(loadDone)
		r.load(ctx)
	}()
	sampled := make(chan []*Sample, 1)
	go func() {
		var s []*Sample
		if st != nil {
			s = r.sampleLoad(ctx, st, loadBegan, loadDone)
		}
		sampled <- s
	}()
	r.injectFaults(ctx, loadDone)
	<-loadDone
	samples := <-sampled
	r.log.Info("load done; draining", "jobs", r.total)
	stopLocks()
	lockRes := locks.wait()
	var schedRes *ScheduleResult
	if sched != nil {
		schedRes = sched.finish(ctx, r.killed())
	}
	r.bg.Wait()
	drained := r.drain(ctx)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	time.Sleep(o.Settle)

	res := r.report()
	res.Drained = drained
	if o.NodeLogLevel == "" || o.NodeLogLevel == "debug" || o.NodeLogLevel == "info" {
		res.Reaps = r.classifyReaps()
	} else {
		res.NotMeasured = append(res.NotMeasured, "reaps (--node-log-level above info: the nodes do not log them)")
	}
	res.Lock, res.Schedule, res.Samples = lockRes, schedRes, samples
	if res.Schedule != nil {
		_, res.Schedule.Jobs, _, _ = r.w.snapshot()
	}
	if o.LockClients == 0 {
		res.NotMeasured = append(res.NotMeasured, "lock (--lock-clients 0)")
	}
	if !o.Schedule {
		res.NotMeasured = append(res.NotMeasured, "schedule (--schedule=false)")
	}
	if n := r.c.pick(); n != nil {
		res.FailedLog = countFailed(ctx, n.api, r.queue)
	}
	res.ElapsedS = time.Since(began).Round(100 * time.Millisecond).Seconds()
	return res, errors.Join(r.startErrs...)
}

func randomID() string {
	b := make([]byte, 3)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// findLeader returns the up, running node that leads the load's queue,
// waiting up to timeout for one.
func (r *run) findLeader(ctx context.Context, timeout time.Duration) (*node, error) {
	deadline := time.Now().Add(timeout)
	for {
		if id := r.c.leader(ctx, r.queue); id != "" {
			if n := r.c.byID(id); n != nil && !r.c.isStopped(n) {
				return n, nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, fmt.Errorf("no running node led queue %s within %v", r.queue, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// load offers Rate jobs a second for Duration, each to the next node up.
func (r *run) load(ctx context.Context) {
	seqs := make(chan int)
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for seq := range seqs {
				r.push(ctx, seq)
			}
		})
	}
	start := time.Now()
	interval := float64(time.Second) / r.o.Rate
feed:
	for seq := range r.total {
		if d := time.Until(start.Add(time.Duration(float64(seq) * interval))); d > 0 {
			select {
			case <-time.After(d):
			case <-ctx.Done():
				break feed
			}
		}
		select {
		case seqs <- seq:
		case <-ctx.Done():
			break feed
		}
	}
	close(seqs)
	wg.Wait()
}

func (r *run) push(ctx context.Context, seq int) {
	n := r.c.pick()
	if n == nil {
		r.countEnqErr("no_node")
		return
	}
	if r.pushedAt != nil {
		r.pushedAt[seq].Store(time.Now().UnixNano())
	}
	timeout := int(r.o.JobTimeout / time.Second)
	// The seq is the job's token, unique in the run: the worker matches
	// the id a delivery carries with the id answered for the seq.
	req := &rowqtype.JobRequest{URL: r.w.url + "/job", Payload: json.RawMessage(`{"seq":` + strconv.Itoa(seq) + `}`),
		MaxRetries: new(100), RetryDelay: new(1), Timeout: &timeout}
	if r.o.Keys > 0 {
		req.ConcurrencyKey, req.ConcurrencyLimit = new("k"+strconv.Itoa(seq%r.o.Keys)), &r.o.KeyLimit
	}
	pushed, err := n.api.PushJob(ctx, r.category, req)
	if err != nil {
		var ce *client.Error
		var ne net.Error
		switch {
		case errors.As(err, &ce):
			r.countEnqErr(strconv.Itoa(ce.Status))
			if ce.Status >= 500 && ce.RetryAfter == 0 {
				r.mu.Lock()
				r.refusedNoRetryAfter++
				r.mu.Unlock()
			}
		case errors.As(err, &ne) && ne.Timeout():
			r.countEnqErr("timeout")
		default:
			r.countEnqErr("conn")
		}
		return
	}
	r.answered[seq].Store(pushed.ID)
	r.accepted[seq].Store(true)
}

func (r *run) countEnqErr(kind string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.enqErrs[kind]++
}

// injectFaults injects one fault every Every (counted from the end of the
// previous one), the kinds taking turns, until the load is done.
func (r *run) injectFaults(ctx context.Context, loadDone <-chan struct{}) {
	if len(r.o.Faults) == 0 {
		return
	}
	tick := time.NewTicker(r.o.Every)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-tick.C:
		case <-loadDone:
			return
		case <-ctx.Done():
			return
		}
		switch f := r.o.Faults[i%len(r.o.Faults)]; f {
		case FaultKill:
			r.kill(ctx)
		case FaultStop:
			r.stop(ctx)
		case FaultWorker:
			r.log.Info("worker fault", "for", r.o.WorkerFaultFor)
			r.w.faultFor(r.o.WorkerFaultFor)
		case FaultDB, FaultDBRestart:
			r.dbFault(ctx)
		}
		// The next fault comes Every after this one ended: a tick that
		// fell due while a slow fault (a database restart) ran would
		// otherwise inject the next at once, on top of it.
		tick.Reset(r.o.Every)
	}
}

// kill SIGKILLs the queue's leader and starts a replacement.
func (r *run) kill(ctx context.Context) {
	victim, err := r.findLeader(ctx, r.o.Every/2)
	if err != nil {
		r.mu.Lock()
		r.skipped++
		r.mu.Unlock()
		r.log.Warn("kill skipped: no running leader", "err", err)
		return
	}
	held := r.grabbedBy(ctx, victim.id)
	k := &killRecord{node: victim.id, at: time.Now(), held: held}
	if err := r.c.kill(victim); err != nil {
		r.log.Warn("kill", "node", victim.id, "err", err)
	}
	r.mu.Lock()
	r.kills = append(r.kills, k)
	r.mu.Unlock()
	r.log.Info("killed the leader", "node", victim.id, "held", len(held))
	r.replace(ctx, victim.slot)
}

// killed returns the ids of the nodes killed so far.
func (r *run) killed() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := make([]string, len(r.kills))
	for i, k := range r.kills {
		ids[i] = k.node
	}
	return ids
}

// replace starts a node in slot in the background, so that Nodes stay up,
// each on its database URL.
func (r *run) replace(ctx context.Context, slot int) {
	r.bg.Go(func() {
		n, err := r.c.start(ctx, slot)
		if err != nil {
			r.mu.Lock()
			r.startErrs = append(r.startErrs, err)
			r.mu.Unlock()
			return
		}
		r.log.Info("replacement up", "node", n.id)
	})
}

// grabbedBy lists the load's jobs the node id holds, asking another node.
func (r *run) grabbedBy(ctx context.Context, id string) []int {
	var ask *node
	for range r.o.Nodes {
		if n := r.c.pick(); n != nil && n.id != id {
			ask = n
			break
		}
	}
	if ask == nil {
		return nil
	}
	var held []int
	opts := &client.ListOptions{Limit: 1000}
	for range 20 {
		page, err := ask.api.ListJobs(ctx, r.queue, client.JobsGrabbed, opts)
		if err != nil {
			return held
		}
		for _, j := range page.Jobs {
			var p struct {
				Seq int `json:"seq"`
			}
			if j.GrabbedBy == id && json.Unmarshal(j.Payload, &p) == nil {
				held = append(held, p.Seq)
			}
		}
		if page.NextCursor == "" {
			break
		}
		opts.Cursor = page.NextCursor
	}
	return held
}

// stop SIGSTOPs the queue's leader and SIGCONTs it StopFor later.
func (r *run) stop(ctx context.Context) {
	victim, err := r.findLeader(ctx, r.o.Every/2)
	if err != nil {
		r.log.Warn("stop skipped: no running leader", "err", err)
		return
	}
	held := r.grabbedBy(ctx, victim.id)
	s := &stopRecord{node: victim.id, at: time.Now(), held: held}
	if err := r.c.freeze(victim, true); err != nil {
		r.log.Warn("SIGSTOP", "node", victim.id, "err", err)
		return
	}
	r.mu.Lock()
	r.stops = append(r.stops, s)
	r.mu.Unlock()
	r.log.Info("stopped the leader", "node", victim.id, "for", r.o.StopFor)
	r.bg.Go(func() {
		select {
		case <-time.After(r.o.StopFor):
		case <-ctx.Done():
		}
		r.mu.Lock()
		s.cont = time.Now()
		r.mu.Unlock()
		if err := r.c.freeze(victim, false); err != nil {
			r.log.Warn("SIGCONT", "node", victim.id, "err", err)
		}
		r.log.Info("continued", "node", victim.id)
	})
}

// drain waits until every accepted job was answered success and the
// queue holds no job, up to DrainTimeout.
func (r *run) drain(ctx context.Context) bool {
	deadline := time.Now().Add(r.o.DrainTimeout)
	for ctx.Err() == nil {
		missing := 0
		for seq := range r.total {
			if r.accepted[seq].Load() && !r.w.succeeded(seq) {
				missing++
			}
		}
		if missing == 0 && r.queueEmpty(ctx) {
			return true
		}
		if time.Now().After(deadline) {
			r.log.Warn("drain timed out", "accepted_not_delivered", missing)
			return false
		}
		time.Sleep(200 * time.Millisecond)
	}
	return false
}

func (r *run) queueEmpty(ctx context.Context) bool {
	n := r.c.pick()
	if n == nil {
		return false
	}
	for _, kind := range []string{client.JobsWaiting, client.JobsDeferred, client.JobsGrabbed} {
		page, err := n.api.ListJobs(ctx, r.queue, kind, &client.ListOptions{Limit: 1})
		if err != nil || len(page.Jobs) > 0 {
			return false
		}
	}
	return true
}

func countFailed(ctx context.Context, api *client.Client, queue string) int {
	total := 0
	opts := &client.ListOptions{Limit: 1000}
	for range 100 {
		page, err := api.FailedJobs(ctx, queue, opts)
		if err != nil {
			return total
		}
		total += len(page.FailedJobs)
		if page.NextCursor == "" {
			break
		}
		opts.Cursor = page.NextCursor
	}
	return total
}

// DefaultDir makes a temporary directory for a run's logs and database.
func DefaultDir() (string, error) {
	return os.MkdirTemp("", "rowq-chaos-")
}

// SQLiteURL is the URL of a fresh SQLite file in dir.
func SQLiteURL(dir string) string { return "sqlite://" + filepath.Join(dir, "chaos.db") }

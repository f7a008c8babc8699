// Package stats counts what happens to each queue on this node and adds
// the counts to the database about once a second, so that the statistics
// the API reports are true across every node sharing the database and
// survive restarts, without a database write per job: each node adds its
// deltas to its own row per queue (store.StatsStore), and a read sums the
// rows.
package stats

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/rowq/rowq/internal/store"
)

// Outcome is how a delivery ended, as recorded.
type Outcome int

// Outcomes of a delivery.
const (
	Success          Outcome = iota // the job is done
	Failure                         // failed; it will be retried
	PermanentFailure                // failed; moved to the failure log
)

// Timing of the recorder.
const (
	// RateWindow is the span over which pushes_per_second and
	// pops_per_second are averaged.
	RateWindow = 5 * time.Second
	// Fresh is how recently a node must have written its row for its busy
	// workers and rates to count.
	Fresh = 5 * time.Second
	// foldEvery and foldAfter: rows of nodes gone for foldAfter are folded
	// into one row per queue, checked every foldEvery.
	foldEvery = time.Minute
	foldAfter = time.Hour
)

// Config configures a Recorder.
type Config struct {
	Store  store.StatsStore
	Logger *slog.Logger
	Node   string
	// Interval is how often counts are written (1s).
	Interval time.Duration
}

// Recorder counts in memory and writes the counts to the store every
// Interval. Its counting methods are safe for concurrent use and do
// nothing on a nil Recorder.
type Recorder struct {
	cfg Config
	log *slog.Logger

	// writing is held by Flush (write) and by StatsGet (read), so that a
	// read sees each count either in the database or in pending, never
	// in both or neither.
	writing   sync.RWMutex
	mu        sync.Mutex
	pending   map[string]*counts // since the last write
	busy      map[string]int     // deliveries in flight
	history   []sample           // recent writes, for rates
	lastGauge map[string]bool    // queues whose last written gauges were not zero

	startOnce, stopOnce sync.Once
	stop, done          chan struct{}
}

type counts struct {
	store.StatsCounters
	elapsed time.Duration // ElapsedMs is filled from it when written
	wait    time.Duration // WaitMs likewise
}

// sample is what one write covered, for rates.
type sample struct {
	from, to time.Time
	pushes   map[string]int64
	pops     map[string]int64
}

// New returns a Recorder; Start runs its writer.
func New(cfg Config) *Recorder {
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Recorder{
		cfg: cfg, log: cfg.Logger,
		pending: map[string]*counts{}, busy: map[string]int{}, lastGauge: map[string]bool{},
		stop: make(chan struct{}), done: make(chan struct{}),
	}
}

func (r *Recorder) add(queue string, f func(c *counts)) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.pending[queue]
	if c == nil {
		c = &counts{}
		r.pending[queue] = c
	}
	f(c)
}

// Pushed counts n jobs accepted into queue.
func (r *Recorder) Pushed(queue string, n int) {
	r.add(queue, func(c *counts) { c.Pushes += int64(n) })
}

// Popped counts n jobs grabbed from queue for delivery.
func (r *Recorder) Popped(queue string, n int) {
	r.add(queue, func(c *counts) { c.Pops += int64(n) })
}

// Grabbed counts the jobs grabbed from queue for delivery at now (as
// Popped) and how long each had waited since it was due: the
// enqueue→delivery latency. The wait is the node's clock against the
// job's next_try, which the database's clock set: a skew between the two
// shifts it, and a negative wait counts as none.
func (r *Recorder) Grabbed(queue string, jobs []*store.Job, now time.Time) {
	if r == nil || len(jobs) == 0 {
		return
	}
	var wait time.Duration
	for _, j := range jobs {
		wait += max(now.Sub(j.NextTry), 0)
	}
	r.add(queue, func(c *counts) {
		c.Pops += int64(len(jobs))
		c.wait += wait
	})
}

// Delivered counts a delivery whose outcome was recorded, and the time it
// took.
func (r *Recorder) Delivered(queue string, o Outcome, elapsed time.Duration) {
	r.add(queue, func(c *counts) {
		c.elapsed += elapsed
		switch o {
		case Success:
			c.Successes++
			c.Completes++
		case Failure:
			c.Failures++
		case PermanentFailure:
			c.Failures++
			c.PermanentFailures++
			c.Completes++
		}
	})
}

// Cancelled counts a job cancelled through this node.
func (r *Recorder) Cancelled(queue string) {
	r.add(queue, func(c *counts) { c.Cancels++ })
}

// Busy adds delta (+1 or -1) to the deliveries in flight for queue.
func (r *Recorder) Busy(queue string, delta int) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.busy[queue] += delta
	if r.busy[queue] == 0 {
		delete(r.busy, queue)
	}
}

// Start starts writing counts every Interval.
func (r *Recorder) Start(context.Context) error {
	if r == nil {
		return nil
	}
	r.startOnce.Do(func() { go r.loop() })
	return nil
}

// Stop stops the writer and writes what is left. It is idempotent and safe
// if Start was never called.
func (r *Recorder) Stop(ctx context.Context) error {
	if r == nil {
		return nil
	}
	var err error
	r.stopOnce.Do(func() {
		close(r.stop)
		r.startOnce.Do(func() { close(r.done) })
		<-r.done
		// The last counts get a budget of their own: a node's stop may
		// have spent ctx on its deliveries.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err = r.Flush(ctx); err != nil {
			err = fmt.Errorf("write queue stats at shutdown: %w", err)
		}
	})
	return err
}

func (r *Recorder) loop() {
	defer close(r.done)
	t := time.NewTicker(r.cfg.Interval)
	defer t.Stop()
	lastFold := time.Now()
	failing := false
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := r.Flush(ctx)
		if err == nil && time.Since(lastFold) >= foldEvery {
			lastFold = time.Now()
			var n int64
			if n, err = r.cfg.Store.StatsFold(ctx, &store.StatsFoldParams{OlderThan: foldAfter}); n > 0 {
				r.log.Info("folded queue stats of vanished nodes", "rows", n)
			}
		}
		cancel()
		switch {
		case err != nil && !failing:
			failing = true
			r.log.Warn("write queue stats failed; counts are kept until it works", "err", err)
		case err == nil && failing:
			failing = false
			r.log.Info("writing queue stats again")
		}
	}
}

// Flush writes the counts since the last write, with the current busy
// workers and rates. If the write fails, the counts are kept for the next.
func (r *Recorder) Flush(ctx context.Context) error {
	r.writing.Lock()
	defer r.writing.Unlock()
	now := time.Now()
	r.mu.Lock()
	pending := r.pending
	r.pending = map[string]*counts{}
	from := now.Add(-r.cfg.Interval)
	if n := len(r.history); n > 0 {
		from = r.history[n-1].to
	}
	s := sample{from: from, to: now, pushes: map[string]int64{}, pops: map[string]int64{}}
	for q, c := range pending {
		s.pushes[q], s.pops[q] = c.Pushes, c.Pops
	}
	r.history = append(r.history, s)
	for len(r.history) > 1 && now.Sub(r.history[0].to) > RateWindow {
		r.history = r.history[1:]
	}
	var deltas []*store.StatsDelta
	queues := map[string]bool{}
	for q := range pending {
		queues[q] = true
	}
	for q := range r.busy {
		queues[q] = true
	}
	for q := range r.lastGauge {
		queues[q] = true
	}
	span := now.Sub(r.history[0].from).Seconds()
	wrote := map[string][2]time.Duration{} // elapsed and wait time written, per queue
	for q := range queues {
		d := &store.StatsDelta{Queue: q, BusyWorkers: r.busy[q]}
		if c := pending[q]; c != nil {
			d.StatsCounters = c.StatsCounters
			d.ElapsedMs, d.WaitMs = c.elapsed.Milliseconds(), c.wait.Milliseconds()
			wrote[q] = [2]time.Duration{time.Duration(d.ElapsedMs) * time.Millisecond, time.Duration(d.WaitMs) * time.Millisecond}
		}
		var pushes, pops int64
		for _, h := range r.history {
			pushes += h.pushes[q]
			pops += h.pops[q]
		}
		if span > 0 {
			d.PushesPerSecond, d.PopsPerSecond = float64(pushes)/span, float64(pops)/span
		}
		gauge := d.BusyWorkers != 0 || d.PushesPerSecond != 0 || d.PopsPerSecond != 0
		if d.StatsCounters.IsZero() && !gauge && !r.lastGauge[q] {
			continue
		}
		if gauge {
			r.lastGauge[q] = true
		} else {
			delete(r.lastGauge, q)
		}
		deltas = append(deltas, d)
	}
	r.mu.Unlock()
	if len(deltas) == 0 {
		return nil
	}
	err := r.cfg.Store.StatsAdd(ctx, &store.StatsAddParams{Node: r.cfg.Node, Deltas: deltas})
	r.mu.Lock()
	defer r.mu.Unlock()
	for q, c := range pending {
		if err == nil {
			// Written; only the sub-millisecond rests of the times are left.
			c.StatsCounters = store.StatsCounters{}
			c.elapsed -= wrote[q][0]
			c.wait -= wrote[q][1]
		}
		if c.StatsCounters.IsZero() && c.elapsed == 0 && c.wait == 0 {
			continue
		}
		// Not written (or a rest of elapsed time): give it to the next write.
		cur := r.pending[q]
		if cur == nil {
			r.pending[q] = c
			continue
		}
		cur.Add(&c.StatsCounters)
		cur.elapsed += c.elapsed
		cur.wait += c.wait
	}
	if err != nil {
		// Gauges were not written either: write them next time.
		for q := range queues {
			r.lastGauge[q] = true
		}
	}
	return err
}

// ReadOwnWrites returns s whose StatsGet adds this node's counts not yet
// written to the database, so that a client reading statistics from the
// node it enqueued through sees its jobs at once; other nodes' counts
// show within their Interval.
func (r *Recorder) ReadOwnWrites(s store.Store) store.Store {
	if r == nil {
		return s
	}
	return ownWrites{s, r}
}

type ownWrites struct {
	store.Store
	r *Recorder
}

func (s ownWrites) StatsGet(ctx context.Context, p *store.StatsGetParams) (map[string]*store.QueueStats, error) {
	s.r.writing.RLock()
	defer s.r.writing.RUnlock()
	m, err := s.Store.StatsGet(ctx, p)
	if err != nil {
		return nil, err
	}
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	// Only the queues read get this node's counts: those p names (or
	// every queue) that exist.
	for q, c := range s.r.pending {
		if qs := m[q]; qs != nil {
			qs.Add(&c.StatsCounters)
			qs.ElapsedMs += c.elapsed.Milliseconds()
			qs.WaitMs += c.wait.Milliseconds()
		}
	}
	return m, nil
}

package stats

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/rowq/rowq/internal/store"
)

// HistoryConfig configures a History.
type HistoryConfig struct {
	Store  store.StatsStore
	Logger *slog.Logger
	// Every is how often the counters are read (1 min).
	Every time.Duration
	// Keep is how far back the history goes (1 h).
	Keep time.Duration
	// Now is the clock of the samples (time.Now if nil).
	Now func() time.Time
}

// History keeps the last hour of every queue's counters in memory, for
// the dashboard's charts. Once a minute it reads the counters every node
// has written (the same read as GET /queues/stats, summed over the
// nodes) and keeps them; a point of the history is the difference of two
// reads. It costs one read of queue_stats a minute per node and nothing
// on the delivery path; a node that starts has no history yet, and fills
// the hour in an hour.
type History struct {
	cfg HistoryConfig

	mu      sync.Mutex
	samples []historySample // oldest first

	startOnce, stopOnce sync.Once
	stop, done          chan struct{}
}

type historySample struct {
	at     time.Time
	counts map[string]store.StatsCounters
}

// Point is what happened to a queue between two reads of its counters:
// the counts added in the Span that ended At.
type Point struct {
	At   time.Time
	Span time.Duration
	store.StatsCounters
}

// NewHistory returns a History; Start runs its reads.
func NewHistory(cfg HistoryConfig) *History {
	if cfg.Every <= 0 {
		cfg.Every = time.Minute
	}
	if cfg.Keep <= 0 {
		cfg.Keep = time.Hour
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &History{cfg: cfg, stop: make(chan struct{}), done: make(chan struct{})}
}

// Start reads the counters now and then every Every.
func (h *History) Start(ctx context.Context) error {
	h.startOnce.Do(func() {
		if err := h.Sample(ctx); err != nil {
			h.cfg.Logger.Warn("read queue stats for the dashboard's history", "err", err)
		}
		go h.loop()
	})
	return nil
}

// Stop stops the reads. It is idempotent and safe if Start was never
// called.
func (h *History) Stop(context.Context) error {
	h.stopOnce.Do(func() {
		close(h.stop)
		h.startOnce.Do(func() { close(h.done) })
		<-h.done
	})
	return nil
}

func (h *History) loop() {
	defer close(h.done)
	t := time.NewTicker(h.cfg.Every)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-h.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := h.Sample(ctx)
		cancel()
		switch {
		case err != nil && !failing:
			failing = true
			h.cfg.Logger.Warn("read queue stats for the dashboard's history; the charts have a gap until it works", "err", err)
		case err == nil && failing:
			failing = false
			h.cfg.Logger.Info("reading queue stats for the dashboard's history again")
		}
	}
}

// Sample reads every queue's counters and keeps them, dropping the reads
// older than Keep (but the one that starts the window).
func (h *History) Sample(ctx context.Context) error {
	st, err := h.cfg.Store.StatsGet(ctx, &store.StatsGetParams{Fresh: Fresh})
	if err != nil {
		return err
	}
	s := historySample{at: h.cfg.Now(), counts: make(map[string]store.StatsCounters, len(st))}
	for q, qs := range st {
		s.counts[q] = qs.StatsCounters
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.samples = append(h.samples, s)
	for len(h.samples) > 2 && s.at.Sub(h.samples[1].at) >= h.cfg.Keep {
		h.samples = h.samples[1:]
	}
	return nil
}

// Points returns the queue's history, oldest first: one point per two
// consecutive reads within Keep, and a last one from the last read to
// now, of the counters current that the caller read now (the minute so
// far; none if now is not after the last read). A counter that went down
// (the queue was deleted and made again) counts as zero for that point.
func (h *History) Points(queue string, now time.Time, current store.StatsCounters) []Point {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []Point
	for i := 1; i < len(h.samples); i++ {
		a, b := h.samples[i-1], h.samples[i]
		out = append(out, point(a.counts[queue], b.counts[queue], a.at, b.at))
	}
	if n := len(h.samples); n > 0 && now.After(h.samples[n-1].at) {
		last := h.samples[n-1]
		out = append(out, point(last.counts[queue], current, last.at, now))
	}
	return out
}

// point is what the counters added from a (at from) to b (at to).
func point(a, b store.StatsCounters, from, to time.Time) Point {
	return Point{At: to, Span: to.Sub(from), StatsCounters: store.StatsCounters{
		Pushes:            delta(a.Pushes, b.Pushes),
		Pops:              delta(a.Pops, b.Pops),
		Successes:         delta(a.Successes, b.Successes),
		Failures:          delta(a.Failures, b.Failures),
		PermanentFailures: delta(a.PermanentFailures, b.PermanentFailures),
		Completes:         delta(a.Completes, b.Completes),
		ElapsedMs:         delta(a.ElapsedMs, b.ElapsedMs),
		WaitMs:            delta(a.WaitMs, b.WaitMs),
	}}
}

func delta(a, b int64) int64 { return max(b-a, 0) }

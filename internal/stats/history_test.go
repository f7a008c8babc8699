package stats_test

import (
	"context"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/stats"
	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
)

// TestHistory_Points reads the counters every node wrote, a minute apart
// on its clock, and answers the differences: what each minute added, a
// last point of the minute so far, nothing older than an hour, and no
// negative counts when a queue is made again. On every database.
func TestHistory_Points(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		ctx := context.Background()
		st := dbtest.Open(t, dialect)
		if _, err := st.QueuePut(ctx, &store.Queue{Name: "q", PollingInterval: 100, MaxWorkers: 4}); err != nil {
			t.Fatal(err)
		}
		now := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
		h := stats.NewHistory(stats.HistoryConfig{Store: st, Now: func() time.Time { return now }})
		add := func(node string, c store.StatsCounters) {
			t.Helper()
			if err := st.StatsAdd(ctx, &store.StatsAddParams{Node: node, Deltas: []*store.StatsDelta{{Queue: "q", StatsCounters: c}}}); err != nil {
				t.Fatal(err)
			}
		}
		sample := func() {
			t.Helper()
			if err := h.Sample(ctx); err != nil {
				t.Fatal(err)
			}
			now = now.Add(time.Minute)
		}
		add("n1", store.StatsCounters{Completes: 100, Pops: 100, WaitMs: 1000}) // before the first read: not a point
		sample()
		add("n1", store.StatsCounters{Completes: 30, Failures: 2, Pops: 32, WaitMs: 320})
		add("n2", store.StatsCounters{Completes: 10, Pops: 10, WaitMs: 1000})
		sample()
		sample() // a quiet minute
		pts := h.Points("q", now.Add(-30*time.Second), store.StatsCounters{Completes: 145, Pops: 143, WaitMs: 2320})
		if len(pts) != 3 {
			t.Fatalf("%d points, want 2 minutes and the half minute so far: %+v", len(pts), pts)
		}
		if p := pts[0]; p.Completes != 40 || p.Failures != 2 || p.Pops != 42 || p.WaitMs != 1320 || p.Span != time.Minute {
			t.Errorf("first minute: %+v, want both nodes' 40 completes, 2 failures, 42 pops, 1320 ms waited", p)
		}
		if p := pts[1]; !p.IsZero() || p.At != now.Add(-time.Minute) {
			t.Errorf("quiet minute: %+v", p)
		}
		if p := pts[2]; p.Completes != 5 || p.Pops != 1 || p.Span != 30*time.Second {
			t.Errorf("the minute so far: %+v, want 5 completes and 1 pop in 30 s", p)
		}
		if p := h.Points("q", now.Add(-time.Hour), store.StatsCounters{}); len(p) != 2 {
			t.Errorf("with now before the last read: %d points, want the 2 minutes only", len(p))
		}
		if p := h.Points("q", now, store.StatsCounters{})[2]; !p.IsZero() {
			t.Errorf("counters that went down count as zero, got %+v", p)
		}
		for range 70 {
			sample()
		}
		if pts := h.Points("q", now, store.StatsCounters{}); len(pts) < 60 || len(pts) > 62 || now.Sub(pts[0].At) > time.Hour+time.Minute {
			t.Errorf("after 70 more minutes: %d points from %v before now, want an hour's", len(pts), now.Sub(pts[0].At))
		}
	})
}

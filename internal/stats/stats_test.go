package stats_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/stats"
	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/sqlite"
)

// TestRecorder_KeepsCountsUntilWritten counts while the database cannot
// take them (its schema is not there yet), then writes them all once it
// can: a failed write loses nothing.
func TestRecorder_KeepsCountsUntilWritten(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "rowq.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	r := stats.New(stats.Config{Store: st, Node: "n1"})
	r.Pushed("q", 3)
	r.Popped("q", 1)
	// Grabbed at 10:00:05: one job due at 10:00:01.5 (3.5 s waited),
	// one due later than that (a node's clock behind: none).
	at := time.Date(2026, 11, 25, 10, 0, 5, 0, time.UTC)
	r.Grabbed("q", []*store.Job{{NextTry: at.Add(-3500 * time.Millisecond)}, {NextTry: at.Add(time.Second)}}, at)
	r.Busy("q", 1)
	r.Delivered("q", stats.Success, 1500*time.Microsecond)
	r.Delivered("q", stats.Failure, time.Millisecond)
	r.Delivered("q", stats.PermanentFailure, 700*time.Microsecond)
	if err := r.Flush(ctx); err == nil {
		t.Fatal("Flush to a database without the schema succeeded")
	}
	r.Pushed("q", 1)
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := st.QueuePut(ctx, &store.Queue{Name: "q", PollingInterval: 100, MaxWorkers: 4}); err != nil {
		t.Fatal(err)
	}
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := st.StatsGet(ctx, &store.StatsGetParams{Queue: "q", Fresh: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	// 3.2 ms of deliveries: 3 ms written, the rest kept for later.
	want := store.StatsCounters{Pushes: 4, Pops: 3, Successes: 1, Failures: 2, PermanentFailures: 1, Completes: 2, ElapsedMs: 3, WaitMs: 3500}
	if q := got["q"]; q.StatsCounters != want || q.BusyWorkers != 1 || q.PushesPerSecond <= 0 || q.PopsPerSecond <= 0 {
		t.Fatalf("stats = %+v, want counters %+v, 1 busy worker and rates", q, want)
	}
	// Nothing new: nothing is added twice; the gauges go back to zero.
	r.Busy("q", -1)
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	got, err = st.StatsGet(ctx, &store.StatsGetParams{Queue: "q", Fresh: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if q := got["q"]; q.StatsCounters != want || q.BusyWorkers != 0 {
		t.Fatalf("after a second flush: %+v", q)
	}
	// A nil Recorder counts nothing and does not fail.
	var none *stats.Recorder
	none.Pushed("q", 1)
	none.Busy("q", 1)
	none.Stop(ctx)
}

package dispatch

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/testworker"
)

// pruneCounter counts the prune transactions a store runs.
type pruneCounter struct {
	store.Store
	calls int
}

func (p *pruneCounter) FinishedPrune(ctx context.Context, fp *store.FinishedPruneParams) (int64, error) {
	p.calls++
	return p.Store.FinishedPrune(ctx, fp)
}

// TestPruneFinished_OldRowsInBatches: the leader's prune deletes the
// queue's history older than keep_finished in batches of pruneBatch, one
// transaction each, until a batch comes back short, and leaves what is
// younger and other queues' rows.
func TestPruneFinished_OldRowsInBatches(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		st := dbtest.Open(t, dialect)
		ctx := t.Context()
		finish := func(queue string, n int) {
			t.Helper()
			if _, err := st.QueuePut(ctx, &store.Queue{Name: queue, PollingInterval: 200, MaxWorkers: 20, KeepFinished: 2}); err != nil {
				t.Fatal(err)
			}
			ps := make([]*store.JobInsertParams, n)
			for i := range ps {
				ps[i] = &store.JobInsertParams{Queue: queue, Category: "c", URL: "http://w/x"}
			}
			if _, err := st.JobsInsert(ctx, ps); err != nil {
				t.Fatal(err)
			}
			for {
				jobs, err := st.JobsGrab(ctx, &store.JobsGrabParams{Queue: queue, Node: "n1", Limit: 500, Lease: time.Minute})
				if err != nil {
					t.Fatal(err)
				}
				if len(jobs) == 0 {
					return
				}
				p := &store.JobsCompleteParams{Node: "n1"}
				for _, j := range jobs {
					p.IDs = append(p.IDs, j.ID)
					p.Keep = append(p.Keep, store.FinishNote{ID: j.ID})
				}
				if _, err := st.JobsComplete(ctx, p); err != nil {
					t.Fatal(err)
				}
			}
		}
		finish("q", 2*pruneBatch+500)
		finish("other", 10)
		count := func(queue string) int {
			fs, err := st.FinishedList(ctx, &store.FinishedListParams{Queue: queue, Limit: 10 * pruneBatch})
			if err != nil {
				t.Fatal(err)
			}
			return len(fs)
		}
		ps := &pruneCounter{Store: st}
		d := New(Config{Store: ps, Node: "n1"})
		t.Cleanup(func() { d.Stop(context.Background()) })
		q := &store.Queue{Name: "q", KeepFinished: 2}
		// Rows younger than keep_finished stay: none is an hour old (the
		// rows may take longer than 2 s to write on a loaded machine).
		if n, err := d.pruneQueue(&store.Queue{Name: "q", KeepFinished: 3600}); err != nil || n != 0 || ps.calls != 1 {
			t.Fatalf("prune of young rows = %d, %v after %d calls; want 0 in 1 call", n, err, ps.calls)
		}
		// Once every row is older than keep_finished, by the database's
		// clock: three batches, one prune.
		newest, err := st.FinishedList(ctx, &store.FinishedListParams{Queue: "q", Limit: 1})
		if err != nil || len(newest) != 1 {
			t.Fatalf("newest row: %v, %v", newest, err)
		}
		testworker.WaitFor(t, 60*time.Second, "every row older than keep_finished", func() bool {
			now, err := st.Now(ctx)
			return err == nil && now.Sub(newest[0].FinishedAt) > 2*time.Second+100*time.Millisecond
		})
		ps.calls = 0
		n, err := d.pruneQueue(q)
		if err != nil || n != 2*pruneBatch+500 || ps.calls != 3 || count("q") != 0 || count("other") != 10 {
			t.Fatalf("prune = %d, %v in %d calls, %d rows left of q, %d of other; want %d in 3 calls, 0 and 10",
				n, err, ps.calls, count("q"), count("other"), 2*pruneBatch+500)
		}
	})
}

// blockingPrune holds every FinishedPrune until release is closed.
type blockingPrune struct {
	store.Store
	entered chan struct{}
	release chan struct{}
	calls   atomic.Int32
}

func (b *blockingPrune) FinishedPrune(context.Context, *store.FinishedPruneParams) (int64, error) {
	b.calls.Add(1)
	b.entered <- struct{}{}
	<-b.release
	return 7, nil
}

// TestPruneLater_InTheBackgroundOneAtATime: the leadership loop starts the
// prune and goes on (a prune of a large history takes tens of seconds);
// while one runs, the next minute's does not start a second; Stop waits
// for it. The rows pruned are told to Config.Pruned (/metrics).
func TestPruneLater_InTheBackgroundOneAtATime(t *testing.T) {
	st := &blockingPrune{Store: dbtest.Open(t, "sqlite"), entered: make(chan struct{}, 1), release: make(chan struct{})}
	var told atomic.Int64
	d := New(Config{Store: st, Node: "n1", Pruned: func(n int64) { told.Add(n) }})
	r := &runner{}
	r.settings.Store(&store.Queue{Name: "q", KeepFinished: 60})
	d.runners["q"] = r
	d.pruneLater()
	select {
	case <-st.entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the prune did not start")
	}
	d.pruneLater() // the first still runs
	close(st.release)
	testworker.WaitFor(t, 30*time.Second, "the prune done", func() bool { return !d.pruneBusy.Load() })
	d.pruning.Wait()
	if got := st.calls.Load(); got != 1 {
		t.Fatalf("%d prunes ran, want 1", got)
	}
	if got := told.Load(); got != 7 {
		t.Fatalf("Pruned told %d rows, want the 7 pruned", got)
	}
	delete(d.runners, "q")
	d.Stop(context.Background())
}

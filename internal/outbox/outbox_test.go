package outbox_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/enqueue"
	"github.com/rowq/rowq/internal/outbox"
	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/testworker"
)

// storeNodes reads the live nodes from the store at every ask, as a
// dispatcher's leadership cycle would once a refresh interval.
type storeNodes struct{ st store.Store }

func (n storeNodes) LiveNodes() *store.Cluster {
	c, err := n.st.NodesLive(context.Background())
	if err != nil {
		return nil
	}
	return c
}

// setup starts a mover for node on st, stopped when the test ends.
func setup(t *testing.T, st store.Store, node string) *outbox.Mover {
	t.Helper()
	enq := enqueue.New(enqueue.Config{Store: st})
	t.Cleanup(func() { enq.Stop(context.Background()) })
	m := outbox.New(outbox.Config{Store: st, Enqueue: enq, Node: node, Nodes: storeNodes{st}})
	if err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Stop(context.Background()) })
	return m
}

// TestMover_OneMovesAndStopHandsOver starts two movers on one database,
// their nodes registered as their dispatchers register them: the lowest
// live node moves, the other waits; when its registration is deleted (as a
// clean stop does), the other takes over within about a second (its next
// look).
func TestMover_OneMovesAndStopHandsOver(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		st := dbtest.Open(t, dialect)
		ctx := t.Context()
		if _, err := st.QueuePut(ctx, &store.Queue{Name: "q", PollingInterval: 200, MaxWorkers: 1}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.RoutingPut(ctx, &store.Routing{JobCategory: "cat", QueueName: "q"}); err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{"node-a", "node-b"} {
			if err := st.NodeHeartbeat(ctx, &store.NodeHeartbeatParams{ID: n, Host: n, TTL: time.Minute}); err != nil {
				t.Fatal(err)
			}
		}
		first, second := setup(t, st, "node-a"), setup(t, st, "node-b")
		testworker.WaitFor(t, 5*time.Second, "node-a moving", first.Moving)
		time.Sleep(1500 * time.Millisecond) // more than one look of the other
		if second.Moving() {
			t.Fatal("node-b moves too, though node-a is live and lower")
		}
		url := "http://127.0.0.1:1/"
		if err := st.OutboxInsert(ctx, []*store.OutboxRow{{Category: "cat", URL: &url}}); err != nil {
			t.Fatal(err)
		}
		testworker.WaitFor(t, 5*time.Second, "the row moved", func() bool { return jobs(t, st) == 1 })

		stopped := time.Now()
		if err := first.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if first.Moving() {
			t.Fatal("node-a moves after its Stop")
		}
		if err := st.NodeDelete(ctx, "node-a"); err != nil {
			t.Fatal(err)
		}
		testworker.WaitFor(t, 2*time.Second, "the other mover taking over", second.Moving)
		t.Logf("stop → the other mover moves after %v", time.Since(stopped).Round(time.Millisecond))
		if err := st.OutboxInsert(ctx, []*store.OutboxRow{{Category: "cat", URL: &url}}); err != nil {
			t.Fatal(err)
		}
		testworker.WaitFor(t, 5*time.Second, "the second row moved", func() bool { return jobs(t, st) == 2 })
	})
}

func jobs(t *testing.T, st store.Store) int {
	t.Helper()
	js, err := st.JobsList(t.Context(), &store.JobsListParams{Queue: "q", Kind: store.JobsWaiting, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	return len(js)
}

// countingOutbox counts the probes (reads) of a real store's outbox.
type countingOutbox struct {
	store.Store
	reads atomic.Int64
}

func (c *countingOutbox) OutboxRead(ctx context.Context, limit int) ([]*store.OutboxRow, error) {
	c.reads.Add(1)
	return c.Store.OutboxRead(ctx, limit)
}

// TestMover_IdleProbesSlowly: where the store cannot announce inserts
// (MySQL/MariaDB, SQLite), an outbox that stays empty for IdleAfter is
// probed every IdlePoll instead of every PollInterval; a row moves at the
// next probe, and the probes speed up again.
func TestMover_IdleProbesSlowly(t *testing.T) {
	for _, dialect := range []string{"mysql", "sqlite"} {
		t.Run(dialect, func(t *testing.T) {
			st := &countingOutbox{Store: dbtest.Open(t, dialect)}
			ctx := t.Context()
			if _, err := st.QueuePut(ctx, &store.Queue{Name: "q", PollingInterval: 200, MaxWorkers: 1}); err != nil {
				t.Fatal(err)
			}
			if _, err := st.RoutingPut(ctx, &store.Routing{JobCategory: "cat", QueueName: "q"}); err != nil {
				t.Fatal(err)
			}
			if err := st.NodeHeartbeat(ctx, &store.NodeHeartbeatParams{ID: "n", Host: "n", TTL: time.Minute}); err != nil {
				t.Fatal(err)
			}
			enq := enqueue.New(enqueue.Config{Store: st})
			t.Cleanup(func() { enq.Stop(context.Background()) })
			m := outbox.New(outbox.Config{Store: st, Enqueue: enq, Node: "n", Nodes: storeNodes{st},
				PollInterval: 20 * time.Millisecond, IdleAfter: time.Second, IdlePoll: 400 * time.Millisecond})
			if err := m.Start(ctx); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { m.Stop(context.Background()) })
			testworker.WaitFor(t, 5*time.Second, "moving", m.Moving)
			probes := func(d time.Duration) int64 {
				before := st.reads.Load()
				time.Sleep(d)
				return st.reads.Load() - before
			}
			if n := probes(800 * time.Millisecond); n < 20 {
				t.Fatalf("fresh mover probed %d times in 800 ms, want about 40 (every 20 ms)", n)
			}
			time.Sleep(300 * time.Millisecond) // past IdleAfter
			if n := probes(2 * time.Second); n > 7 {
				t.Fatalf("idle mover probed %d times in 2 s, want about 5 (every 400 ms)", n)
			}
			url := "http://127.0.0.1:1/"
			if err := st.OutboxInsert(ctx, []*store.OutboxRow{{Category: "cat", URL: &url}}); err != nil {
				t.Fatal(err)
			}
			testworker.WaitFor(t, 2*time.Second, "the row moved", func() bool { return jobs(t, st) == 1 })
			if n := probes(500 * time.Millisecond); n < 10 {
				t.Fatalf("after a row the mover probed %d times in 500 ms, want about 25 (every 20 ms)", n)
			}
		})
	}
}

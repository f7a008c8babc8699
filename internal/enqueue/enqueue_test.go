package enqueue_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/dispatch"
	"github.com/rowq/rowq/internal/enqueue"
	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
)

// setup returns an enqueue service on st (no dispatcher: jobs wait),
// stopped when the test ends.
func setup(t *testing.T, st store.Store, cfg enqueue.Config) *enqueue.Service {
	t.Helper()
	cfg.Store = st
	s := enqueue.New(cfg)
	t.Cleanup(func() { s.Stop(context.Background()) })
	return s
}

func TestRoute(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		st := dbtest.Open(t, dialect)
		ctx := t.Context()
		for _, q := range []string{"q", "other", "fallback"} {
			if _, err := st.QueuePut(ctx, &store.Queue{Name: q, PollingInterval: 100, MaxWorkers: 1}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := st.RoutingPut(ctx, &store.Routing{JobCategory: "cat", QueueName: "q"}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.QueuePut(ctx, &store.Queue{Name: "pulled", PollingInterval: 100, MaxWorkers: 1, Delivery: store.DeliveryPull}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.RoutingPut(ctx, &store.Routing{JobCategory: "pc", QueueName: "pulled"}); err != nil {
			t.Fatal(err)
		}
		withDefault := setup(t, st, enqueue.Config{DefaultQueue: "fallback", RouteCacheTTL: time.Hour})
		pullDefault := setup(t, st, enqueue.Config{DefaultQueue: "pulled"})
		noDefault := setup(t, st, enqueue.Config{})

		for _, tc := range []struct {
			name      string
			s         *enqueue.Service
			category  string
			want      string
			wantQueue string // UnroutableError.Queue, when unroutable
			unroute   bool
			pull      bool
		}{
			{"routed", noDefault, "cat", "q", "", false, false},
			{"unrouted to the default queue", withDefault, "none", "fallback", "", false, false},
			{"unrouted without a default queue", noDefault, "none", "", "", true, false},
			{"routed to a pull queue", noDefault, "pc", "pulled", "", false, true},
			{"unrouted to a pull default queue", pullDefault, "none", "pulled", "", false, true},
		} {
			got, err := tc.s.Route(ctx, tc.category)
			var ue *enqueue.UnroutableError
			if tc.unroute {
				if !errors.As(err, &ue) || ue.Category != tc.category || ue.Queue != tc.wantQueue {
					t.Errorf("%s: Route(%q) = %+v, %v; want an UnroutableError for queue %q", tc.name, tc.category, got, err, tc.wantQueue)
				}
				continue
			}
			if err != nil || got.Queue != tc.want || got.Pull != tc.pull {
				t.Errorf("%s: Route(%q) = %+v, %v; want %q, pull %t", tc.name, tc.category, got, err, tc.want, tc.pull)
			}
		}

		// A change made through this node is seen at once, whatever the
		// cache's TTL; a routing to a queue that does not exist is refused.
		if got, err := withDefault.Route(ctx, "cat"); err != nil || got.Queue != "q" {
			t.Fatalf("Route(cat) = %+v, %v; want q", got, err)
		}
		if _, err := st.RoutingPut(ctx, &store.Routing{JobCategory: "cat", QueueName: "other"}); err != nil {
			t.Fatal(err)
		}
		withDefault.RoutesChanged()
		if got, err := withDefault.Route(ctx, "cat"); err != nil || got.Queue != "other" {
			t.Errorf("Route(cat) after RoutesChanged = %+v, %v; want other", got, err)
		}
		if _, err := st.QueueDelete(ctx, "other"); err != nil {
			t.Fatal(err)
		}
		withDefault.RoutesChanged()
		var ue *enqueue.UnroutableError
		if _, err := withDefault.Route(ctx, "cat"); !errors.As(err, &ue) || ue.Queue != "other" {
			t.Errorf("Route(cat) to a deleted queue: %v, want an UnroutableError naming queue other", err)
		}
	})
}

// TestPush_OneBadJobFailsOnlyItself pushes jobs concurrently, so that they
// share grouped commits, one of them with a payload the database refuses
// (not UTF-8): that job fails, every other one is stored. SQLite stores
// any bytes, so no job is bad there.
func TestPush_OneBadJobFailsOnlyItself(t *testing.T) {
	t.Parallel()
	for _, dialect := range []string{"mysql", "postgres"} {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			st := dbtest.Open(t, dialect)
			s := setup(t, st, enqueue.Config{})
			const n = 50
			bad := n / 2
			var wg sync.WaitGroup
			ids := make([]int64, n)
			errs := make([]error, n)
			for i := range n {
				p := &store.JobInsertParams{Queue: "q", Category: "c", URL: "http://worker.example/", Payload: json.RawMessage(`{"i":1}`)}
				if i == bad {
					p.Payload = json.RawMessage("\"\xff\xfe\"")
				}
				wg.Go(func() {
					res, err := s.Push(t.Context(), p)
					ids[i], errs[i] = res.ID, err
				})
			}
			wg.Wait()
			for i := range n {
				switch {
				case i == bad && errs[i] == nil:
					t.Errorf("the job whose payload is not UTF-8 was stored (id %d)", ids[i])
				case i != bad && errs[i] != nil:
					t.Errorf("job %d: %v", i, errs[i])
				case i != bad:
					if _, err := st.JobGet(t.Context(), "q", ids[i]); err != nil {
						t.Errorf("job %d (id %d) is not stored: %v", i, ids[i], err)
					}
				}
			}
		})
	}
}

// told records what the enqueue service tells the dispatcher.
type told struct {
	mu    sync.Mutex
	calls []string
}

func (d *told) Reserve(string) *dispatch.Handoff { return nil }
func (d *told) Wake(q string)                    { d.note("wake " + q) }
func (d *told) Later(q string)                   { d.note("later " + q) }
func (d *told) note(s string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls = append(d.calls, s)
}

// TestPushMany_WakesAndTellsOnce: a batch wakes each queue that got a job
// due now once, and tells each that got a job due later once, whatever
// their order: a job due later first does not leave a job due now to the
// prober's look.
func TestPushMany_WakesAndTellsOnce(t *testing.T) {
	t.Parallel()
	st := dbtest.Open(t, "sqlite")
	d := &told{}
	s := setup(t, st, enqueue.Config{Dispatcher: d})
	job := func(q string, after time.Duration) *store.JobInsertParams {
		return &store.JobInsertParams{Queue: q, Category: "c", URL: "http://127.0.0.1:1/", Payload: []byte(`{}`), Timeout: 5, RunAfter: after}
	}
	if _, err := s.PushMany(t.Context(), []*store.JobInsertParams{
		job("q", time.Minute), job("q", 0), job("q", 0), job("q", time.Hour), job("r", 0),
	}); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(d.calls, ", "), "later q, wake q, wake r"; got != want {
		t.Fatalf("told the dispatcher %q, want %q", got, want)
	}
}

package dispatch

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/testworker"
)

// localSessions is a store whose session locks other nodes cannot see, as
// on a Galera member (store.ErrLocalSession); once dead, the node it serves
// can no longer renew its registration, as if its process were gone.
type localSessions struct {
	store.Store
	dead atomic.Bool
}

func (s *localSessions) NodeSessionOpen(context.Context, string) (store.NodeSession, error) {
	return nil, store.ErrLocalSession
}

func (s *localSessions) NodeHeartbeat(ctx context.Context, p *store.NodeHeartbeatParams) error {
	if s.dead.Load() {
		return fmt.Errorf("%w: the node is dead", store.ErrUnavailable)
	}
	return s.Store.NodeHeartbeat(ctx, p)
}

// TestLease_DeadNodeTakenOverWithinTheLease: where sessions are local to a
// cluster member, a node keeps a lease; when it dies, a steady peer reaps
// it once the lease expired, claims its queues at once and rescues its
// grabs, however long their own lease, and a live node is never reaped.
func TestLease_DeadNodeTakenOverWithinTheLease(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		base := dbtest.Open(t, dialect)
		sa, sb := &localSessions{Store: base}, &localSessions{Store: base}
		putQueues(t, base, 4)
		w := testworker.New(t, nil)
		// A lease of 3 s, not the default 1.5 s: a renewal that a loaded
		// machine holds up for 1.5 s must not get a live node reaped here.
		const ttl = 3 * time.Second
		a := leading(t, sa, Config{RefreshInterval: 200 * time.Millisecond, NodeTTL: ttl}, 4)
		if !a.lease.Load() || a.ttl() != ttl {
			t.Fatalf("lease %v, ttl %v: want a lease of %v", a.lease.Load(), a.ttl(), ttl)
		}
		b := New(Config{Store: sb, Node: "n2", Host: "n2:1", RefreshInterval: 200 * time.Millisecond, NodeTTL: ttl})
		if err := b.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Stop(context.Background()) })
		testworker.WaitFor(t, 30*time.Second, "the queues spread over both nodes", func() bool {
			return a.running(2) && b.running(2)
		})
		// Both live for several leases: neither is reaped.
		time.Sleep(2 * ttl)
		if c := must(base.NodesLive(context.Background()))(t); len(c.Nodes) != 2 {
			t.Fatalf("live nodes %+v, want n1 and n2", c.Nodes)
		}

		// n1 grabs a job for an hour, then dies.
		ctx := context.Background()
		q := ""
		for _, name := range []string{"q0", "q1", "q2", "q3"} {
			if a.runner(name) != nil {
				q = name
				break
			}
		}
		if _, err := base.JobsInsert(ctx, []*store.JobInsertParams{{Queue: q, Category: "c", URL: w.URL, Payload: []byte(`{}`), Timeout: 5}}); err != nil {
			t.Fatal(err)
		}
		var held []*store.Job
		testworker.WaitFor(t, 30*time.Second, "a grab as n1", func() bool {
			jobs, err := base.JobsGrab(ctx, &store.JobsGrabParams{Queue: q, Node: "n1", Limit: 1, Lease: time.Hour})
			held = append(held, jobs...)
			return err == nil && len(held) == 1 || len(w.Arrivals()) > 0
		})
		if len(w.Arrivals()) > 0 {
			t.Fatal("n1's runner delivered the job before the test could hold it")
		}
		died := time.Now()
		sa.dead.Store(true)
		testworker.WaitFor(t, 30*time.Second, "n2 leads every queue", func() bool { return b.running(4) })
		took := time.Since(died)
		testworker.WaitFor(t, 30*time.Second, "n1's held job delivered by n2", func() bool { return len(w.Arrivals()) > 0 })
		t.Logf("takeover %v after the death (lease %v)", took.Round(time.Millisecond), ttl)
		if took > 20*time.Second {
			t.Errorf("takeover took %v, want about the lease (%v)", took, ttl)
		}
		if n := len(w.Arrivals()); n != 1 {
			t.Errorf("the held job was delivered %d times, want once", n)
		}
		if c := must(base.NodesLive(ctx))(t); len(c.Nodes) != 1 || c.Nodes[0].ID != "n2" {
			t.Errorf("live nodes %+v, want n2 alone", c.Nodes)
		}
	})
}

// TestLease_DefaultTTL: a lease lasts 1.5 s unless NodeTTL says
// otherwise, a registration with a session 10 s.
func TestLease_DefaultTTL(t *testing.T) {
	d := New(Config{Store: dbtest.Open(t, "sqlite"), Node: "n1"})
	if got := d.ttl(); got != defaultNodeTTL {
		t.Errorf("ttl with a session = %v, want %v", got, defaultNodeTTL)
	}
	d.lease.Store(true)
	if got := d.ttl(); got != leaseTTL {
		t.Errorf("ttl with a lease = %v, want %v", got, leaseTTL)
	}
	d = New(Config{Store: dbtest.Open(t, "sqlite"), Node: "n1", NodeTTL: 4 * time.Second})
	d.lease.Store(true)
	if got := d.ttl(); got != 4*time.Second {
		t.Errorf("ttl with a lease and NodeTTL 4s = %v, want 4s", got)
	}
}

func must[T any](v T, err error) func(testing.TB) T {
	return func(t testing.TB) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// TestSteadiness: a node reaps only after its renewals went through
// without a gap longer than the TTL for a whole TTL; a failed or late
// renewal starts the count again.
func TestSteadiness(t *testing.T) {
	const ttl = 1500 * time.Millisecond
	at := func(ms int) time.Time { return time.Unix(1000, 0).Add(time.Duration(ms) * time.Millisecond) }
	type renewal struct {
		sent, done int // ms
		ok         bool
	}
	for _, tc := range []struct {
		name     string
		renewals []renewal
		want     bool
	}{
		{"none", nil, false},
		{"one", []renewal{{0, 5, true}}, false},
		{"a TTL of renewals", []renewal{{0, 5, true}, {300, 305, true}, {600, 605, true}, {900, 905, true}, {1200, 1205, true}, {1500, 1505, true}}, true},
		{"just short of a TTL", []renewal{{0, 5, true}, {300, 305, true}, {600, 605, true}, {900, 905, true}, {1200, 1205, true}, {1499, 1500, true}}, false},
		{"a failure restarts", []renewal{{0, 5, true}, {300, 305, true}, {600, 605, false}, {900, 905, true}, {1200, 1205, true}, {1500, 1505, true}, {1800, 1805, true}}, false},
		{"a failure long ago", []renewal{{0, 5, false}, {300, 305, true}, {600, 605, true}, {900, 905, true}, {1200, 1205, true}, {1500, 1505, true}, {1800, 1805, true}}, true},
		// A stall: the renewal sent at 600 answers 4s later; every
		// peer's lease may have lapsed meanwhile.
		{"a stall restarts", []renewal{{0, 5, true}, {300, 305, true}, {600, 4600, true}, {4600, 4605, true}, {4900, 4905, true}}, false},
		{"steady after a stall", []renewal{{0, 5, true}, {300, 305, true}, {600, 4600, true}, {4600, 4605, true}, {4900, 4905, true}, {5200, 5205, true}, {5500, 5505, true}, {5800, 5805, true}, {6100, 6105, true}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s steadiness
			for _, r := range tc.renewals {
				s.note(at(r.sent), at(r.done), r.ok, ttl)
			}
			if got := s.steady(ttl); got != tc.want {
				t.Errorf("steady = %v, want %v (%+v)", got, tc.want, s)
			}
		})
	}
}

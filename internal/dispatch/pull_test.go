package dispatch

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
)

// heldGrab is a store whose leased grabs wait until release is closed,
// after telling began.
type heldGrab struct {
	store.Store
	began   chan struct{}
	release chan struct{}
}

func (s *heldGrab) JobsGrab(ctx context.Context, p *store.JobsGrabParams) ([]*store.Job, error) {
	if p.Leased {
		select {
		case s.began <- struct{}{}:
		default:
		}
		<-s.release
	}
	return s.Store.JobsGrab(ctx, p)
}

// goneMidGrab starts a dispatcher leading pull queue q (max_workers 2)
// of st with the jobs given, and a puller that waits for up to 2 jobs; the
// puller's request goes away while the runner grabs for it. It returns
// the dispatcher, the jobs' ids and Pull's error.
func goneMidGrab(t *testing.T, st store.Store, jobs int) (*Dispatcher, []int64, error) {
	t.Helper()
	ctx := t.Context()
	hg := &heldGrab{Store: st, began: make(chan struct{}, 1), release: make(chan struct{})}
	d := New(Config{Store: hg, Node: "n1"})
	t.Cleanup(func() { d.Stop(context.Background()) })
	d.lastBeat.Store(time.Now().UnixNano())
	q, err := st.QueuePut(ctx, &store.Queue{Name: "q", PollingInterval: 1000, MaxWorkers: 2, Delivery: store.DeliveryPull})
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	if jobs > 0 {
		ps := make([]*store.JobInsertParams, jobs)
		for i := range ps {
			ps[i] = &store.JobInsertParams{Queue: "q", Category: "c"}
		}
		if ids, err = st.JobsInsert(ctx, ps); err != nil {
			t.Fatal(err)
		}
	}
	d.sync(readAll([]*store.Queue{q}), 0)
	gone, leave := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := d.Pull(gone, &PullRequest{Queue: "q", Max: 2, Wait: 20 * time.Second, Lease: time.Hour})
		done <- err
	}()
	select {
	case <-hg.began:
	case <-time.After(20 * time.Second):
		t.Fatal("the runner did not grab for the waiting puller")
	}
	leave()
	close(hg.release)
	select {
	case err := <-done:
		return d, ids, err
	case <-time.After(10 * time.Second):
		t.Fatal("a request that went away waits on for a job")
	}
	return nil, nil, nil
}

// TestPull_JobsOfAPullerThatWentAwayGoBack: the runner takes a waiting
// puller and grabs for it; the puller's request goes away before the grab
// answers. Its jobs must go back to waiting at once (not wait for their
// lease to run out), and their worker slots come free: the next puller
// gets them, with a new grab.
func TestPull_JobsOfAPullerThatWentAwayGoBack(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		st := dbtest.Open(t, dialect)
		ctx := t.Context()
		d, ids, err := goneMidGrab(t, st, 2)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Pull of a request that went away = %v, want context.Canceled", err)
		}
		for _, id := range ids {
			if j, err := st.JobGet(ctx, "q", id); err != nil || j.State != store.StateWaiting {
				t.Fatalf("job %d after its puller went away: %+v, %v; want waiting", id, j, err)
			}
		}
		got, err := d.Pull(ctx, &PullRequest{Queue: "q", Max: 2, Wait: 20 * time.Second, Lease: time.Hour})
		if err != nil || len(got) != 2 {
			t.Fatalf("the next puller got %d jobs, %v; want both (their slots free)", len(got), err)
		}
		for _, p := range got {
			if p.Job.Grabs != 2 || p.Job.State != store.StateLeased {
				t.Fatalf("job leased again: %+v, want leased by its second grab", p.Job)
			}
		}
		r := d.runners["q"]
		if n, held := r.slots.inflight.Load(), r.pull.held.Load(); n != 2 || held != 2 {
			t.Fatalf("slots taken %d, leases held %d; want 2 and 2", n, held)
		}
	})
}

// TestPull_LeaseSlots: a pulled job holds its worker slot until its lease
// ends; an end counted twice (a nudge and a count) frees it once; a
// re-count mends an end whose nudge was lost, and counts the leases of
// another leader.
func TestPull_LeaseSlots(t *testing.T) {
	st := dbtest.Open(t, "sqlite")
	ctx := t.Context()
	d := New(Config{Store: st, Node: "n1"})
	t.Cleanup(func() { d.Stop(context.Background()) })
	r := newRunner(d, &store.Queue{Name: "q", MaxWorkers: 3, Delivery: store.DeliveryPull})
	if _, err := st.QueuePut(ctx, &store.Queue{Name: "q", PollingInterval: 1000, MaxWorkers: 3, Delivery: store.DeliveryPull}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.JobsInsert(ctx, []*store.JobInsertParams{{Queue: "q"}, {Queue: "q"}, {Queue: "q"}}); err != nil {
		t.Fatal(err)
	}
	// Another leader leased one before this runner started.
	other, err := st.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: "n0", Limit: 1, Lease: time.Hour, Leased: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.countLeases(); err != nil {
		t.Fatal(err)
	}
	if n := r.slots.inflight.Load(); n != 1 {
		t.Fatalf("after the first count: %d slots taken, want 1 (the other leader's lease)", n)
	}
	took := r.takeSlots(2)
	jobs, err := r.grabLeased(int(took), time.Hour)
	if err != nil || len(jobs) != 2 {
		t.Fatalf("grabbed %d, %v; want 2", len(jobs), err)
	}
	r.holdLeases(jobs)
	if n := r.takeSlots(1); n != 0 {
		t.Fatalf("took %d slots with 3 leases held, max_workers 3", n)
	}
	g := store.JobGrab{ID: jobs[0].ID, Grabs: jobs[0].Grabs}
	if _, err := st.JobsSucceed(ctx, &store.JobsSucceedParams{Grabs: []store.JobGrab{g}, Status: "success"}); err != nil {
		t.Fatal(err)
	}
	r.leaseEnded(g)
	r.leaseEnded(g)
	r.leaseEnded(store.JobGrab{ID: jobs[1].ID, Grabs: jobs[1].Grabs + 1}) // another grab's end
	if n := r.slots.inflight.Load(); n != 2 {
		t.Fatalf("after one lease ended (told twice): %d slots taken, want 2", n)
	}
	// The other leader's lease ends on another node, and the nudge is lost.
	if _, err := st.JobCancel(ctx, "q", other[0].ID); err != nil {
		t.Fatal(err)
	}
	if err := r.countLeases(); err != nil {
		t.Fatal(err)
	}
	if n, held := r.slots.inflight.Load(), r.pull.held.Load(); n != 1 || held != 1 {
		t.Fatalf("after a re-count: %d slots taken, %d held; want 1 and 1", n, held)
	}
}

// TestPull_GoneWhileItsGrabFindsNothing: a request that goes away while
// the runner grabs for it, and finds nothing, is answered (not put back to
// wait for a job no one will take), and leaves no puller behind.
func TestPull_GoneWhileItsGrabFindsNothing(t *testing.T) {
	d, _, err := goneMidGrab(t, dbtest.Open(t, "sqlite"), 0)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Pull = %v, want context.Canceled", err)
	}
	if n := d.runners["q"].pullers(); n != 0 {
		t.Fatalf("%d pullers wait after the only one went away", n)
	}
}

package dispatch

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/testworker"
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

// leaseNew inserts a job into pull queue q and leases it to a puller for
// lease, as the runner serves a puller: a slot taken, a leased grab, the
// lease holding the slot.
func (b *runnerBundle) leaseNew(t *testing.T, lease time.Duration) *store.Job {
	t.Helper()
	b.insert(t, jobParams(1, "", 0, false)...)
	if took := b.r.takeSlots(1); took != 1 {
		t.Fatalf("took %d slots for a puller, want 1", took)
	}
	jobs, err := b.r.grabLeased(1, lease)
	if err != nil || len(jobs) != 1 {
		t.Fatalf("leased %d jobs, %v; want 1", len(jobs), err)
	}
	b.r.holdLeases(jobs)
	return jobs[0]
}

// TestPull_LeaseEndFreesItsSlotOnce: a pulled job's lease ends by its
// completion, its expiry, its cancel, or on another node (told by a
// nudge); each frees its worker slot once, however many times it is
// told; the end of an earlier grab of the job frees nothing.
func TestPull_LeaseEndFreesItsSlotOnce(t *testing.T) {
	tests := []struct {
		name      string
		lease     time.Duration
		end       func(t *testing.T, b *runnerBundle, g store.JobGrab)
		wantFreed bool
	}{
		{name: "completed", lease: time.Hour, wantFreed: true, end: func(t *testing.T, b *runnerBundle, g store.JobGrab) {
			c := &Completion{ID: g.ID, Token: b.d.leaseToken(g.ID, g.Grabs), Status: StatusSuccess}
			for range 2 { // the same completion sent again
				if err := b.d.Complete(t.Context(), c); err != nil {
					t.Fatal(err)
				}
			}
		}},
		{name: "failed, to be retried", lease: time.Hour, wantFreed: true, end: func(t *testing.T, b *runnerBundle, g store.JobGrab) {
			c := &Completion{ID: g.ID, Token: b.d.leaseToken(g.ID, g.Grabs), Status: StatusFailure}
			for range 2 {
				if err := b.d.Complete(t.Context(), c); err != nil {
					t.Fatal(err)
				}
			}
		}},
		{name: "expired", lease: time.Millisecond, wantFreed: true, end: func(t *testing.T, b *runnerBundle, g store.JobGrab) {
			testworker.WaitFor(t, 30*time.Second, "the lease expired", func() bool {
				b.r.expireLeases()
				return b.state(t, g.ID) != store.StateLeased
			})
			if got := b.r.pull.held.Load(); got != 1 {
				t.Errorf("leases held after the expiry = %d, want 1", got)
			}
			b.r.expireLeases()
			b.d.LeasesEnded("q", []store.JobGrab{g}) // and told by a nudge
		}},
		{name: "cancelled", lease: time.Hour, wantFreed: true, end: func(t *testing.T, b *runnerBundle, g store.JobGrab) {
			j, err := b.s.JobCancel(t.Context(), "q", g.ID)
			if err != nil {
				t.Fatal(err)
			}
			b.d.JobCancelled(j)
			b.d.JobCancelled(j)
		}},
		{name: "ended on another node", lease: time.Hour, wantFreed: true, end: func(t *testing.T, b *runnerBundle, g store.JobGrab) {
			if _, err := b.s.JobsSucceed(t.Context(), &store.JobsSucceedParams{Grabs: []store.JobGrab{g}, Status: StatusSuccess}); err != nil {
				t.Fatal(err)
			}
			b.d.LeasesEnded("q", []store.JobGrab{g, g})
		}},
		{name: "an earlier grab's end", lease: time.Hour, end: func(t *testing.T, b *runnerBundle, g store.JobGrab) {
			b.d.LeasesEnded("q", []store.JobGrab{{ID: g.ID, Grabs: g.Grabs - 1}})
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setupRunner(t, store.Queue{MaxWorkers: 3, Delivery: store.DeliveryPull}, nil)
			j := b.leaseNew(t, tc.lease)
			b.leaseNew(t, time.Hour) // another lease, which keeps its slot
			tc.end(t, b, store.JobGrab{ID: j.ID, Grabs: j.Grabs})
			want := int64(2)
			if tc.wantFreed {
				want = 1
			}
			if got := b.r.slots.inflight.Load(); got != want {
				t.Errorf("slots taken after the end = %d, want %d", got, want)
			}
			if got := b.r.pull.held.Load(); got != want {
				t.Errorf("leases held after the end = %d, want %d", got, want)
			}
		})
	}
}

// TestPull_DropLeasesWhenNoLongerAPullQueue: a pull queue become a push
// queue gives back the slots its leases held (they run on, holding no
// push slot), and a later end of one of those leases frees nothing more.
func TestPull_DropLeasesWhenNoLongerAPullQueue(t *testing.T) {
	b := setupRunner(t, store.Queue{MaxWorkers: 3, Delivery: store.DeliveryPull}, nil)
	r := b.r
	leased := b.leaseNew(t, time.Hour)
	b.leaseNew(t, time.Hour)
	r.pull.ready = true
	r.takeSlots(1) // a push delivery's
	b.setQueue(func(q *store.Queue) { q.Delivery = store.DeliveryPush })
	r.turn.look = false
	r.pushTurn(r.settings.Load(), time.Now(), false)
	if got := r.slots.inflight.Load(); got != 1 {
		t.Fatalf("slots taken after the leases were dropped = %d, want 1 (the push delivery's)", got)
	}
	if got := r.pull.held.Load(); got != 0 || r.pull.ready {
		t.Fatalf("leases held %d, ready %t after the drop; want 0, false", got, r.pull.ready)
	}
	r.leaseEnded(store.JobGrab{ID: leased.ID, Grabs: leased.Grabs})
	if got := r.slots.inflight.Load(); got != 1 {
		t.Fatalf("slots taken after a dropped lease ended = %d, want 1", got)
	}
}

// leasedDuring is a store whose read of the leases runs during (once)
// after it has read them: a lease made while the read is on its way back.
type leasedDuring struct {
	Store
	during func()
}

func (s *leasedDuring) JobsLeased(ctx context.Context, queue string) ([]store.JobGrab, error) {
	got, err := s.Store.JobsLeased(ctx, queue)
	if f := s.during; f != nil {
		s.during = nil
		f()
	}
	return got, err
}

// TestPull_CountLeasesKeepsLeasesMadeDuringItsRead: a re-count drops the
// leases it does not find only if they were counted before its read
// began; one made while the read ran keeps its slot.
func TestPull_CountLeasesKeepsLeasesMadeDuringItsRead(t *testing.T) {
	var fake *leasedDuring
	b := setupRunner(t, store.Queue{MaxWorkers: 3, Delivery: store.DeliveryPull}, func(s store.Store) Store {
		fake = &leasedDuring{Store: s}
		return fake
	})
	fake.during = func() { b.leaseNew(t, time.Hour) }
	if err := b.r.countLeases(); err != nil {
		t.Fatal(err)
	}
	if got := b.r.pull.held.Load(); got != 1 {
		t.Fatalf("leases held after a re-count = %d, want 1: the lease made during its read", got)
	}
	if got := b.r.slots.inflight.Load(); got != 1 {
		t.Fatalf("slots taken after a re-count = %d, want 1", got)
	}
}

package dispatch

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/batch"
	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/testworker"
)

func TestTakeSlots_TakesOnlyFreeSlots(t *testing.T) {
	tests := []struct {
		name                 string
		maxWorkers, taken    int
		ask, want, wantTaken int64
	}{
		{name: "all it asks for when free", maxWorkers: 4, ask: 3, want: 3, wantTaken: 3},
		{name: "only the free ones", maxWorkers: 4, taken: 3, ask: 3, want: 1, wantTaken: 4},
		{name: "none when all are taken", maxWorkers: 4, taken: 4, ask: 1, want: 0, wantTaken: 4},
		{name: "none when max_workers was lowered below those taken", maxWorkers: 2, taken: 5, ask: 1, want: 0, wantTaken: 5},
		{name: "none when asked for none", maxWorkers: 4, ask: 0, want: 0, wantTaken: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := memRunner(t, tc.maxWorkers)
			r.slots.inflight.Store(int64(tc.taken))
			if got := r.takeSlots(tc.ask); got != tc.want {
				t.Errorf("takeSlots(%d) with %d of %d taken = %d, want %d", tc.ask, tc.taken, tc.maxWorkers, got, tc.want)
			}
			if got := r.slots.inflight.Load(); got != tc.wantTaken {
				t.Errorf("slots taken after = %d, want %d", got, tc.wantTaken)
			}
		})
	}
}

// TestSlots_LoweredMaxWorkers: slots taken beyond a lowered max_workers
// stay counted; slots come free again only once those taken are below it.
func TestSlots_LoweredMaxWorkers(t *testing.T) {
	r := memRunner(t, 5)
	if got := r.takeSlots(5); got != 5 {
		t.Fatalf("takeSlots(5) of 5 free = %d", got)
	}
	q := *r.settings.Load()
	q.MaxWorkers = 2
	r.settings.Store(&q)
	if got, want := r.slots.free(&q), int64(-3); got != want {
		t.Fatalf("free after lowering max_workers to 2 with 5 taken = %d, want %d", got, want)
	}
	r.releaseSlots(3)
	if got := r.takeSlots(1); got != 0 {
		t.Fatalf("with 2 of 2 taken after the lowering, takeSlots(1) = %d, want 0", got)
	}
	r.releaseSlots(1)
	if got := r.takeSlots(5); got != 1 {
		t.Fatalf("with 1 of 2 taken, takeSlots(5) = %d, want 1", got)
	}
}

func TestReleaseSlots_GivesBackAndWakesTheLoop(t *testing.T) {
	tests := []struct {
		name      string
		release   int64
		wantTaken int64
		wantWake  bool
	}{
		{name: "some", release: 2, wantTaken: 1, wantWake: true},
		{name: "all", release: 3, wantTaken: 0, wantWake: true},
		{name: "none", release: 0, wantTaken: 3},
		{name: "a negative count", release: -1, wantTaken: 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := memRunner(t, 3)
			r.takeSlots(3)
			r.releaseSlots(tc.release)
			if got := r.slots.inflight.Load(); got != tc.wantTaken {
				t.Errorf("slots taken = %d, want %d", got, tc.wantTaken)
			}
			woken := false
			select {
			case <-r.slots.freed:
				woken = true
			default:
			}
			if woken != tc.wantWake {
				t.Errorf("loop woken = %t, want %t", woken, tc.wantWake)
			}
		})
	}
}

// TestTakeSlots_ConcurrentTakersStayWithinMaxWorkers: grabs (which give
// back what they did not fill) and hand-off reservations take slots from
// many goroutines at once; together they never hold more than
// max_workers, and every slot comes back.
func TestTakeSlots_ConcurrentTakersStayWithinMaxWorkers(t *testing.T) {
	const (
		maxWorkers = 3
		takers     = 8
		rounds     = 5000
	)
	r := memRunner(t, maxWorkers)
	r.ho.idle = true // hand-off on
	var held, most, grabbed, handedOff atomic.Int64
	// hold notes the slots held at once while a taker holds n: those the
	// takers hold, and those the count says are taken.
	hold := func(n int64) {
		h := max(held.Add(n), r.slots.inflight.Load())
		for m := most.Load(); h > m && !most.CompareAndSwap(m, h); m = most.Load() {
		}
		held.Add(-n)
	}
	var wg sync.WaitGroup
	for g := range takers {
		wg.Go(func() {
			for range rounds {
				if g%2 == 0 {
					// A grab: takes its slots before it asks the database,
					// fills some, gives back the rest.
					gen, _ := r.grabStart()
					took := r.takeSlots(2)
					hold(took)
					grabbed.Add(took)
					r.releaseSlots(took)
					r.grabbed(true, gen) // short: hand-off may go on
					continue
				}
				if !r.reserve() {
					continue
				}
				hold(1)
				handedOff.Add(1)
				(&Handoff{r: r}).Release()
			}
		})
	}
	wg.Wait()
	r.slots.wg.Wait() // every reservation's Release counted
	if got := most.Load(); got > maxWorkers {
		t.Errorf("slots held at once reached %d, want at most max_workers = %d", got, maxWorkers)
	}
	if got := r.slots.inflight.Load(); got != 0 {
		t.Errorf("slots taken after every taker gave back = %d, want 0", got)
	}
	if grabbed.Load() == 0 || handedOff.Load() == 0 {
		t.Errorf("grabs took %d slots, hand-offs %d: want both to have taken some", grabbed.Load(), handedOff.Load())
	}
}

// TestTakeSlots_FlushesPendingAcksWhenNoSlotIsFree: a delivered job holds
// its slot until its acknowledgement commits, and acknowledgements wait
// for the next spaced DELETE (ackGap); a take that finds no slot free
// sends them at once rather than wait out the gap.
func TestTakeSlots_FlushesPendingAcksWhenNoSlotIsFree(t *testing.T) {
	r := memRunner(t, 4)
	// Acknowledgements an hour apart, so that only a flush sends one soon.
	r.d.complete.Close()
	r.d.complete = batch.New(func(_ context.Context, jobs []ackItem) ([]struct{}, error) {
		return make([]struct{}, len(jobs)), nil
	}, 500, time.Hour)
	ctx := t.Context()
	if _, err := r.d.complete.Do(ctx, ackItem{job: &store.Job{ID: 1}}); err != nil { // the gap runs from here
		t.Fatal(err)
	}
	r.slots.inflight.Store(4)
	acked := make(chan error, 1)
	go func() { acked <- r.ack(ctx, ackItem{job: &store.Job{ID: 2}}, false) }()
	testworker.WaitFor(t, 30*time.Second, "the acknowledgement pending", func() bool { return r.acking.Load() == 1 })
	if got := r.takeSlots(1); got != 0 {
		t.Fatalf("takeSlots(1) with every slot taken = %d", got)
	}
	select {
	case err := <-acked:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the pending acknowledgement still waits for its gap after a take found no slot free")
	}
}

// TestAckAsync_HoldsASlotUntilTheCommit: a success acknowledged without
// waiting (ackAsync) takes a worker slot of its own, which it gives back
// only when its batch has committed, so that the slots still bound the
// jobs a crash would deliver again; with no slot free, it does nothing
// and the delivery waits for its acknowledgement as before.
func TestAckAsync_HoldsASlotUntilTheCommit(t *testing.T) {
	r := memRunner(t, 3)
	release := make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) }) // before memRunner's Close
	r.d.complete.Close()
	r.d.complete = batch.New(func(_ context.Context, jobs []ackItem) ([]struct{}, error) {
		<-release // the DELETE commits when the test says
		return make([]struct{}, len(jobs)), nil
	}, 500, 0)
	for id := int64(1); id <= 2; id++ {
		r.slots.inflight.Add(1) // a delivery's own slot
		if !r.ackAsync(ackItem{job: &store.Job{ID: id}}, time.Millisecond) {
			t.Fatalf("job %d: ackAsync with a slot free did not take it", id)
		}
		r.releaseSlots(1) // the delivery's goroutine ends
	}
	if got := r.slots.inflight.Load(); got != 2 {
		t.Fatalf("slots taken while two acknowledgements wait for their commit = %d, want 2", got)
	}
	r.slots.inflight.Add(1) // a third delivery takes the last slot
	if r.ackAsync(ackItem{job: &store.Job{ID: 3}}, time.Millisecond) {
		t.Fatal("ackAsync took a slot beyond max_workers")
	}
	r.releaseSlots(1)
	once.Do(func() { close(release) })
	testworker.WaitFor(t, 30*time.Second, "the acknowledgements' slots given back at their commit", func() bool {
		return r.slots.inflight.Load() == 0 && r.acking.Load() == 0
	})
	r.slots.wg.Wait() // every acknowledgement done: halt would not wait forever
}

package dispatch

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store"
)

// jobsOf returns jobs with the ids given.
func jobsOf(ids ...int64) []*store.Job {
	out := make([]*store.Job, len(ids))
	for i, id := range ids {
		out[i] = &store.Job{ID: id}
	}
	return out
}

// jobID names j for a message: its id, or nil.
func jobID(j *store.Job) string {
	if j == nil {
		return "nil"
	}
	return "job " + strconv.FormatInt(j.ID, 10)
}

// TestReadAhead_TakeNextAndRefillMark: jobs leave the read-ahead oldest
// first, by take or by next; next says to grab more once at most the
// refill mark is left, and the mark is the last add's.
func TestReadAhead_TakeNextAndRefillMark(t *testing.T) {
	var a readAhead
	a.add(jobsOf(1, 2, 3, 4, 5, 6), 2)
	if got, want := ids(a.take(2)), []int64{1, 2}; !slices.Equal(got, want) {
		t.Fatalf("take(2) = %v, want %v", got, want)
	}
	for _, want := range []struct {
		id  int64
		low bool
	}{{3, false}, {4, true}, {5, true}} {
		j, low := a.next()
		if j == nil || j.ID != want.id || low != want.low {
			t.Fatalf("next = %s, low %t; want job %d, low %t", jobID(j), low, want.id, want.low)
		}
	}
	if got, want := ids(a.take(10)), []int64{6}; !slices.Equal(got, want) {
		t.Fatalf("take(10) of the last one = %v, want %v", got, want)
	}
	if j, low := a.next(); j != nil || low {
		t.Fatalf("next of an empty read-ahead = %s, low %t; want nil, false", jobID(j), low)
	}
	a.add(jobsOf(7, 8), 0)
	if j, low := a.next(); j.ID != 7 || low {
		t.Fatalf("next after an add with mark 0 = %d, low %t; want 7, false", j.ID, low)
	}
	if j, low := a.next(); j.ID != 8 || !low {
		t.Fatalf("next of the last job = %d, low %t; want 8, true", j.ID, low)
	}
	if got := a.len(); got != 0 {
		t.Fatalf("len = %d, want 0", got)
	}
}

// TestGiveBack_PutsTheReadAheadBackToWaiting: the read-ahead's jobs go
// back to waiting in the store at once, their key slots come free, and
// hand-off stops until a grab finds the queue without a backlog.
func TestGiveBack_PutsTheReadAheadBackToWaiting(t *testing.T) {
	b := setupRunner(t, store.Queue{MaxWorkers: 4}, nil)
	r := b.r
	jobs := b.grabNew(t, append(jobParams(2, "k", 2, false), jobParams(2, "", 0, false)...)...)
	if got := r.admit(jobs); len(got) != 4 {
		t.Fatalf("admitted %d of 4 jobs (key limit 2)", len(got))
	}
	r.ahead.add(jobs, 2)
	r.ho.idle = true

	r.giveBack()
	for _, j := range jobs {
		if got, want := b.state(t, j.ID), store.StateWaiting; got != want {
			t.Errorf("job %d is %q after the give-back, want %q", j.ID, got, want)
		}
	}
	if got := r.ahead.len(); got != 0 {
		t.Errorf("read-ahead holds %d jobs after the give-back", got)
	}
	if st := r.keys.table.Load().keys["k"]; st != nil {
		t.Errorf("key k after its jobs went back: busy %d, want no count left", st.busy)
	}
	if r.ho.idle {
		t.Error("hand-off still on after jobs went back to waiting")
	}
}

// TestPushTurn_GivesBackTheReadAheadWhenHeld: a turn of a paused or
// throttled queue, or of a stale node, gives the read-ahead back; any
// other keeps it for its slots.
func TestPushTurn_GivesBackTheReadAheadWhenHeld(t *testing.T) {
	rate := 10.0
	tests := []struct {
		name     string
		hold     func(b *runnerBundle)
		wantBack bool
	}{
		{name: "paused", hold: func(b *runnerBundle) { b.setQueue(func(q *store.Queue) { q.Paused = true }) }, wantBack: true},
		{name: "throttled", hold: func(b *runnerBundle) { b.setQueue(func(q *store.Queue) { q.MaxDispatchesPerSecond = &rate }) }, wantBack: true},
		{name: "stale node", hold: func(b *runnerBundle) { b.d.lastBeat.Store(time.Now().Add(-time.Hour).UnixNano()) }, wantBack: true},
		{name: "none: kept for the slots", hold: func(*runnerBundle) {}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setupRunner(t, store.Queue{MaxWorkers: 1}, nil)
			r := b.r
			jobs := b.grabNew(t, jobParams(2, "", 0, false)...)
			r.ahead.add(jobs, 1)
			r.takeSlots(1) // the read-ahead waits for it
			r.turn.look = false
			tc.hold(b)
			q := r.settings.Load()
			r.pushTurn(q, time.Now(), q.Paused || !b.d.fresh())
			want, wantLen := store.StateGrabbed, 2
			if tc.wantBack {
				want, wantLen = store.StateWaiting, 0
			}
			for _, j := range jobs {
				if got := b.state(t, j.ID); got != want {
					t.Errorf("job %d of the read-ahead is %q after the turn, want %q", j.ID, got, want)
				}
			}
			if got := r.ahead.len(); got != wantLen {
				t.Errorf("read-ahead holds %d jobs after the turn, want %d", got, wantLen)
			}
		})
	}
}

// TestWork_GoesOnWithTheReadAheadInItsSlot: a delivery that ends takes
// the read-ahead's next job in the same worker slot, until none is left,
// unless the queue is paused or throttled, the runner stops, or the node
// is stale; then its slot is given back.
func TestWork_GoesOnWithTheReadAheadInItsSlot(t *testing.T) {
	rate := 1000.0
	tests := []struct {
		name string
		set  func(b *runnerBundle)
		want int // deliveries
	}{
		{name: "running", set: func(*runnerBundle) {}, want: 3},
		{name: "paused", set: func(b *runnerBundle) { b.setQueue(func(q *store.Queue) { q.Paused = true }) }, want: 1},
		{name: "throttled", set: func(b *runnerBundle) { b.setQueue(func(q *store.Queue) { q.MaxDispatchesPerSecond = &rate }) }, want: 1},
		{name: "stopping", set: func(b *runnerBundle) { b.r.stopOnce.Do(b.r.closeStop) }, want: 1},
		{name: "stale node", set: func(b *runnerBundle) { b.d.lastBeat.Store(time.Now().Add(-time.Hour).UnixNano()) }, want: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setupRunner(t, store.Queue{MaxWorkers: 1}, nil)
			r := b.r
			jobs := b.grabNew(t, jobParams(3, "", 0, false)...)
			if got := r.takeSlots(1); got != 1 {
				t.Fatalf("took %d slots, want 1", got)
			}
			r.ahead.add(jobs[1:], 0)
			tc.set(b)
			r.work(jobs[0])
			if got := b.w.deliveries(); got != tc.want {
				t.Errorf("the slot delivered %d jobs, want %d", got, tc.want)
			}
			if got, want := r.ahead.len(), 3-tc.want; got != want {
				t.Errorf("read-ahead holds %d jobs after, want %d", got, want)
			}
			if got := r.slots.inflight.Load(); got != 0 {
				t.Errorf("slots taken after the delivery = %d, want 0", got)
			}
		})
	}
}

package dispatch

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store"
)

func keyed(id int64, key string, limit int, ordered bool) *store.Job {
	return &store.Job{ID: id, JobOptions: store.JobOptions{ConcurrencyKey: key, ConcurrencyLimit: limit, Ordered: ordered}}
}

func ids(js []*store.Job) []int64 {
	out := make([]int64, len(js))
	for i, j := range js {
		out[i] = j.ID
	}
	return out
}

func TestKeyTable_LimitParksAndEndsGoOn(t *testing.T) {
	tb := newKeyTable()
	for _, j := range []*store.Job{keyed(3, "a", 2, false), keyed(1, "a", 2, false), keyed(2, "a", 2, false), keyed(4, "b", 2, false)} {
		tb.park(j)
	}
	if got := tb.parked.Load(); got != 4 {
		t.Fatalf("parked = %d, want 4", got)
	}
	jobs, check := tb.take("a", 10)
	if got, want := ids(jobs), []int64{1, 2}; !slices.Equal(got, want) || check != nil {
		t.Fatalf("take a = %v (check %v), want %v: the oldest, up to the limit", got, check, want)
	}
	if jobs, _ := tb.take("a", 10); len(jobs) != 0 {
		t.Fatalf("take of a full key = %v, want none", ids(jobs))
	}
	if _, ok := tb.ready["a"]; ok {
		t.Fatal("a full key is ready")
	}
	tb.end(keyed(1, "a", 2, false), false)
	if _, ok := tb.ready["a"]; !ok {
		t.Fatal("a key with room and parked jobs is not ready after an end")
	}
	if jobs, _ := tb.take("a", 10); !slices.Equal(ids(jobs), []int64{3}) {
		t.Fatalf("take after an end = %v, want [3]", ids(jobs))
	}
	// An acceptance keeps the slot taken, as foreign, until a recount.
	tb.end(keyed(2, "a", 2, false), true)
	if st := tb.keys["a"]; st.busy != 1 || st.foreign != 1 || tb.foreign != 1 || st.accepted != tb.seq {
		t.Fatalf("after an acceptance: busy %d foreign %d (table %d), want 1 and 1", st.busy, st.foreign, tb.foreign)
	}
	tb.end(keyed(3, "a", 2, false), false)
	tb.keys["a"].foreign, tb.foreign = 0, 0
	tb.tidy("a", tb.keys["a"])
	if _, ok := tb.keys["a"]; ok {
		t.Fatal("a key with nothing left is still counted")
	}
}

func TestKeyTable_OrderedChecksTheOldest(t *testing.T) {
	tb := newKeyTable()
	tb.park(keyed(5, "o", 1, true))
	tb.park(keyed(2, "o", 1, true))
	jobs, check := tb.take("o", 10)
	if len(jobs) != 0 || check == nil || check.ID != 2 {
		t.Fatalf("take of an ordered key = %v, check %v; want a check of job 2", ids(jobs), check)
	}
	if again, c := tb.take("o", 10); len(again) != 0 || c != nil {
		t.Fatal("a second take while the check runs gave a job")
	}
	// Not the head (an older job waits for its retry): it stays parked,
	// and the key is not ready until something changes.
	if tb.checked(check, false) {
		t.Fatal("checked(not head) reported the job may go")
	}
	if st := tb.keys["o"]; st.busy != 0 || len(st.parked) != 2 || st.checking {
		t.Fatalf("after a failed check: busy %d parked %d checking %v", st.busy, len(st.parked), st.checking)
	}
	if _, ok := tb.ready["o"]; ok {
		t.Fatal("key ready after a failed head check")
	}
	if !tb.kick() {
		t.Fatal("kick found no ready key")
	}
	_, check = tb.take("o", 10)
	if !tb.checked(check, true) {
		t.Fatal("checked(head) did not let the job go")
	}
	if st := tb.keys["o"]; st.busy != 1 || !slices.Equal(ids(st.parked), []int64{5}) {
		t.Fatalf("after a good check: busy %d parked %v, want 1 and [5]", st.busy, ids(st.parked))
	}
	if jobs, c := tb.take("o", 10); len(jobs) != 0 || c != nil {
		t.Fatal("an ordered key with a job in delivery gave another")
	}
}

func TestKeyTable_UnparkAndBounds(t *testing.T) {
	tb := newKeyTable()
	for i := range keyParkMax {
		tb.park(keyed(int64(i+1), "hot", 1, false))
	}
	if keys, all := tb.skipped(); all || !slices.Equal(keys, []string{"hot"}) {
		t.Fatalf("skipped = %v, %v; want the hot key", keys, all)
	}
	if j := tb.unpark(7); j == nil || j.ID != 7 {
		t.Fatalf("unpark(7) = %v", j)
	}
	if tb.unpark(7) != nil {
		t.Fatal("unpark of a job no longer parked found it")
	}
	jobs, _ := tb.take("hot", 1)
	if !slices.Equal(ids(jobs), []int64{1}) {
		t.Fatalf("take = %v, want [1]", ids(jobs))
	}
	for range keyParkMax / 2 {
		tb.end(keyed(1, "hot", 1, false), false)
		tb.take("hot", 1)
	}
	if keys, _ := tb.skipped(); len(keys) != 0 {
		t.Fatalf("skipped = %v once half the key's parked jobs went, want none", keys)
	}
	for i := range skipKeysMax + 1 {
		k := string(rune('A' + i))
		for j := range keyParkMax {
			tb.park(keyed(int64(100000*(i+1)+j), k, 1, false))
		}
	}
	if _, all := tb.skipped(); !all {
		t.Fatal("more keys full than skipKeysMax, or parkMax parked, but the grab does not leave out every key")
	}
}

// keyCount returns the runner's count of key k's jobs that hold a key
// slot, and of those parked.
func keyCount(r *runner, k string) (busy, parked int) {
	t := r.keys.table.Load()
	if t == nil {
		return 0, 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if st := t.keys[k]; st != nil {
		return st.busy, len(st.parked)
	}
	return 0, 0
}

// TestAdmit_KeyLimitHoldsAcrossGrabsAndHandoffs: a grab starts a key's
// jobs up to its limit and parks the rest; a job handed off while the
// key is full parks too, giving its reserved slot back; an end lets the
// oldest parked job go in the ending delivery's slot.
func TestAdmit_KeyLimitHoldsAcrossGrabsAndHandoffs(t *testing.T) {
	b := setupRunner(t, store.Queue{MaxWorkers: 10}, nil)
	r := b.r
	jobs := b.grabNew(t, jobParams(3, "k", 2, false)...)
	if got, want := ids(r.admit(jobs)), ids(jobs[:2]); !slices.Equal(got, want) {
		t.Fatalf("a grab of 3 jobs of a key of limit 2 started %v, want %v", got, want)
	}

	handed := b.grabNew(t, jobParams(1, "k", 2, false)...)[0]
	r.ho.idle = true
	if !r.reserve() {
		t.Fatal("no hand-off reserved with 10 slots free")
	}
	(&Handoff{r: r}).Deliver(handed)
	r.slots.wg.Wait()
	if got := b.w.deliveries(); got != 0 {
		t.Fatalf("a job handed off to a full key was delivered (%d deliveries)", got)
	}
	if got := r.slots.inflight.Load(); got != 0 {
		t.Fatalf("slots taken after the hand-off parked = %d, want 0", got)
	}
	if busy, parked := keyCount(r, "k"); busy != 2 || parked != 2 {
		t.Fatalf("key k: %d in delivery, %d parked; want 2 and 2", busy, parked)
	}

	next := r.keyEnd(jobs[0], false, true)
	if next == nil || next.ID != jobs[2].ID {
		t.Fatalf("the end of a delivery of k went on with %s, want job %d, the oldest parked", jobID(next), jobs[2].ID)
	}
	if busy, parked := keyCount(r, "k"); busy != 2 || parked != 1 {
		t.Fatalf("key k after an end: %d in delivery, %d parked; want 2 and 1", busy, parked)
	}
}

// TestAdmit_OrderedKeyStartsOnlyItsHead: of an ordered key's jobs only
// the oldest still in the queue starts; a job whose elder waits for its
// retry does not start at all.
func TestAdmit_OrderedKeyStartsOnlyItsHead(t *testing.T) {
	tests := []struct {
		name        string
		elderLater  bool // the oldest job is not due
		wantStarted int  // index of the started job among those grabbed; -1: none
		wantParked  int
	}{
		{name: "the head goes, the others park", wantStarted: 0, wantParked: 2},
		{name: "none goes while the head waits for its retry", elderLater: true, wantStarted: -1, wantParked: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setupRunner(t, store.Queue{MaxWorkers: 10}, nil)
			ps := jobParams(3, "o", 1, true)
			if tc.elderLater {
				ps[0].RunAfter = time.Hour
			}
			jobs := b.grabNew(t, ps...)
			var want []int64
			if tc.wantStarted >= 0 {
				want = []int64{jobs[tc.wantStarted].ID}
			}
			if got := ids(b.r.admit(jobs)); !slices.Equal(got, want) {
				t.Fatalf("started %v of ordered jobs %v, want %v", got, ids(jobs), want)
			}
			if _, parked := keyCount(b.r, "o"); parked != tc.wantParked {
				t.Fatalf("%d jobs parked, want %d", parked, tc.wantParked)
			}
		})
	}
}

// TestKeyEnd_OrderedKeyGoesOnWithItsNextHead: once the head's success
// has committed, its end starts the next job of the key in its slot.
func TestKeyEnd_OrderedKeyGoesOnWithItsNextHead(t *testing.T) {
	b := setupRunner(t, store.Queue{MaxWorkers: 10}, nil)
	jobs := b.grabNew(t, jobParams(3, "o", 1, true)...)
	if got := b.r.admit(jobs); len(got) != 1 {
		t.Fatalf("started %d ordered jobs, want 1", len(got))
	}
	if _, err := b.s.JobsComplete(t.Context(), &store.JobsCompleteParams{Node: "n1", IDs: []int64{jobs[0].ID}, Ordered: []int64{jobs[0].ID}}); err != nil {
		t.Fatal(err)
	}
	if next := b.r.keyEnd(jobs[0], false, true); next == nil || next.ID != jobs[1].ID {
		t.Fatalf("the head's end went on with %s, want job %d", jobID(next), jobs[1].ID)
	}
}

// TestKeys_ParkedJobsStartWhenTheirKeyEnds: a key's end starts its next
// parked job in the ending delivery's slot; when that delivery may not go
// on (the queue paused meanwhile), the key is ready and the next turn
// starts its jobs in free slots.
func TestKeys_ParkedJobsStartWhenTheirKeyEnds(t *testing.T) {
	tests := []struct {
		name       string
		goOn       bool
		wantNext   bool // keyEnd returns the next job
		wantWorker int  // deliveries of the turn that follows
	}{
		{name: "in the ending delivery's slot", goOn: true, wantNext: true},
		{name: "in a free slot at the next turn", wantWorker: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setupRunner(t, store.Queue{MaxWorkers: 10}, nil)
			r := b.r
			jobs := b.grabNew(t, jobParams(3, "k", 1, false)...)
			if got := r.admit(jobs); len(got) != 1 {
				t.Fatalf("started %d jobs of a key of limit 1", len(got))
			}
			next := r.keyEnd(jobs[0], false, tc.goOn)
			if got := next != nil && next.ID == jobs[1].ID; got != tc.wantNext {
				t.Fatalf("the end went on with %s; want job %d: %t", jobID(next), jobs[1].ID, tc.wantNext)
			}
			r.turn.look = false
			r.pushTurn(r.settings.Load(), time.Now(), false)
			r.slots.wg.Wait()
			if got := b.w.deliveries(); got != tc.wantWorker {
				t.Errorf("the turn delivered %d jobs, want %d", got, tc.wantWorker)
			}
			if got := r.slots.inflight.Load(); got != 0 {
				t.Errorf("slots taken after = %d, want 0", got)
			}
		})
	}
}

// TestGiveBackParked_PutsParkedJobsBack: the parked jobs go back to
// waiting and are no longer counted; the key's job in delivery keeps its
// key slot, and hand-off stops.
func TestGiveBackParked_PutsParkedJobsBack(t *testing.T) {
	b := setupRunner(t, store.Queue{MaxWorkers: 10}, nil)
	r := b.r
	jobs := b.grabNew(t, jobParams(3, "k", 1, false)...)
	r.admit(jobs)
	r.ho.idle = true
	r.giveBackParked()
	for i, want := range []string{store.StateGrabbed, store.StateWaiting, store.StateWaiting} {
		if got := b.state(t, jobs[i].ID); got != want {
			t.Errorf("job %d is %q, want %q", jobs[i].ID, got, want)
		}
	}
	if got := r.parkedJobs(); got != 0 {
		t.Errorf("%d jobs still parked", got)
	}
	if busy, parked := keyCount(r, "k"); busy != 1 || parked != 0 {
		t.Errorf("key k: %d in delivery, %d parked; want 1 and 0", busy, parked)
	}
	if r.ho.idle {
		t.Error("hand-off still on after parked jobs went back to waiting")
	}
}

// noKeyCount is a store that cannot count the keyed jobs in delivery.
type noKeyCount struct{ Store }

func (noKeyCount) JobsKeyBusy(context.Context, *store.JobsKeyBusyParams) (map[string]int, error) {
	return nil, errors.New("database away")
}

// TestAdmit_GivesKeyedJobsBackWhenKeysCannotBeCounted: without the count
// of a key's jobs in delivery elsewhere, its limit cannot be kept: the
// keyed jobs go back to waiting, the others start.
func TestAdmit_GivesKeyedJobsBackWhenKeysCannotBeCounted(t *testing.T) {
	b := setupRunner(t, store.Queue{MaxWorkers: 10}, func(s store.Store) Store { return noKeyCount{s} })
	jobs := b.grabNew(t, append(jobParams(1, "k", 1, false), jobParams(1, "", 0, false)...)...)
	keyed, plain := jobs[0], jobs[1]
	if keyed.ConcurrencyKey == "" {
		keyed, plain = plain, keyed
	}
	if got, want := ids(b.r.admit(jobs)), []int64{plain.ID}; !slices.Equal(got, want) {
		t.Fatalf("started %v, want %v (the job without a key)", got, want)
	}
	if got := b.state(t, keyed.ID); got != store.StateWaiting {
		t.Fatalf("the keyed job is %q, want %q", got, store.StateWaiting)
	}
	if b.r.keys.table.Load() != nil {
		t.Fatal("a key table was made without the count")
	}
}

package dispatch

import (
	"slices"
	"testing"

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

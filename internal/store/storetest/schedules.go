package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store"
)

// scheduleTests are the conformance tests of store.ScheduleStore.
var scheduleTests = []conformanceTest{
	{"Schedule_PutGetListDelete", testScheduleCRUD},
	{"Schedule_PauseAndDue", testSchedulePauseAndDue},
	{"Schedule_FireAdvancesOnceAndRecords", testScheduleFire},
	{"Schedule_FireConcurrentOneWinner", testScheduleFireConcurrent},
	{"Schedule_FireOverlapSkip", testScheduleFireOverlap},
	{"Schedule_TriggerAndRunsPaging", testScheduleTrigger},
	{"Schedule_RunsPruned", testScheduleRunsPruned},
	{"Schedule_PutKeepsNextRunAtOfSameSpec", testSchedulePutKeepsNext},
	{"Schedule_FireSkipsTickAlreadyRun", testScheduleFireSkipsSeenTick},
}

var tick0 = time.Date(2026, 3, 8, 7, 0, 0, 0, time.UTC)

func newSchedule(name string) *store.Schedule {
	return &store.Schedule{
		Name: name, Cron: "@every 1m", Timezone: "America/New_York", Category: "cat",
		URL: "http://127.0.0.1:1/work", Payload: json.RawMessage(`{"a":1}`),
		MaxRetries: 2, RetryDelay: 3, Timeout: 4,
		Misfire: store.MisfireOnce, MaxCatchup: 100, Overlap: store.OverlapAllow,
		NextRunAt: tick0,
	}
}

func putSchedule(t *testing.T, s store.Store, sc *store.Schedule) *store.Schedule {
	t.Helper()
	return must(s.SchedulePut(ctxT(t), sc))(t)
}

func scheduleJob(queue string) *store.JobInsertParams {
	return &store.JobInsertParams{Queue: queue, Category: "cat", URL: "http://127.0.0.1:1/work", Payload: json.RawMessage(`{"a":1}`), MaxRetries: 2}
}

func fire(t *testing.T, s store.Store, name string, expect time.Time, runs ...*store.ScheduleRunInsert) ([]*store.ScheduleRun, error) {
	t.Helper()
	return s.ScheduleFire(ctxT(t), &store.ScheduleFireParams{
		Name: name, Expect: expect, Next: expect.Add(time.Minute), Node: "node-a", Runs: runs,
	})
}

func testScheduleCRUD(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	got := putSchedule(t, s, newSchedule("b"))
	want := newSchedule("b")
	if got.Cron != want.Cron || got.Timezone != want.Timezone || got.URL != want.URL || string(got.Payload) != string(want.Payload) ||
		got.MaxRetries != 2 || got.RetryDelay != 3 || got.Timeout != 4 || got.Misfire != store.MisfireOnce ||
		got.MaxCatchup != 100 || got.Overlap != store.OverlapAllow || got.Paused || !got.NextRunAt.Equal(tick0) {
		t.Errorf("put returned %+v, want the fields of %+v", got, want)
	}
	if got.CreatedAt.IsZero() || got.NextRunAt.Location() != time.UTC {
		t.Errorf("created_at %v, next_run_at %v: want set and in UTC", got.CreatedAt, got.NextRunAt)
	}
	if got.ConcurrencyKey != "" || got.ConcurrencyLimit != 0 || got.Ordered {
		t.Errorf("put returned concurrency settings %q %d %v, want none", got.ConcurrencyKey, got.ConcurrencyLimit, got.Ordered)
	}
	repl := newSchedule("b")
	repl.Cron, repl.Payload, repl.Paused, repl.Overlap = "0 * * * *", nil, true, store.OverlapSkip
	repl.ConcurrencyKey, repl.ConcurrencyLimit, repl.Ordered = "tenant", 1, true
	putSchedule(t, s, repl)
	got = must(s.ScheduleGet(ctx, "b"))(t)
	if got.Cron != "0 * * * *" || got.Payload != nil || !got.Paused || got.Overlap != store.OverlapSkip ||
		got.ConcurrencyKey != "tenant" || got.ConcurrencyLimit != 1 || !got.Ordered {
		t.Errorf("after replace got %+v", got)
	}
	putSchedule(t, s, newSchedule("a"))
	putSchedule(t, s, newSchedule("c"))
	page := must(s.ScheduleList(ctx, &store.ScheduleListParams{Limit: 2}))(t)
	if len(page) != 2 || page[0].Name != "a" || page[1].Name != "b" {
		t.Fatalf("first page = %v, want a, b", names(page))
	}
	page = must(s.ScheduleList(ctx, &store.ScheduleListParams{After: "b", Limit: 2}))(t)
	if len(page) != 1 || page[0].Name != "c" {
		t.Fatalf("second page = %v, want c", names(page))
	}
	must(fire(t, s, "a", tick0, &store.ScheduleRunInsert{Tick: tick0, Job: scheduleJob("q")}))(t)
	if del := must(s.ScheduleDelete(ctx, "a"))(t); del.Name != "a" {
		t.Errorf("delete returned %q", del.Name)
	}
	if _, err := s.ScheduleGet(ctx, "a"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("get after delete: %v, want ErrNotFound", err)
	}
	if runs := must(s.ScheduleRuns(ctx, &store.ScheduleRunsParams{Name: "a", Limit: 10}))(t); len(runs) != 0 {
		t.Errorf("runs of a deleted schedule: %d, want none", len(runs))
	}
	if _, err := s.ScheduleDelete(ctx, "a"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("second delete: %v, want ErrNotFound", err)
	}
}

func names(ss []*store.Schedule) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.Name)
	}
	return out
}

func testSchedulePauseAndDue(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	for n, at := range map[string]time.Duration{"late": time.Minute, "early": 0, "future": time.Hour} {
		sc := newSchedule(n)
		sc.NextRunAt = tick0.Add(at)
		putSchedule(t, s, sc)
	}
	due := must(s.SchedulesDue(ctx, &store.SchedulesDueParams{Before: tick0.Add(time.Minute), Limit: 10}))(t)
	if got := names(due); fmt.Sprint(got) != "[early late]" {
		t.Fatalf("due = %v, want [early late] (earliest first, future left out)", got)
	}
	p := must(s.SchedulePause(ctx, &store.SchedulePauseParams{Name: "early", Paused: true}))(t)
	if !p.Paused || !p.NextRunAt.Equal(tick0) {
		t.Errorf("paused schedule: paused %t next %v, want true and unchanged", p.Paused, p.NextRunAt)
	}
	due = must(s.SchedulesDue(ctx, &store.SchedulesDueParams{Before: tick0.Add(time.Minute), Limit: 10}))(t)
	if got := names(due); fmt.Sprint(got) != "[late]" {
		t.Errorf("due with early paused = %v, want [late]", got)
	}
	if _, err := fire(t, s, "early", tick0, &store.ScheduleRunInsert{Tick: tick0, Job: scheduleJob("q")}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("fire a paused schedule: %v, want ErrNotFound", err)
	}
	next := tick0.Add(2 * time.Hour)
	p = must(s.SchedulePause(ctx, &store.SchedulePauseParams{Name: "early", Paused: false, NextRunAt: &next}))(t)
	if p.Paused || !p.NextRunAt.Equal(next) {
		t.Errorf("resumed schedule: paused %t next %v, want false and %v", p.Paused, p.NextRunAt, next)
	}
	if _, err := s.SchedulePause(ctx, &store.SchedulePauseParams{Name: "nope", Paused: true}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("pause unknown: %v, want ErrNotFound", err)
	}
}

func testScheduleFire(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	putQueue(t, s, "q")
	putSchedule(t, s, newSchedule("s"))
	before := must(s.Now(ctx))(t)
	runs := must(fire(t, s, "s", tick0,
		&store.ScheduleRunInsert{Tick: tick0.Add(-time.Minute), Reason: "misfire: skipped"},
		&store.ScheduleRunInsert{Tick: tick0, Job: scheduleJob("q"), Reason: "note"}))(t)
	if len(runs) != 2 {
		t.Fatalf("fire returned %d runs, want 2", len(runs))
	}
	if r := runs[0]; !r.Skipped || r.JobID != 0 || r.Reason != "misfire: skipped" || !r.Tick.Equal(tick0.Add(-time.Minute)) {
		t.Errorf("skipped run = %+v", r)
	}
	r := runs[1]
	if r.Skipped || r.JobID == 0 || r.Queue != "q" || r.Node != "node-a" || r.Kind != store.RunTick || r.Reason != "note" {
		t.Errorf("fired run = %+v", r)
	}
	if r.FiredAt.Before(before.Add(-time.Second)) {
		t.Errorf("fired_at %v is before the database's now %v", r.FiredAt, before)
	}
	j := must(s.JobGet(ctx, "q", r.JobID))(t)
	if j.Category != "cat" || string(j.Payload) != `{"a":1}` || j.MaxRetries != 2 {
		t.Errorf("job = %+v", j)
	}
	if got := must(s.ScheduleGet(ctx, "s"))(t); !got.NextRunAt.Equal(tick0.Add(time.Minute)) {
		t.Errorf("next_run_at = %v, want %v", got.NextRunAt, tick0.Add(time.Minute))
	}
	if _, err := fire(t, s, "s", tick0, &store.ScheduleRunInsert{Tick: tick0, Job: scheduleJob("q")}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("fire the same tick again: %v, want ErrNotFound", err)
	}
	hist := must(s.ScheduleRuns(ctx, &store.ScheduleRunsParams{Name: "s", Limit: 10}))(t)
	if len(hist) != 2 || hist[0].ID != r.ID || hist[1].ID != runs[0].ID || hist[0].JobID != r.JobID || !hist[0].Tick.Equal(tick0) {
		t.Errorf("history = %+v, want the two runs newest first", hist)
	}
}

func testScheduleFireConcurrent(t *testing.T, s store.Store) {
	putQueue(t, s, "q")
	putSchedule(t, s, newSchedule("s"))
	const n = 8
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		wins  int
		other []error
	)
	for range n {
		wg.Go(func() {
			_, err := s.ScheduleFire(ctxT(t), &store.ScheduleFireParams{
				Name: "s", Expect: tick0, Next: tick0.Add(time.Minute), Node: "n",
				Runs: []*store.ScheduleRunInsert{{Tick: tick0, Job: scheduleJob("q")}},
			})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				wins++
			case !errors.Is(err, store.ErrNotFound):
				other = append(other, err)
			}
		})
	}
	wg.Wait()
	if wins != 1 || len(other) > 0 {
		t.Fatalf("%d of %d racing fires won, other errors %v; want exactly one winner and only ErrNotFound", wins, n, other)
	}
	hist := must(s.ScheduleRuns(ctxT(t), &store.ScheduleRunsParams{Name: "s", Limit: 10}))(t)
	if len(hist) != 1 {
		t.Errorf("history has %d runs, want 1", len(hist))
	}
	grabbed := must(s.JobsGrab(ctxT(t), &store.JobsGrabParams{Queue: "q", Node: "n", Limit: 10, Lease: time.Minute}))(t)
	if len(grabbed) != 1 {
		t.Errorf("%d jobs enqueued, want 1", len(grabbed))
	}
}

func testScheduleFireOverlap(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	putQueue(t, s, "q")
	putSchedule(t, s, newSchedule("s"))
	fireSkip := func(tick time.Time, n int) []*store.ScheduleRun {
		t.Helper()
		var runs []*store.ScheduleRunInsert
		for i := range n {
			runs = append(runs, &store.ScheduleRunInsert{Tick: tick.Add(time.Duration(i) * time.Second), Job: scheduleJob("q")})
		}
		return must(s.ScheduleFire(ctx, &store.ScheduleFireParams{
			Name: "s", Expect: tick, Next: tick.Add(time.Minute), Node: "n", SkipOverlap: true, Runs: runs,
		}))(t)
	}
	// Two runs in one firing (a catch-up): the second overlaps the first.
	first := fireSkip(tick0, 2)
	if first[0].Skipped || !first[1].Skipped || first[1].Reason != store.OverlapReason(first[0].JobID) {
		t.Fatalf("catch-up runs = %+v, %+v; want the second skipped for overlap", first[0], first[1])
	}
	second := fireSkip(tick0.Add(time.Minute), 1)
	if !second[0].Skipped || second[0].Reason != store.OverlapReason(first[0].JobID) {
		t.Fatalf("run while the job waits = %+v, want skipped for overlap", second[0])
	}
	grabbed := must(s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: "n", Limit: 10, Lease: time.Minute}))(t)
	third := fireSkip(tick0.Add(2*time.Minute), 1)
	if !third[0].Skipped {
		t.Fatalf("run while the job is grabbed = %+v, want skipped", third[0])
	}
	must(s.JobsComplete(ctx, &store.JobsCompleteParams{Node: "n", IDs: []int64{grabbed[0].ID}}))(t)
	fourth := fireSkip(tick0.Add(3*time.Minute), 1)
	if fourth[0].Skipped || fourth[0].JobID == 0 {
		t.Fatalf("run after the job completed = %+v, want fired", fourth[0])
	}
}

func testScheduleTrigger(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	putQueue(t, s, "q")
	putSchedule(t, s, newSchedule("s"))
	if _, err := s.ScheduleTrigger(ctx, &store.ScheduleTriggerParams{Name: "nope", Node: "n", Job: scheduleJob("q")}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("trigger unknown: %v, want ErrNotFound", err)
	}
	var ids []int64
	for range 3 {
		r := must(s.ScheduleTrigger(ctx, &store.ScheduleTriggerParams{Name: "s", Node: "n", Job: scheduleJob("q")}))(t)
		if r.Kind != store.RunTrigger || r.JobID == 0 || r.Skipped {
			t.Fatalf("trigger run = %+v", r)
		}
		must(s.JobGet(ctx, "q", r.JobID))(t)
		ids = append(ids, r.ID)
	}
	if got := must(s.ScheduleGet(ctx, "s"))(t); !got.NextRunAt.Equal(tick0) {
		t.Errorf("trigger moved next_run_at to %v", got.NextRunAt)
	}
	page := must(s.ScheduleRuns(ctx, &store.ScheduleRunsParams{Name: "s", Limit: 2}))(t)
	if len(page) != 2 || page[0].ID != ids[2] || page[1].ID != ids[1] {
		t.Fatalf("first page = %+v", page)
	}
	page = must(s.ScheduleRuns(ctx, &store.ScheduleRunsParams{Name: "s", Before: page[1].ID, Limit: 2}))(t)
	if len(page) != 1 || page[0].ID != ids[0] {
		t.Fatalf("second page = %+v", page)
	}
}

func testScheduleRunsPruned(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	putSchedule(t, s, newSchedule("s"))
	var runs []*store.ScheduleRunInsert
	for i := range store.ScheduleRunsKept + 5 {
		runs = append(runs, &store.ScheduleRunInsert{Tick: tick0.Add(time.Duration(i) * time.Second), Reason: "skipped"})
	}
	must(fire(t, s, "s", tick0, runs...))(t)
	all := must(s.ScheduleRuns(ctx, &store.ScheduleRunsParams{Name: "s", Limit: 2 * store.ScheduleRunsKept}))(t)
	if len(all) != store.ScheduleRunsKept {
		t.Fatalf("history holds %d runs, want %d", len(all), store.ScheduleRunsKept)
	}
	if newest := tick0.Add(time.Duration(store.ScheduleRunsKept+4) * time.Second); !all[0].Tick.Equal(newest) {
		t.Errorf("newest run's tick = %v, want %v", all[0].Tick, newest)
	}
}

func testSchedulePutKeepsNext(t *testing.T, s store.Store) {
	later := tick0.Add(time.Hour)
	putSchedule(t, s, newSchedule("s"))
	same := newSchedule("s")
	same.NextRunAt, same.URL = later, "http://127.0.0.1:2/other"
	if got := putSchedule(t, s, same); !got.NextRunAt.Equal(tick0) || got.URL != same.URL {
		t.Errorf("same spec put again: next_run_at %v url %q, want %v kept and the new url", got.NextRunAt, got.URL, tick0)
	}
	other := newSchedule("s")
	other.Cron, other.NextRunAt = "@every 2m", later
	if got := putSchedule(t, s, other); !got.NextRunAt.Equal(later) {
		t.Errorf("new spec: next_run_at %v, want %v", got.NextRunAt, later)
	}
	zone := newSchedule("s")
	zone.Cron, zone.Timezone, zone.NextRunAt = "@every 2m", "Europe/Berlin", tick0
	if got := putSchedule(t, s, zone); !got.NextRunAt.Equal(tick0) {
		t.Errorf("new zone: next_run_at %v, want %v", got.NextRunAt, tick0)
	}
	must(s.SchedulePause(ctxT(t), &store.SchedulePauseParams{Name: "s", Paused: true}))(t)
	paused := newSchedule("s")
	paused.Cron, paused.Timezone, paused.NextRunAt = "@every 2m", "Europe/Berlin", later
	if got := putSchedule(t, s, paused); !got.NextRunAt.Equal(later) || got.Paused {
		t.Errorf("put over a paused schedule: next_run_at %v paused %t, want %v and unpaused", got.NextRunAt, got.Paused, later)
	}
}

// testScheduleFireSkipsSeenTick puts a schedule back to a tick that
// already fired (a put racing a firing could): firing it again enqueues
// nothing and moves on.
func testScheduleFireSkipsSeenTick(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	putQueue(t, s, "q")
	putSchedule(t, s, newSchedule("s"))
	must(fire(t, s, "s", tick0, &store.ScheduleRunInsert{Tick: tick0, Job: scheduleJob("q")}))(t)
	back := newSchedule("s")
	back.Cron = "@every 2m" // a new spec: the given next_run_at is stored
	putSchedule(t, s, back)
	runs := must(fire(t, s, "s", tick0, &store.ScheduleRunInsert{Tick: tick0, Job: scheduleJob("q")}))(t)
	if len(runs) != 0 {
		t.Errorf("tick fired again: %+v", runs)
	}
	if got := must(s.ScheduleGet(ctx, "s"))(t); !got.NextRunAt.Equal(tick0.Add(time.Minute)) {
		t.Errorf("next_run_at = %v, want it moved on", got.NextRunAt)
	}
	grabbed := must(s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: "n", Limit: 10, Lease: time.Minute}))(t)
	if len(grabbed) != 1 {
		t.Errorf("%d jobs, want 1", len(grabbed))
	}
}

// ScheduleFireBehindFrozenTx checks that firing a tick does not wait for a
// transaction that holds the schedule's row (a node frozen half-way
// through firing it: SIGSTOP, a stalled VM), but answers ErrNotFound, as
// when another node fired the tick; the tick is fired once that
// transaction ends without firing it. freeze opens a transaction on s's
// database that locks the schedule's row, and returns the function that
// rolls it back. It is for the dialects whose transactions lock rows
// (MySQL, PostgreSQL).
func ScheduleFireBehindFrozenTx(t *testing.T, s store.Store, freeze func(t *testing.T, name string) (rollback func())) {
	ctx := ctxT(t)
	putQueue(t, s, "q")
	putSchedule(t, s, newSchedule("s"))
	rollback := freeze(t, "s")
	defer rollback()
	start := time.Now()
	_, err := fire(t, s, "s", tick0, &store.ScheduleRunInsert{Tick: tick0, Job: scheduleJob("q")})
	if took := time.Since(start); !errors.Is(err, store.ErrNotFound) || took > store.LockWait/2 {
		t.Fatalf("fire beside a frozen transaction: %v after %v; want ErrNotFound at once", err, took)
	}
	rollback()
	runs := must(fire(t, s, "s", tick0, &store.ScheduleRunInsert{Tick: tick0, Job: scheduleJob("q")}))(t)
	if len(runs) != 1 || runs[0].JobID == 0 {
		t.Fatalf("fire after the frozen transaction ended: %+v, want the tick's run and job", runs)
	}
	if hist := must(s.ScheduleRuns(ctx, &store.ScheduleRunsParams{Name: "s", Limit: 10}))(t); len(hist) != 1 {
		t.Errorf("%d runs recorded, want 1", len(hist))
	}
}

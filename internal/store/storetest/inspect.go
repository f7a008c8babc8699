package storetest

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store"
)

// inspectTests are the conformance tests of store.InspectStore.
var inspectTests = []conformanceTest{
	{"Inspect_JobsListKindsAndOrder", testJobsListKinds},
	{"Inspect_JobsPagingUnderConcurrentWrites", testJobsPagingConcurrent},
	{"Inspect_JobDelete", testJobDelete},
	{"Inspect_FailedJobsListAndDelete", testFailedJobsList},
	{"Inspect_TablesSize", testTablesSize},
}

// testTablesSize: every table of rowq's schema is sized, and a table that
// holds rows takes space. (Row counts are the database's estimates, which
// lag on MySQL and PostgreSQL.)
func testTablesSize(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	putQueue(t, s, "q")
	insert(t, s, "q", 50, 0)
	ts := must(s.TablesSize(ctx))(t)
	byName := map[string]*store.TableSize{}
	for _, tb := range ts {
		if tb.Rows < 0 || tb.Bytes < 0 || tb.DeadRows < 0 {
			t.Errorf("table %s: %+v, want no negative size", tb.Name, tb)
		}
		byName[tb.Name] = tb
	}
	for _, name := range []string{"jobs", "failed_jobs", "queues", "routings", "nodes", "queue_stats", "locks", "lock_holders", "schedules", "schedule_runs", "rowq_migrations"} {
		if byName[name] == nil {
			t.Errorf("table %s not sized; got %d tables", name, len(ts))
		}
	}
	if j := byName["jobs"]; j != nil && j.Bytes == 0 {
		t.Errorf("jobs holds 50 rows in 0 bytes")
	}
}

// pageJobs walks a whole listing page by page and returns the jobs in the
// order seen.
func pageJobs(t *testing.T, s store.Store, p store.JobsListParams) []*store.Job {
	t.Helper()
	var all []*store.Job
	for {
		page := must(s.JobsList(ctxT(t), &p))(t)
		all = append(all, page...)
		if len(page) < p.Limit {
			return all
		}
		last := page[len(page)-1]
		p.After = &store.JobKey{NextTry: last.NextTry, ID: last.ID}
	}
}

// jobKeyLess orders jobs by the listing key (next_try, id).
func jobKeyLess(a, b *store.Job) bool {
	if !a.NextTry.Equal(b.NextTry) {
		return a.NextTry.Before(b.NextTry)
	}
	return a.ID < b.ID
}

func testJobsListKinds(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	// Inserted one by one so that next_try differs and ids do not follow it.
	var deferred []int64
	for _, d := range []time.Duration{3 * time.Hour, time.Hour, 2 * time.Hour} {
		deferred = append(deferred, insert(t, s, "q", 1, d)...)
	}
	due := insert(t, s, "q", 6, 0)
	insert(t, s, "other", 3, 0)
	grabbed := must(s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: "n1", Limit: 3, Lease: time.Minute}))(t)
	// A worker accepted one: leased jobs are listed with the grabbed.
	leased := grabbed[1]
	must(s.JobLease(ctx, &store.JobLeaseParams{ID: leased.ID, Grabs: leased.Grabs, Lease: time.Hour}))(t)

	for _, tc := range []struct {
		kind string
		want []int64 // ascending
	}{
		{store.JobsGrabbed, due[:3]},
		{store.JobsWaiting, due[3:]},
		{store.JobsDeferred, []int64{deferred[1], deferred[2], deferred[0]}},
	} {
		for _, desc := range []bool{false, true} {
			for _, limit := range []int{1, 2, 100} {
				got := pageJobs(t, s, store.JobsListParams{Queue: "q", Kind: tc.kind, Desc: desc, Limit: limit})
				want := slices.Clone(tc.want)
				if desc {
					slices.Reverse(want)
				}
				if !slices.Equal(jobIDs(got), want) {
					t.Errorf("%s desc=%v limit=%d: got %v, want %v", tc.kind, desc, limit, jobIDs(got), want)
				}
				for _, j := range got {
					if j.Queue != "q" || j.URL == "" || j.Payload == nil {
						t.Errorf("%s: listed job %+v", tc.kind, j)
					}
					wantState := store.StateWaiting
					switch {
					case j.ID == leased.ID:
						wantState = store.StateLeased
					case tc.kind == store.JobsGrabbed:
						wantState = store.StateGrabbed
					}
					if j.State != wantState {
						t.Errorf("%s: job %d has state %s, want %s", tc.kind, j.ID, j.State, wantState)
					}
					if j.State == store.StateLeased && (j.GrabbedTil == nil || time.Until(*j.GrabbedTil) < 30*time.Minute) {
						t.Errorf("%s: leased job %d lists lease expiry %v, want about an hour from now", tc.kind, j.ID, j.GrabbedTil)
					}
				}
			}
		}
	}
	if got := must(s.JobsList(ctx, &store.JobsListParams{Queue: "none", Kind: store.JobsWaiting, Limit: 10}))(t); len(got) != 0 {
		t.Errorf("listing an empty queue gave %d jobs", len(got))
	}
}

// testJobsPagingConcurrent pages through 10,000 jobs while other jobs are
// inserted and deleted: no job is seen twice, none that existed throughout
// is missed, and pages come in key order.
func testJobsPagingConcurrent(t *testing.T, s store.Store) {
	// Three minutes, not ctxT's one: SQLite under the race detector on a
	// loaded machine (CI at load 20) took over a minute with 10,000 jobs.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const n = 4_000
	// Deferred jobs over a spread of next_try values, inserted in batches
	// (a batch shares one next_try on some dialects: the id breaks ties).
	var stable []int64
	for b := range 10 {
		stable = append(stable, insert(t, s, "q", n/10, time.Duration(10-b)*time.Hour)...)
	}
	// Some of them are deleted while the listing runs.
	doomed := map[int64]bool{}
	for _, id := range stable {
		if rand.N(10) == 0 {
			doomed[id] = true
		}
	}
	stop, started := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	var writeErr error
	wg.Go(func() {
		defer func() {
			select {
			case <-started:
			default:
				close(started)
			}
		}()
		ids := make([]int64, 0, len(doomed))
		for id := range doomed {
			ids = append(ids, id)
		}
		// The writes end with the deletions: writing on while the listing
		// runs would let a slow machine's listing chase its own tail (each
		// page slower, more rows inserted meanwhile to list; SQLite at load
		// 20 ran out of the test's minute that way).
		for i := 0; i < len(ids); i++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := s.JobsInsert(ctx, []*store.JobInsertParams{
				{Queue: "q", Category: "c", URL: "http://w/", RunAfter: time.Duration(rand.N(11)+1) * time.Hour},
				{Queue: "q", Category: "c", URL: "http://w/", RunAfter: time.Duration(rand.N(11)+1) * time.Hour},
			}); err != nil {
				writeErr = err
				return
			}
			if _, err := s.JobDelete(ctx, "q", ids[i]); err != nil {
				writeErr = err
				return
			}
			if i == 0 {
				close(started)
			}
		}
	})
	<-started // the listing runs while the writes go on
	for _, desc := range []bool{false, true} {
		seen := map[int64]bool{}
		got := pageJobs(t, s, store.JobsListParams{Queue: "q", Kind: store.JobsDeferred, Desc: desc, Limit: 100})
		for i, j := range got {
			if seen[j.ID] {
				t.Fatalf("desc=%v: job %d listed twice", desc, j.ID)
			}
			seen[j.ID] = true
			if i > 0 && jobKeyLess(j, got[i-1]) != desc {
				t.Fatalf("desc=%v: job %d (%v) listed after %d (%v)", desc, j.ID, j.NextTry, got[i-1].ID, got[i-1].NextTry)
			}
		}
		missed := 0
		for _, id := range stable {
			if !doomed[id] && !seen[id] {
				missed++
			}
		}
		if missed > 0 {
			t.Fatalf("desc=%v: %d jobs that existed throughout were not listed", desc, missed)
		}
	}
	close(stop)
	wg.Wait()
	if writeErr != nil {
		t.Fatal(writeErr)
	}
}

func testJobDelete(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	ids := insert(t, s, "q", 2, 0)
	must(s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: "n1", Limit: 1, Lease: time.Minute}))(t)
	if _, err := s.JobDelete(ctx, "other", ids[0]); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("JobDelete in another queue err = %v, want ErrNotFound", err)
	}
	for i, id := range ids {
		j := must(s.JobDelete(ctx, "q", id))(t)
		if j.ID != id || j.Queue != "q" || string(j.Payload) == "" {
			t.Fatalf("JobDelete returned %+v", j)
		}
		if want := []string{store.StateGrabbed, store.StateWaiting}[i]; j.State != want {
			t.Errorf("deleted job %d had state %s, want %s", id, j.State, want)
		}
		if _, err := s.JobGet(ctx, "q", id); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("deleted job still there: %v", err)
		}
		if _, err := s.JobDelete(ctx, "q", id); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("second JobDelete err = %v, want ErrNotFound", err)
		}
	}
	// The holder of a deleted job cannot acknowledge it.
	if n := must(s.JobsComplete(ctx, &store.JobsCompleteParams{Node: "n1", IDs: ids[:1]}))(t); n != 0 {
		t.Fatalf("JobsComplete of a deleted job = %d", n)
	}
}

func testFailedJobsList(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	// Jobs created in the order a, b, c fail in the order c, a, b.
	var created []int64
	for range 3 {
		created = append(created, insert(t, s, "q", 1, 0)...)
		time.Sleep(2 * time.Millisecond) // distinct created_at on every clock
	}
	must(s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: "n1", Limit: 3, Lease: time.Minute}))(t)
	entry := map[int64]int64{} // job id → entry id
	for _, i := range []int{2, 0, 1} {
		f := must(s.JobFail(ctx, &store.JobFailParams{ID: created[i], Node: "n1", Status: "permanent-failure", Code: 500, Message: "x"}))(t)
		entry[created[i]] = f.ID
	}
	page := func(p store.FailedJobsListParams) []int64 {
		var out []int64
		for {
			fs := must(s.FailedJobsList(ctx, &p))(t)
			for _, f := range fs {
				if f.Queue != "q" || f.Status != "permanent-failure" || f.Code != 500 {
					t.Fatalf("listed entry %+v", f)
				}
				out = append(out, f.JobID)
			}
			if len(fs) < p.Limit {
				return out
			}
			last := fs[len(fs)-1]
			p.After = &store.FailedKey{CreatedAt: last.CreatedAt, ID: last.ID}
		}
	}
	a, b, c := created[0], created[1], created[2]
	for _, tc := range []struct {
		byCreated, desc bool
		want            []int64
	}{
		{false, true, []int64{b, a, c}},
		{false, false, []int64{c, a, b}},
		{true, true, []int64{c, b, a}},
		{true, false, []int64{a, b, c}},
	} {
		for _, limit := range []int{1, 2, 10} {
			got := page(store.FailedJobsListParams{Queue: "q", ByCreated: tc.byCreated, Desc: tc.desc, Limit: limit})
			if !slices.Equal(got, tc.want) {
				t.Errorf("byCreated=%v desc=%v limit=%d: got jobs %v, want %v", tc.byCreated, tc.desc, limit, got, tc.want)
			}
		}
	}
	if got := must(s.FailedJobsList(ctx, &store.FailedJobsListParams{Queue: "other", Limit: 10}))(t); len(got) != 0 {
		t.Errorf("other queue lists %d entries", len(got))
	}
	if _, err := s.FailedJobDelete(ctx, "other", entry[a]); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("FailedJobDelete in another queue err = %v", err)
	}
	f := must(s.FailedJobDelete(ctx, "q", entry[a]))(t)
	if f.ID != entry[a] || f.JobID != a {
		t.Fatalf("FailedJobDelete returned %+v", f)
	}
	if _, err := s.FailedJobGet(ctx, "q", entry[a]); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleted entry still there: %v", err)
	}
	if _, err := s.FailedJobDelete(ctx, "q", entry[a]); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second FailedJobDelete err = %v", err)
	}
}

package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store"
)

// finishedTests are the conformance tests of FinishedStore and of the
// writes that keep a finished job's history.
var finishedTests = []conformanceTest{
	{"Finished_KeepFinishedSetting", testFinishedSetting},
	{"Finished_CompleteKeepsHistory", testFinishedComplete},
	{"Finished_CompleteWithoutKeepDeletes", testFinishedCompleteNoKeep},
	{"Finished_CompleteGuardsHolder", testFinishedCompleteGuard},
	{"Finished_FailKeepsHistory", testFinishedFail},
	{"Finished_CancelKeepsHistoryWhenQueueKeeps", testFinishedCancel},
	{"Finished_ListPagesNewestFirst", testFinishedList},
	{"Finished_PruneOldInBatches", testFinishedPrune},
	{"Finished_SucceedKeepsHistoryByQueue", testFinishedSucceed},
	{"Finished_FinishKeepsHistoryByQueue", testFinishedFinish},
}

// keepQueue creates queue name keeping its finished jobs for a day.
func keepQueue(t *testing.T, s store.Store, name string) {
	t.Helper()
	must(s.QueuePut(ctxT(t), &store.Queue{Name: name, PollingInterval: 200, MaxWorkers: 20, KeepFinished: 86400}))(t)
}

func grabAll(t *testing.T, s store.Store, queue, node string) []*store.Job {
	t.Helper()
	return must(s.JobsGrab(ctxT(t), &store.JobsGrabParams{Queue: queue, Node: node, Limit: 100, Lease: time.Minute}))(t)
}

func testFinishedSetting(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	keepQueue(t, s, "q")
	if q := must(s.QueueGet(ctx, "q"))(t); q.KeepFinished != 86400 {
		t.Fatalf("KeepFinished = %d, want 86400", q.KeepFinished)
	}
	// QueueEnsure keeps what is stored; QueuePut replaces it.
	if q := must(s.QueueEnsure(ctx, &store.Queue{Name: "q", PollingInterval: 200, MaxWorkers: 20}))(t); q.KeepFinished != 86400 {
		t.Fatalf("QueueEnsure KeepFinished = %d, want 86400", q.KeepFinished)
	}
	if q := must(s.QueuePut(ctx, &store.Queue{Name: "q", PollingInterval: 200, MaxWorkers: 20}))(t); q.KeepFinished != 0 {
		t.Fatalf("QueuePut KeepFinished = %d, want 0", q.KeepFinished)
	}
	if q := must(s.QueueEnsure(ctx, &store.Queue{Name: "new", PollingInterval: 200, MaxWorkers: 20, KeepFinished: 60}))(t); q.KeepFinished != 60 {
		t.Fatalf("QueueEnsure of a new queue KeepFinished = %d, want 60", q.KeepFinished)
	}
}

func testFinishedComplete(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	keepQueue(t, s, "q")
	ids := insert(t, s, "q", 3, 0)
	jobs := grabAll(t, s, "q", "n1")
	if len(jobs) != 3 {
		t.Fatalf("grabbed %d jobs, want 3", len(jobs))
	}
	before := must(s.Now(ctx))(t)
	// The first two keep their history (the second without a result),
	// the third is deleted without.
	n := must(s.JobsComplete(ctx, &store.JobsCompleteParams{Node: "n1", IDs: ids, Keep: []store.FinishNote{
		{ID: ids[0], Message: "done", Result: json.RawMessage(`{"rows":[1,2]}`)},
		{ID: ids[1]},
	}}))(t)
	if n != 3 {
		t.Fatalf("JobsComplete = %d, want 3", n)
	}
	for _, id := range ids {
		if _, err := s.JobGet(ctx, "q", id); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("JobGet(%d) after complete: err = %v, want ErrNotFound", id, err)
		}
	}
	f := must(s.FinishedGet(ctx, "q", ids[0]))(t)
	if f.ID != ids[0] || f.Queue != "q" || f.Category != "cat" || f.Status != store.FinishedSucceeded || f.Attempts != 1 ||
		f.Message != "done" || string(f.Payload) != `{"i":0}` || f.URL != "http://127.0.0.1:1/work" {
		t.Fatalf("FinishedGet = %+v", f)
	}
	var res any
	if err := json.Unmarshal(f.Result, &res); err != nil {
		t.Fatalf("result %q: %v", f.Result, err)
	}
	if f.StartedAt == nil || f.FinishedAt.Before(before.Add(-time.Second)) || f.FinishedAt.After(before.Add(time.Minute)) ||
		!f.CreatedAt.Equal(jobs[0].CreatedAt) {
		t.Fatalf("times: created %v started %v finished %v (now %v)", f.CreatedAt, f.StartedAt, f.FinishedAt, before)
	}
	if f := must(s.FinishedGet(ctx, "q", ids[1]))(t); f.Result != nil || f.Message != "" {
		t.Fatalf("FinishedGet without result = %+v", f)
	}
	if _, err := s.FinishedGet(ctx, "q", ids[2]); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("FinishedGet of a job not kept: err = %v, want ErrNotFound", err)
	}
	if _, err := s.FinishedGet(ctx, "other", ids[0]); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("FinishedGet of another queue: err = %v, want ErrNotFound", err)
	}
}

func testFinishedCompleteNoKeep(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	keepQueue(t, s, "q") // the store follows Keep, not the setting
	ids := insert(t, s, "q", 2, 0)
	grabAll(t, s, "q", "n1")
	if n := must(s.JobsComplete(ctx, &store.JobsCompleteParams{Node: "n1", IDs: ids}))(t); n != 2 {
		t.Fatalf("JobsComplete = %d, want 2", n)
	}
	if fs := must(s.FinishedList(ctx, &store.FinishedListParams{Queue: "q", Limit: 10}))(t); len(fs) != 0 {
		t.Fatalf("history without Keep: %d rows", len(fs))
	}
}

func testFinishedCompleteGuard(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	keepQueue(t, s, "q")
	ids := insert(t, s, "q", 1, 0)
	grabAll(t, s, "q", "n1")
	// Another node's acknowledgement finds nothing and keeps nothing.
	if n := must(s.JobsComplete(ctx, &store.JobsCompleteParams{Node: "n2", IDs: ids, Keep: []store.FinishNote{{ID: ids[0]}}}))(t); n != 0 {
		t.Fatalf("JobsComplete by another node = %d, want 0", n)
	}
	if _, err := s.FinishedGet(ctx, "q", ids[0]); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("FinishedGet after a refused complete: err = %v, want ErrNotFound", err)
	}
	if _, err := s.JobGet(ctx, "q", ids[0]); err != nil {
		t.Fatalf("job gone after a refused complete: %v", err)
	}
}

func testFinishedFail(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	keepQueue(t, s, "q")
	ids := insert(t, s, "q", 2, 0)
	grabAll(t, s, "q", "n1")
	entry := must(s.JobFail(ctx, &store.JobFailParams{ID: ids[0], Node: "n1", Status: "permanent-failure", Code: 500, Message: "boom", Keep: true}))(t)
	must(s.JobFail(ctx, &store.JobFailParams{ID: ids[1], Node: "n1", Status: "permanent-failure", Code: 500, Message: "boom"}))(t)
	f := must(s.FinishedGet(ctx, "q", ids[0]))(t)
	if f.Status != store.FinishedFailed || f.Attempts != 1 || f.Message != "boom" || f.Result != nil {
		t.Fatalf("FinishedGet of a failed job = %+v", f)
	}
	if _, err := s.FinishedGet(ctx, "q", ids[1]); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("FinishedGet of a failure not kept: err = %v, want ErrNotFound", err)
	}
	// Retried from the failure log, failed again: its row is replaced.
	must(s.FailedJobRetry(ctx, "q", entry.ID))(t)
	grabAll(t, s, "q", "n1")
	must(s.JobFail(ctx, &store.JobFailParams{ID: ids[0], Node: "n1", Status: "failure", Code: 503, Message: "again", Keep: true}))(t)
	if f := must(s.FinishedGet(ctx, "q", ids[0]))(t); f.Message != "again" || f.Attempts != 1 {
		t.Fatalf("FinishedGet after a second failure = %+v", f)
	}
}

func testFinishedCancel(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	keepQueue(t, s, "q")
	putQueue(t, s, "plain")
	waiting := insert(t, s, "q", 1, time.Hour)[0]
	held := insert(t, s, "q", 1, 0)[0]
	grabAll(t, s, "q", "n1")
	plain := insert(t, s, "plain", 1, 0)[0]
	must(s.JobCancel(ctx, "q", waiting))(t)
	must(s.JobCancel(ctx, "q", held))(t)
	must(s.JobCancel(ctx, "plain", plain))(t)
	f := must(s.FinishedGet(ctx, "q", waiting))(t)
	if f.Status != store.FinishedCancelled || f.Attempts != 0 || f.StartedAt != nil {
		t.Fatalf("cancelled while waiting: %+v", f)
	}
	f = must(s.FinishedGet(ctx, "q", held))(t)
	if f.Status != store.FinishedCancelled || f.Attempts != 1 || f.StartedAt == nil {
		t.Fatalf("cancelled while grabbed: %+v", f)
	}
	if _, err := s.FinishedGet(ctx, "plain", plain); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a queue that keeps nothing kept a cancel: err = %v", err)
	}
}

// finishSome completes, fails and cancels jobs of queue q of category
// cat: n of each, kept.
func finishSome(t *testing.T, ctx context.Context, s store.Store, q string, n int) {
	t.Helper()
	ids := insert(t, s, q, 3*n, 0)
	grabAll(t, s, q, "n1")
	keep := make([]store.FinishNote, n)
	for i := range n {
		keep[i] = store.FinishNote{ID: ids[i]}
	}
	must(s.JobsComplete(ctx, &store.JobsCompleteParams{Node: "n1", IDs: ids[:n], Keep: keep}))(t)
	for _, id := range ids[n : 2*n] {
		must(s.JobFail(ctx, &store.JobFailParams{ID: id, Node: "n1", Status: "permanent-failure", Keep: true}))(t)
	}
	for _, id := range ids[2*n:] {
		must(s.JobCancel(ctx, q, id))(t)
	}
}

func testFinishedList(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	keepQueue(t, s, "q")
	keepQueue(t, s, "other")
	finishSome(t, ctx, s, "q", 4)
	finishSome(t, ctx, s, "other", 1)

	// Pages of 5 walk all 12 rows, newest first, each once.
	var all []*store.FinishedJob
	p := &store.FinishedListParams{Queue: "q", Limit: 5}
	for range 10 {
		page := must(s.FinishedList(ctx, p))(t)
		all = append(all, page...)
		if len(page) < p.Limit {
			break
		}
		last := page[len(page)-1]
		p.Before = &store.FinishedCursor{FinishedAt: last.FinishedAt, ID: last.ID}
	}
	if len(all) != 12 {
		t.Fatalf("listed %d rows, want 12", len(all))
	}
	seen := map[int64]bool{}
	for i, f := range all {
		if f.Queue != "q" || seen[f.ID] {
			t.Fatalf("row %d: %+v (seen before: %v)", i, f, seen[f.ID])
		}
		seen[f.ID] = true
		if i > 0 {
			prev := all[i-1]
			if f.FinishedAt.After(prev.FinishedAt) || f.FinishedAt.Equal(prev.FinishedAt) && f.ID > prev.ID {
				t.Fatalf("row %d (%v, %d) after row %d (%v, %d): not newest first", i, f.FinishedAt, f.ID, i-1, prev.FinishedAt, prev.ID)
			}
		}
	}
	for _, st := range []string{store.FinishedSucceeded, store.FinishedFailed, store.FinishedCancelled} {
		fs := must(s.FinishedList(ctx, &store.FinishedListParams{Queue: "q", Status: st, Limit: 100}))(t)
		if len(fs) != 4 {
			t.Fatalf("status %s: %d rows, want 4", st, len(fs))
		}
		for _, f := range fs {
			if f.Status != st {
				t.Fatalf("status %s listed %+v", st, f)
			}
		}
	}
	if fs := must(s.FinishedList(ctx, &store.FinishedListParams{Queue: "q", Category: "none", Limit: 100}))(t); len(fs) != 0 {
		t.Fatalf("category none: %d rows", len(fs))
	}
	if fs := must(s.FinishedList(ctx, &store.FinishedListParams{Queue: "q", Category: "cat", Limit: 100}))(t); len(fs) != 12 {
		t.Fatalf("category cat: %d rows, want 12", len(fs))
	}
	// since is inclusive, until exclusive.
	at := all[5].FinishedAt
	since := must(s.FinishedList(ctx, &store.FinishedListParams{Queue: "q", Since: at, Limit: 100}))(t)
	until := must(s.FinishedList(ctx, &store.FinishedListParams{Queue: "q", Until: at, Limit: 100}))(t)
	if len(since)+len(until) != 12 || len(since) < 6 {
		t.Fatalf("since %v: %d rows, until: %d rows; want 12 in all, at least 6 since", at, len(since), len(until))
	}
	for _, f := range since {
		if f.FinishedAt.Before(at) {
			t.Fatalf("since %v listed %v", at, f.FinishedAt)
		}
	}
	for _, f := range until {
		if !f.FinishedAt.Before(at) {
			t.Fatalf("until %v listed %v", at, f.FinishedAt)
		}
	}
}

func testFinishedPrune(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	keepQueue(t, s, "q")
	keepQueue(t, s, "other")
	finishSome(t, ctx, s, "q", 3)
	finishSome(t, ctx, s, "other", 1)
	// Nothing is older than an hour.
	if n := must(s.FinishedPrune(ctx, &store.FinishedPruneParams{Queue: "q", Age: time.Hour, Limit: 100}))(t); n != 0 {
		t.Fatalf("prune of an hour = %d, want 0", n)
	}
	// Wait until every row is older than 10ms by the database's clock.
	deadline := time.Now().Add(30 * time.Second)
	for {
		if n := must(s.FinishedPrune(ctx, &store.FinishedPruneParams{Queue: "q", Age: 10 * time.Millisecond, Limit: 4}))(t); n != 4 {
			if time.Now().After(deadline) {
				t.Fatalf("prune of 4 = %d, want 4", n)
			}
			time.Sleep(20 * time.Millisecond)
			continue
		}
		break
	}
	left := must(s.FinishedList(ctx, &store.FinishedListParams{Queue: "q", Limit: 100}))(t)
	if len(left) > 5 {
		t.Fatalf("after pruning 4 and maybe more: %d rows left, want at most 5", len(left))
	}
	// The newest rows may need a moment more to be 10ms old.
	for {
		must(s.FinishedPrune(ctx, &store.FinishedPruneParams{Queue: "q", Age: 10 * time.Millisecond, Limit: 4}))(t)
		left := must(s.FinishedList(ctx, &store.FinishedListParams{Queue: "q", Limit: 100}))(t)
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after pruning all: %d rows left", len(left))
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Another queue's rows are its own leader's.
	if other := must(s.FinishedList(ctx, &store.FinishedListParams{Queue: "other", Limit: 100}))(t); len(other) != 3 {
		t.Fatalf("other queue: %d rows, want 3", len(other))
	}
}

func testFinishedSucceed(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	keepQueue(t, s, "q")
	putQueue(t, s, "plain")
	a, b := grabOne(t, s, "q", 0), grabOne(t, s, "q", 0)
	plain := grabOne(t, s, "plain", 0)
	gone := grabOne(t, s, "q", 0)
	must(s.JobCancel(ctx, "q", gone.ID))(t)
	// A completion on a queue that keeps history with a result and one
	// without notes; one of a queue that keeps none; one no longer held.
	queues := must(s.JobsSucceed(ctx, &store.JobsSucceedParams{
		Grabs:  []store.JobGrab{{ID: a.ID, Grabs: a.Grabs}, {ID: plain.ID, Grabs: plain.Grabs}, {ID: gone.ID, Grabs: gone.Grabs}},
		Status: "success",
		Notes:  []store.FinishNote{{ID: a.ID, Message: "ok", Result: json.RawMessage(`[1,"two"]`)}, {ID: plain.ID, Result: json.RawMessage(`1`)}, {ID: gone.ID}},
	}))(t)
	if queues[0] != "q" || queues[1] != "plain" || queues[2] != "" {
		t.Fatalf("JobsSucceed = %q", queues)
	}
	must(s.JobsSucceed(ctx, &store.JobsSucceedParams{Grabs: []store.JobGrab{{ID: b.ID, Grabs: b.Grabs}}, Status: "success"}))(t)
	f := must(s.FinishedGet(ctx, "q", a.ID))(t)
	if f.Status != store.FinishedSucceeded || f.Message != "ok" || string(f.Result) != `[1,"two"]` || f.Attempts != 1 {
		t.Fatalf("history of a completed job = %+v (result %s)", f, f.Result)
	}
	if f := must(s.FinishedGet(ctx, "q", b.ID))(t); f.Status != store.FinishedSucceeded || f.Result != nil {
		t.Fatalf("history of a completion without notes = %+v", f)
	}
	if _, err := s.FinishedGet(ctx, "plain", plain.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a queue that keeps nothing kept a completion: err = %v", err)
	}
	if f := must(s.FinishedGet(ctx, "q", gone.ID))(t); f.Status != store.FinishedCancelled {
		t.Fatalf("a completion after the cancel rewrote its history: %+v", f)
	}
}

func testFinishedFinish(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	keepQueue(t, s, "q")
	putQueue(t, s, "plain")
	ok1, retried, failed := grabOne(t, s, "q", 0), grabOne(t, s, "q", 3), grabOne(t, s, "q", 0)
	plain := grabOne(t, s, "plain", 0)
	must(s.JobFinish(ctx, &store.JobFinishParams{ID: ok1.ID, Grabs: ok1.Grabs, Outcome: store.FinishDelete, Status: "success",
		Message: "fine", Result: json.RawMessage(`{"n":1}`)}))(t)
	must(s.JobFinish(ctx, &store.JobFinishParams{ID: retried.ID, Grabs: retried.Grabs, Outcome: store.FinishRetry, Status: "failure", Delay: time.Hour}))(t)
	must(s.JobFinish(ctx, &store.JobFinishParams{ID: failed.ID, Grabs: failed.Grabs, Outcome: store.FinishFail, Status: "permanent-failure", Message: "no"}))(t)
	must(s.JobFinish(ctx, &store.JobFinishParams{ID: plain.ID, Grabs: plain.Grabs, Outcome: store.FinishDelete, Status: "success", Result: json.RawMessage(`1`)}))(t)
	if f := must(s.FinishedGet(ctx, "q", ok1.ID))(t); f.Status != store.FinishedSucceeded || f.Message != "fine" || string(f.Result) != `{"n":1}` {
		t.Fatalf("history of a finished success = %+v (result %s)", f, f.Result)
	}
	if _, err := s.FinishedGet(ctx, "q", retried.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a retried job has history: err = %v", err)
	}
	if f := must(s.FinishedGet(ctx, "q", failed.ID))(t); f.Status != store.FinishedFailed || f.Message != "no" || f.Result != nil {
		t.Fatalf("history of a failure = %+v", f)
	}
	if _, err := s.FinishedGet(ctx, "plain", plain.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a queue that keeps nothing kept a success: err = %v", err)
	}
	// A grab that no longer holds its job writes no history.
	if _, err := s.JobFinish(ctx, &store.JobFinishParams{ID: retried.ID, Grabs: retried.Grabs, Outcome: store.FinishDelete, Status: "success"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("JobFinish of a grab that lost its job: err = %v, want ErrNotFound", err)
	}
	if _, err := s.FinishedGet(ctx, "q", retried.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a refused finish wrote history: err = %v", err)
	}
}

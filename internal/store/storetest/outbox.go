package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store"
)

// outboxTests are the conformance tests of store.OutboxStore.
var outboxTests = []conformanceTest{
	{"Outbox_InsertReadMove", testOutboxInsertReadMove},
	{"Outbox_MoveOnce", testOutboxMoveOnce},
	{"Outbox_MoveConcurrent", testOutboxMoveConcurrent},
	{"Outbox_UniqueKey", testOutboxUniqueKey},
	{"Outbox_RejectsPage", testOutboxRejectsPage},
	{"Outbox_AnnouncedOnlyWhileWaiting", testOutboxAnnounced},
}

// outboxAnnounces says, per dialect, whether OutboxListen announces
// commits into the outbox. It is pinned rather than read from what
// OutboxListen answers, so that PostgreSQL losing its announcements fails
// here instead of passing as a dialect that cannot announce.
var outboxAnnounces = map[string]bool{
	"postgres": true,  // LISTEN/NOTIFY from a trigger on rowq_outbox
	"mysql":    false, // no notifications: the mover probes
	"sqlite":   false, // no notifications: the mover probes
}

// testOutboxAnnounced: PostgreSQL announces commits into the outbox, and
// only while the mover says it waits; MySQL and SQLite answer
// errors.ErrUnsupported at once, and OutboxWaiting is a no-op there.
func testOutboxAnnounced(t *testing.T, s store.Store) {
	announces, known := outboxAnnounces[s.Dialect()]
	if !known {
		t.Fatalf("dialect %q: say in outboxAnnounces whether it announces commits into the outbox", s.Dialect())
	}
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	ready, heard, done := make(chan struct{}), make(chan struct{}, 16), make(chan error, 1)
	go func() {
		done <- s.OutboxListen(ctx, func() { close(ready) }, func() { heard <- struct{}{} })
	}()
	select {
	case err := <-done:
		if announces {
			t.Fatalf("OutboxListen on %s = %v, want it to listen: %s announces commits into the outbox", s.Dialect(), err, s.Dialect())
		}
		if !errors.Is(err, errors.ErrUnsupported) {
			t.Fatalf("OutboxListen on %s = %v, want errors.ErrUnsupported", s.Dialect(), err)
		}
		ok(t, s.OutboxWaiting(ctx, true))
		ok(t, s.OutboxWaiting(ctx, false))
		return
	case <-ready:
		if !announces {
			t.Fatalf("OutboxListen on %s listens, but outboxAnnounces says %s cannot announce: update it", s.Dialect(), s.Dialect())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("OutboxListen on %s neither listened nor refused within 30s", s.Dialect())
	}
	insert := func() { ok(t, s.OutboxInsert(ctx, []*store.OutboxRow{{Category: "c"}, {Category: "c"}})) }
	quiet := func(what string) {
		t.Helper()
		select {
		case <-heard:
			t.Fatalf("a commit was announced %s", what)
		case <-time.After(300 * time.Millisecond):
		}
	}
	insert()
	quiet("while the mover does not wait")
	ok(t, s.OutboxWaiting(ctx, true))
	ok(t, s.OutboxWaiting(ctx, true)) // twice: the same
	insert()
	select {
	case <-heard:
	case <-time.After(10 * time.Second):
		t.Fatal("a commit was not announced while the mover waits")
	}
	quiet("twice for one transaction")
	ok(t, s.OutboxWaiting(ctx, false))
	insert()
	quiet("after the mover stopped waiting")
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("OutboxListen after its context ended = %v", err)
	}
}

func ptr[T any](v T) *T { return &v }

// outboxJob is the job a mover makes of row r (URL and payload as given).
func outboxJob(r *store.OutboxRow, queue string) store.OutboxJob {
	j := &store.JobInsertParams{Queue: queue, Category: r.Category, URL: *r.URL}
	if r.Payload != nil {
		j.Payload = []byte(*r.Payload)
	}
	if r.UniqueKey != nil {
		j.UniqueKey = *r.UniqueKey
	}
	if r.ConcurrencyKey != nil {
		j.ConcurrencyKey, j.ConcurrencyLimit, j.Ordered = *r.ConcurrencyKey, *r.ConcurrencyLimit, *r.Ordered
	}
	return store.OutboxJob{OutboxID: r.ID, Job: j}
}

func testOutboxInsertReadMove(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	if rows := must(s.OutboxRead(ctx, 10))(t); len(rows) != 0 {
		t.Fatalf("OutboxRead of an empty outbox = %d rows, want 0", len(rows))
	}
	full := &store.OutboxRow{Category: "c", URL: ptr("http://a/1"), Payload: ptr(`{"n":1}`), RunAfter: ptr(0),
		MaxRetries: ptr(3), RetryDelay: ptr(4), Timeout: ptr(5), Priority: ptr(-6), UniqueKey: ptr("k"),
		TraceParent: ptr("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"), TraceState: ptr("rojo=1"),
		ConcurrencyKey: ptr("order:7"), ConcurrencyLimit: ptr(1), Ordered: ptr(true)}
	bare := &store.OutboxRow{Category: "c", URL: ptr("http://a/2")}
	bad := &store.OutboxRow{Category: "bad category", Payload: ptr("not json"), TraceParent: ptr("00-bad"),
		ConcurrencyLimit: ptr(0), Ordered: ptr(false)}
	ok(t, s.OutboxInsert(ctx, []*store.OutboxRow{full, bare, bad}))
	rows := must(s.OutboxRead(ctx, 10))(t)
	if len(rows) != 3 || !(rows[0].ID < rows[1].ID && rows[1].ID < rows[2].ID) {
		t.Fatalf("OutboxRead = %d rows, want 3 by id", len(rows))
	}
	if got := must(s.OutboxRead(ctx, 2))(t); len(got) != 2 || got[0].ID != rows[0].ID {
		t.Fatalf("OutboxRead(limit 2) = %d rows, want the first 2", len(got))
	}
	for i, want := range []*store.OutboxRow{full, bare, bad} {
		got := *rows[i]
		if got.CreatedAt.IsZero() {
			t.Errorf("row %d: no created_at", i)
		}
		got.ID, got.CreatedAt = 0, want.CreatedAt
		if g, w := fmt.Sprintf("%v", outboxFields(&got)), fmt.Sprintf("%v", outboxFields(want)); g != w {
			t.Errorf("row %d read back as %s, want %s", i, g, w)
		}
	}

	moved := must(s.OutboxMove(ctx, &store.OutboxMoveParams{
		Jobs:    []store.OutboxJob{outboxJob(rows[0], "q"), outboxJob(rows[1], "q")},
		Rejects: []store.OutboxRejectParams{{Row: rows[2], Reason: "category: use letters"}},
	}))(t)
	if len(moved.Jobs) != 2 || len(moved.Pushed) != 2 || moved.Rejected != 1 {
		t.Fatalf("OutboxMove = %d jobs, %d pushed, %d rejected; want 2, 2, 1", len(moved.Jobs), len(moved.Pushed), moved.Rejected)
	}
	for i, p := range moved.Pushed {
		j := must(s.JobGet(ctx, "q", p.ID))(t)
		if p.Existing || j.URL != *rows[i].URL {
			t.Errorf("job %d = %+v (existing %v), want the job of outbox row %d", i, j, p.Existing, i)
		}
	}
	// The ordered row's job is its key's head.
	if heads := must(s.JobsKeyHeads(ctx, &store.JobsKeyHeadsParams{Queue: "q", Keys: []string{"order:7"}}))(t); heads["order:7"] != moved.Pushed[0].ID {
		t.Errorf("heads of the outbox row's ordered key = %v, want order:7: %d", heads, moved.Pushed[0].ID)
	}
	if rest := must(s.OutboxRead(ctx, 10))(t); len(rest) != 0 {
		t.Fatalf("outbox after the move holds %d rows, want 0", len(rest))
	}
	rejects := must(s.OutboxRejects(ctx, &store.OutboxRejectsParams{Limit: 10}))(t)
	if len(rejects) != 1 {
		t.Fatalf("OutboxRejects = %d, want 1", len(rejects))
	}
	r := rejects[0]
	if r.Row.ID != rows[2].ID || r.Reason != "category: use letters" || r.Row.Category != "bad category" ||
		r.Row.Payload == nil || *r.Row.Payload != "not json" || r.Row.URL != nil || r.RejectedAt.IsZero() ||
		r.Row.TraceParent == nil || *r.Row.TraceParent != "00-bad" || r.Row.TraceState != nil ||
		r.Row.ConcurrencyKey != nil || r.Row.ConcurrencyLimit == nil || *r.Row.ConcurrencyLimit != 0 ||
		r.Row.Ordered == nil || *r.Row.Ordered ||
		!r.Row.CreatedAt.Equal(rows[2].CreatedAt) {
		t.Fatalf("reject = %+v (row %+v), want outbox row %d as it was, with its reason", r, r.Row, rows[2].ID)
	}
	if n := must(s.OutboxRejectsCount(ctx))(t); n != 1 {
		t.Fatalf("OutboxRejectsCount = %d, want 1", n)
	}
}

// outboxFields shows what an application wrote in a row, NULLs as <nil>.
func outboxFields(r *store.OutboxRow) []any {
	show := func(v any) any {
		switch v := v.(type) {
		case *string:
			if v != nil {
				return *v
			}
		case *int:
			if v != nil {
				return *v
			}
		case *bool:
			if v != nil {
				return *v
			}
		}
		return nil
	}
	return []any{r.Category, show(r.URL), show(r.Payload), show(r.RunAfter), show(r.MaxRetries), show(r.RetryDelay),
		show(r.Timeout), show(r.Priority), show(r.UniqueKey), show(r.TraceParent), show(r.TraceState),
		show(r.ConcurrencyKey), show(r.ConcurrencyLimit), show(r.Ordered)}
}

// testOutboxMoveOnce moves rows that a move took already: nothing is
// stored twice.
func testOutboxMoveOnce(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	ok(t, s.OutboxInsert(ctx, []*store.OutboxRow{{Category: "c", URL: ptr("http://a/1")}, {Category: "c", URL: ptr("http://a/2")}}))
	rows := must(s.OutboxRead(ctx, 10))(t)
	p := &store.OutboxMoveParams{Jobs: []store.OutboxJob{outboxJob(rows[0], "q")}, Rejects: []store.OutboxRejectParams{{Row: rows[1], Reason: "r"}}}
	if m := must(s.OutboxMove(ctx, p))(t); len(m.Jobs) != 1 || m.Rejected != 1 {
		t.Fatalf("first move = %d jobs, %d rejects; want 1, 1", len(m.Jobs), m.Rejected)
	}
	if m := must(s.OutboxMove(ctx, p))(t); len(m.Jobs) != 0 || len(m.Pushed) != 0 || m.Rejected != 0 {
		t.Fatalf("second move of the same rows = %d jobs, %d rejects; want none", len(m.Jobs), m.Rejected)
	}
	if jobs := must(s.JobsList(ctx, &store.JobsListParams{Queue: "q", Kind: store.JobsWaiting, Limit: 10}))(t); len(jobs) != 1 {
		t.Fatalf("queue holds %d jobs, want 1", len(jobs))
	}
	if n := must(s.OutboxRejectsCount(ctx))(t); n != 1 {
		t.Fatalf("rejects = %d, want 1", n)
	}
}

// testOutboxMoveConcurrent has several movers move the same rows at once
// (as two nodes for the instant after a failover): each row becomes one
// job.
func testOutboxMoveConcurrent(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	const n = 60
	in := make([]*store.OutboxRow, n)
	for i := range in {
		in[i] = &store.OutboxRow{Category: "c", URL: ptr(fmt.Sprintf("http://a/%d", i))}
	}
	ok(t, s.OutboxInsert(ctx, in))
	rows := must(s.OutboxRead(ctx, n))(t)
	var jobs []store.OutboxJob
	for _, r := range rows {
		jobs = append(jobs, outboxJob(r, "q"))
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		total int
	)
	for range 4 {
		wg.Go(func() {
			for range 5 {
				m, err := s.OutboxMove(ctx, &store.OutboxMoveParams{Jobs: jobs})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				total += len(m.Pushed)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if total != n {
		t.Fatalf("concurrent moves reported %d jobs, want %d", total, n)
	}
	if got := must(s.JobsList(ctx, &store.JobsListParams{Queue: "q", Kind: store.JobsWaiting, Limit: 2 * n}))(t); len(got) != n {
		t.Fatalf("queue holds %d jobs, want %d", len(got), n)
	}
}

// testOutboxUniqueKey moves a row whose unique key a pending job holds:
// as with JobsPush, the row goes and no job is stored.
func testOutboxUniqueKey(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	held := must(s.JobsPush(ctx, []*store.JobInsertParams{{Queue: "q", Category: "c", URL: "http://a/0", JobOptions: store.JobOptions{UniqueKey: "k"}}}))(t)
	ok(t, s.OutboxInsert(ctx, []*store.OutboxRow{{Category: "c", URL: ptr("http://a/1"), UniqueKey: ptr("k")}}))
	rows := must(s.OutboxRead(ctx, 10))(t)
	m := must(s.OutboxMove(ctx, &store.OutboxMoveParams{Jobs: []store.OutboxJob{outboxJob(rows[0], "q")}}))(t)
	if len(m.Pushed) != 1 || !m.Pushed[0].Existing || m.Pushed[0].ID != held[0].ID {
		t.Fatalf("move of a taken key = %+v, want the holder %d as existing", m.Pushed, held[0].ID)
	}
	if rest := must(s.OutboxRead(ctx, 10))(t); len(rest) != 0 {
		t.Fatalf("outbox holds %d rows after the move, want 0", len(rest))
	}
}

func testOutboxRejectsPage(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	ok(t, s.OutboxInsert(ctx, []*store.OutboxRow{{Category: "a"}, {Category: "b"}, {Category: "c"}}))
	rows := must(s.OutboxRead(ctx, 10))(t)
	p := &store.OutboxMoveParams{}
	for _, r := range rows {
		p.Rejects = append(p.Rejects, store.OutboxRejectParams{Row: r, Reason: "url: required"})
	}
	must(s.OutboxMove(ctx, p))(t)
	first := must(s.OutboxRejects(ctx, &store.OutboxRejectsParams{Limit: 2}))(t)
	if len(first) != 2 || first[0].Row.Category != "a" || first[1].Row.Category != "b" {
		t.Fatalf("first page = %d rejects, want a and b", len(first))
	}
	next := must(s.OutboxRejects(ctx, &store.OutboxRejectsParams{After: first[1].ID, Limit: 2}))(t)
	if len(next) != 1 || next[0].Row.Category != "c" {
		t.Fatalf("second page = %d rejects, want c", len(next))
	}
	if n := must(s.OutboxRejectsCount(ctx))(t); n != 3 {
		t.Fatalf("OutboxRejectsCount = %d, want 3", n)
	}
}

// OutboxAbort is what a dialect's test supplies to OutboxMoveAborted.
type OutboxAbort struct {
	// HoldKey begins a transaction that inserts a job of queue "q" with
	// unique key "k" and leaves it open, so that a move's insert of a job
	// with that key waits for it; release rolls it back.
	HoldKey func(t *testing.T) (release func())
	// Abort finds the connection of the move waiting for the key, and
	// ends it from the server's side (the transaction is rolled back as
	// when its process is killed); it fails the test if it finds none.
	Abort func(t *testing.T)
}

// OutboxMoveAborted aborts a move at the worst moment: after it deleted
// its outbox rows and inserted all but its last job, before its commit,
// by ending its connection from the server, which is what the database
// sees of a mover killed with SIGKILL. Nothing of the move stays: the
// rows are all in the outbox, no job was made, and the next move makes
// each row one job.
func OutboxMoveAborted(t *testing.T, s store.Store, a OutboxAbort) {
	ctx := ctxT(t)
	in := make([]*store.OutboxRow, 6)
	for i := range in {
		in[i] = &store.OutboxRow{Category: "c", URL: ptr(fmt.Sprintf("http://a/%d", i))}
	}
	in[5].UniqueKey = ptr("k") // keyed jobs are inserted last
	ok(t, s.OutboxInsert(ctx, in))
	rows := must(s.OutboxRead(ctx, 10))(t)
	p := &store.OutboxMoveParams{}
	for _, r := range rows {
		p.Jobs = append(p.Jobs, outboxJob(r, "q"))
	}
	release := a.HoldKey(t)
	done := make(chan error, 1)
	go func() {
		_, err := s.OutboxMove(ctx, p)
		done <- err
	}()
	a.Abort(t)
	if err := <-done; err == nil {
		t.Fatal("the aborted move returned no error")
	}
	release()
	if got := must(s.OutboxRead(ctx, 10))(t); len(got) != len(rows) {
		t.Fatalf("after the aborted move the outbox holds %d rows, want all %d", len(got), len(rows))
	}
	if jobs := must(s.JobsList(ctx, &store.JobsListParams{Queue: "q", Kind: store.JobsWaiting, Limit: 10}))(t); len(jobs) != 0 {
		t.Fatalf("the aborted move left %d jobs, want none", len(jobs))
	}
	m := must(s.OutboxMove(ctx, p))(t)
	jobs := must(s.JobsList(ctx, &store.JobsListParams{Queue: "q", Kind: store.JobsWaiting, Limit: 10}))(t)
	if len(m.Pushed) != len(rows) || len(jobs) != len(rows) {
		t.Fatalf("the next move made %d jobs (%d in the queue), want %d", len(m.Pushed), len(jobs), len(rows))
	}
	if got := must(s.OutboxRead(ctx, 10))(t); len(got) != 0 {
		t.Fatalf("after the next move the outbox holds %d rows, want 0", len(got))
	}
}

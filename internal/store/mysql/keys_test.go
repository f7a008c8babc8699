package mysql_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/mysql"
)

// TestKeys_PlansUseTheirIndexes checks the plans of the concurrency keys'
// statements on a backlog of keyed and unkeyed jobs: the oldest job of an
// ordered key is a probe of ordered_jobs_key, the count of keyed jobs in delivery reads
// the queue's grabs in jobs_fetch, and a grab that leaves keys out still
// walks jobs_fetch in order.
func TestKeys_PlansUseTheirIndexes(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := openMigrated(ctx, t)
	for i := range 4 {
		ps := make([]*store.JobInsertParams, 500)
		for k := range ps {
			ps[k] = &store.JobInsertParams{Queue: fmt.Sprintf("q%d", i), Category: "c", URL: "http://w/"}
			if k%2 == 0 {
				ps[k].ConcurrencyKey, ps[k].ConcurrencyLimit = fmt.Sprintf("k%d", k%50), 1
				ps[k].Ordered = k%4 == 0
			}
		}
		if _, err := s.JobsInsert(ctx, ps); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q1", Node: "n", Limit: 20, Lease: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DB().ExecContext(ctx, "ANALYZE TABLE jobs"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DB().ExecContext(ctx, "ANALYZE TABLE ordered_jobs"); err != nil {
		t.Fatal(err)
	}
	used := map[string]string{}
	for _, row := range queryMaps(t, s.DB(), "EXPLAIN "+mysql.KeyHeadsSQL(3), "q1", "k0", "k4", "k8") {
		used[row["table"]] = row["key"]
	}
	if used["ordered_jobs"] != "ordered_jobs_key" || used["j"] != "PRIMARY" {
		t.Errorf("key heads use keys %v, want ordered_jobs_key for ordered_jobs and PRIMARY for jobs (j)", used)
	}
	// The count groups by key, which may sort: only its index is checked.
	if plan := queryMaps(t, s.DB(), "EXPLAIN "+mysql.KeyBusySQL, "q1", "other"); len(plan) != 1 || plan[0]["key"] != "jobs_fetch" {
		t.Errorf("key busy: plan %v, want one row on jobs_fetch", plan)
	}
	q, keys := mysql.GrabKeys(&store.JobsGrabParams{SkipKeys: []string{"k0", "k2"}})
	args := append(append([]any{int64(time.Minute / time.Microsecond), "q1"}, keys...), 100)
	checkPlan(t, s.DB(), "grab", q, "jobs_fetch", false, args...)
}

// TestOrderedJobs_ForgottenWithTheirJobs: every path that removes an
// ordered job removes its ordered_jobs row (none is left once the jobs are
// gone), a retry from the failure log lists the job again, and a row left
// behind (its job deleted without it) is looked past and deleted by the
// next look at its key's head.
func TestOrderedJobs_ForgottenWithTheirJobs(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := openMigrated(ctx, t)
	if _, err := s.QueuePut(ctx, &store.Queue{Name: "q", MaxWorkers: 10, PollingInterval: 200}); err != nil {
		t.Fatal(err)
	}
	job := func(key string) *store.JobInsertParams {
		return &store.JobInsertParams{Queue: "q", Category: "c", URL: "http://w/", MaxRetries: 3,
			JobOptions: store.JobOptions{ConcurrencyKey: key, Ordered: true}}
	}
	rows := func() (n int) {
		t.Helper()
		if err := s.DB().QueryRowContext(ctx, "SELECT COUNT(*) FROM ordered_jobs").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	ids, err := s.JobsInsert(ctx, []*store.JobInsertParams{job("a"), job("b"), job("c"), job("d"), job("e"), {Queue: "q", Category: "c", URL: "http://w/"}})
	if err != nil {
		t.Fatal(err)
	}
	pushed, err := s.JobsPush(ctx, []*store.JobInsertParams{job("f")})
	if err != nil {
		t.Fatal(err)
	}
	handed, err := s.JobsInsertGrabbed(ctx, &store.JobsInsertGrabbedParams{Node: "n", Lease: time.Minute, Jobs: []*store.JobInsertParams{job("g")}})
	if err != nil {
		t.Fatal(err)
	}
	if n := rows(); n != 7 {
		t.Fatalf("ordered_jobs holds %d rows after 7 ordered jobs and 1 other, want 7", n)
	}
	grabbed, err := s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: "n", Limit: 10, Lease: time.Minute})
	if err != nil || len(grabbed) != 7 {
		t.Fatalf("grab = %d jobs, %v; want 7", len(grabbed), err)
	}
	grabs := map[int64]int{}
	for _, j := range append(grabbed, handed...) {
		grabs[j.ID] = j.Grabs
	}
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	// a: completed; b: failed, retried from the log, completed; c: cancelled;
	// d: deleted; e: leased, then finished; f: leased, then succeeded; g
	// (handed off): completed; the unordered job: completed.
	_, err = s.JobsComplete(ctx, &store.JobsCompleteParams{Node: "n", IDs: []int64{ids[0], ids[5], handed[0].ID}, Ordered: []int64{ids[0], handed[0].ID}})
	must("complete", err)
	f, err := s.JobFail(ctx, &store.JobFailParams{ID: ids[1], Node: "n", Status: "failure"})
	must("fail", err)
	_, err = s.FailedJobRetry(ctx, "q", f.ID)
	must("retry from the failure log", err)
	if n := rows(); n != 5 {
		t.Fatalf("ordered_jobs holds %d rows with b back from the failure log, want 5", n)
	}
	_, err = s.JobCancel(ctx, "q", ids[2])
	must("cancel", err)
	_, err = s.JobDelete(ctx, "q", ids[3])
	must("delete", err)
	for _, id := range []int64{ids[4], pushed[0].ID} {
		_, err = s.JobLease(ctx, &store.JobLeaseParams{ID: id, Grabs: grabs[id], Lease: time.Minute})
		must("lease", err)
	}
	_, err = s.JobFinish(ctx, &store.JobFinishParams{ID: ids[4], Grabs: grabs[ids[4]], Outcome: store.FinishDelete, Status: "success"})
	must("finish", err)
	_, err = s.JobsSucceed(ctx, &store.JobsSucceedParams{Grabs: []store.JobGrab{{ID: pushed[0].ID, Grabs: grabs[pushed[0].ID]}}, Status: "success"})
	must("succeed", err)
	b, err := s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: "n", Limit: 10, Lease: time.Minute})
	if err != nil || len(b) != 1 || b[0].ID != ids[1] {
		t.Fatalf("grab of b back from the failure log = %v, %v", b, err)
	}
	_, err = s.JobsComplete(ctx, &store.JobsCompleteParams{Node: "n", IDs: []int64{ids[1]}, Ordered: []int64{ids[1]}})
	must("complete b", err)
	if n := rows(); n != 0 {
		t.Fatalf("ordered_jobs holds %d rows with every job gone, want 0", n)
	}

	// A row left behind: its job deleted as a crash between the
	// complete's two statements would leave it.
	left, err := s.JobsInsert(ctx, []*store.JobInsertParams{job("h"), job("h")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.DB().ExecContext(ctx, "DELETE FROM jobs WHERE id = ?", left[0]); err != nil {
		t.Fatal(err)
	}
	heads, err := s.JobsKeyHeads(ctx, &store.JobsKeyHeadsParams{Queue: "q", Keys: []string{"h"}})
	if err != nil || heads["h"] != left[1] {
		t.Fatalf("heads past a row left behind = %v, %v; want h: %d", heads, err, left[1])
	}
	if n := rows(); n != 1 {
		t.Fatalf("ordered_jobs holds %d rows after the head's look, want 1 (the row left behind deleted)", n)
	}
}

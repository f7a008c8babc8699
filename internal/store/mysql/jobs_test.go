package mysql_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/store/mysql"
	"github.com/rowq/rowq/internal/store/storetest"
)

// TestJobsNextDue_ReadsOneEntryPerQueue checks the plan of the look at idle
// queues: per queue, one entry of jobs_list in index order, however many
// jobs wait (an EXISTS would become a semi-join reading every due job),
// and its grabs on jobs_fetch.
func TestJobsNextDue_ReadsOneEntryPerQueue(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := openMigrated(ctx, t)
	for i := range 3 {
		if _, err := s.QueuePut(ctx, &store.Queue{Name: fmt.Sprintf("q%d", i), PollingInterval: 200, MaxWorkers: 10}); err != nil {
			t.Fatal(err)
		}
		ps := make([]*store.JobInsertParams, 500)
		for k := range ps {
			ps[k] = &store.JobInsertParams{Queue: fmt.Sprintf("q%d", i), Category: "c", URL: "http://w/", RunAfter: time.Duration(k%2) * time.Hour}
		}
		if _, err := s.JobsInsert(ctx, ps); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.DB().ExecContext(ctx, "ANALYZE TABLE jobs, queues"); err != nil {
		t.Fatal(err)
	}
	plan := queryMaps(t, s.DB(), "EXPLAIN "+mysql.JobsNextDueSQL(3), "q0", "q1", "q2")
	keys := map[string]bool{}
	for _, row := range plan {
		if row["table"] != "j" {
			continue
		}
		keys[row["key"]] = true
		if row["select_type"] != "DEPENDENT SUBQUERY" || strings.Contains(row["Extra"], "filesort") {
			t.Fatalf("jobs are not read as dependent subqueries without a sort: %v", plan)
		}
	}
	if !keys["jobs_list"] || !keys["jobs_fetch"] || len(keys) != 2 {
		t.Fatalf("the waiting jobs are not read on jobs_list and the grabs on jobs_fetch: %v", plan)
	}
}

// TestJobsWrites_UseTheirIndexesOnFewRows checks the plans of the writes to
// grabbed jobs on the table of a queue that keeps up, which holds few rows:
// there the optimizer would rather scan the table than read an id IN (…)
// list on the primary key, and would take jobs_list for a queue's grabbed
// jobs, which holds all its jobs.
func TestJobsWrites_UseTheirIndexesOnFewRows(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := openMigrated(ctx, t)
	if _, err := s.JobsInsert(ctx, []*store.JobInsertParams{{Queue: "q", Category: "c", URL: "http://w/"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DB().ExecContext(ctx, "ANALYZE TABLE jobs"); err != nil {
		t.Fatal(err)
	}
	ids := make([]any, 30)
	for i := range ids {
		ids[i] = i + 1
	}
	now := time.Now().UTC()
	// The finds of the extension and the rescue read the queue's grabbed
	// range of jobs_fetch: a ref on both (queue_name, state), 1022 + 34
	// bytes of key in utf8mb4.
	for _, c := range []struct {
		name, query, key, typ string
		args                  []any
	}{
		{"complete", mysql.CompleteHeldSQL(len(ids)), "PRIMARY", "range", append(ids[:len(ids):len(ids)], "grabbed", "n")},
		{"release", mysql.HeldSQL(mysql.ReleaseSQL, len(ids)), "PRIMARY", "range", append(ids[:len(ids):len(ids)], "leased", "n")},
		{"grab", mysql.GrabUpdateSQL(len(ids)), "PRIMARY", "range", append([]any{"leased", "n", now}, ids...)},
		{"extend find", mysql.ExtendFindSQL, "jobs_fetch", "ref", []any{"q", "n"}},
		{"extend", mysql.HeldSQL(mysql.ExtendSQL, len(ids)), "PRIMARY", "range", append(append([]any{30_000_000}, ids...), "grabbed", "n")},
		{"rescue find", mysql.RescueFindSQL, "jobs_fetch", "ref", []any{"q"}},
		{"rescue lock", mysql.RescueLockSQL(len(ids)), "PRIMARY", "range", ids},
		{"rescue", mysql.ByIDs(mysql.RescueSQL, len(ids)), "PRIMARY", "range", ids},
	} {
		plan := queryMaps(t, s.DB(), "EXPLAIN "+c.query, c.args...)
		// The rescue also looks up each grab's node (nodesByKey).
		if strings.HasPrefix(c.name, "rescue ") && len(plan) == 2 && nodesByKey(plan[1]) {
			plan = plan[:1]
		}
		if len(plan) != 1 || plan[0]["key"] != c.key || plan[0]["type"] != c.typ || c.typ == "ref" && plan[0]["key_len"] != "1056" {
			t.Errorf("%s: plan %v, want a %s on %s", c.name, plan, c.typ, c.key)
		}
	}
}

// TestJobsExpired_ReadsGrabsOnly checks the plan of the look for expired
// grabs: the grabbed range of jobs_fetch of each queue (its deliveries in
// flight), and for each grab its node by primary key.
func TestJobsExpired_ReadsGrabsOnly(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := openMigrated(ctx, t)
	for i := range 3 {
		q := fmt.Sprintf("q%d", i)
		if _, err := s.QueuePut(ctx, &store.Queue{Name: q, PollingInterval: 200, MaxWorkers: 10}); err != nil {
			t.Fatal(err)
		}
		ps := make([]*store.JobInsertParams, 500)
		for k := range ps {
			ps[k] = &store.JobInsertParams{Queue: q, Category: "c", URL: "http://w/"}
		}
		if _, err := s.JobsInsert(ctx, ps); err != nil {
			t.Fatal(err)
		}
		if _, err := s.JobsGrab(ctx, &store.JobsGrabParams{Queue: q, Node: "n", Limit: 20, Lease: time.Minute}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.NodeHeartbeat(ctx, &store.NodeHeartbeatParams{ID: "n", Host: "h", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DB().ExecContext(ctx, "ANALYZE TABLE jobs, queues, nodes"); err != nil {
		t.Fatal(err)
	}
	// The look for expired grabs, then (UNION) for expired leases.
	plan := queryMaps(t, s.DB(), "EXPLAIN "+mysql.JobsExpiredSQL(3), "q0", "q1", "q2", "q0", "q1", "q2")
	var jobs []map[string]string
	var nodes map[string]string
	for _, row := range plan {
		switch row["table"] {
		case "jobs":
			jobs = append(jobs, row)
		case "nodes":
			nodes = row
		}
	}
	// A ref per queue or a range over the queues' grabs (semi-join
	// materialization), on both columns queue_name and state: 1022 + 34
	// bytes of key in utf8mb4.
	if len(jobs) != 2 {
		t.Errorf("want two reads of jobs (grabs, leases): %v", plan)
	}
	for _, j := range jobs {
		if j["key"] != "jobs_fetch" || (j["type"] != "ref" && j["type"] != "range") || j["key_len"] != "1056" {
			t.Errorf("grabs or leases are not read from their range of jobs_fetch: %v", plan)
		}
	}
	if nodes == nil || !nodesByKey(nodes) {
		t.Errorf("nodes are not looked up by primary key: %v", plan)
	}
}

// nodesByKey reports whether an EXPLAIN row reads one row of nodes by its
// primary key, for each row of the table before it (eq_ref in a join,
// unique_subquery in a subquery the server keeps).
func nodesByKey(row map[string]string) bool {
	return row["table"] == "nodes" && row["key"] == "PRIMARY" && (row["type"] == "eq_ref" || row["type"] == "unique_subquery")
}

// TestJobs_BehindFrozenTx: a node frozen between its grab's UPDATE and its
// COMMIT, or inside an acknowledgement, stalls no other node's extension,
// rescue or grab. (rowq chaos saw a new leader's rescue wait for such a
// grab until the frozen node was continued, 20 s later.)
func TestJobs_BehindFrozenTx(t *testing.T) {
	t.Parallel()
	s := dbtest.Open(t, "mysql").(*mysql.Store)
	storetest.JobsBehindFrozenTx(t, s, func(t *testing.T, grab, lock int64) func() {
		return frozenTx(t, s.DB(), func(ctx context.Context, tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, `SELECT id FROM jobs WHERE id = ? FOR UPDATE`, lock); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, `UPDATE jobs SET state = 'grabbed', grabbed_by = 'frozen',
				grabbed_until = NOW(6) + INTERVAL 1 MINUTE WHERE id = ?`, grab)
			return err
		})
	})
}

// TestJobsRescue_FrozenHoldsNoOtherGrab: a node frozen inside its rescue's
// transaction holds only the expired grabs it locked, by primary key: the
// other nodes' acknowledgements and extensions do not wait for it. (A
// locking read through jobs_fetch would hold every grab of the queue: its
// locks stay on the rows the rest of its condition leaves out.)
func TestJobsRescue_FrozenHoldsNoOtherGrab(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := dbtest.Open(t, "mysql").(*mysql.Store)
	if _, err := s.QueuePut(ctx, &store.Queue{Name: "q", PollingInterval: 200, MaxWorkers: 10}); err != nil {
		t.Fatal(err)
	}
	if err := s.NodeHeartbeat(ctx, &store.NodeHeartbeatParams{ID: "live", Host: "h", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.JobsInsert(ctx, []*store.JobInsertParams{{Queue: "q", Category: "c", URL: "http://w/"}, {Queue: "q", Category: "c", URL: "http://w/"}}); err != nil {
		t.Fatal(err)
	}
	mine, err := s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: "live", Limit: 1, Lease: time.Minute})
	if err != nil || len(mine) != 1 {
		t.Fatalf("grab: %v, %v", mine, err)
	}
	// "gone" has no registration: its grab has expired.
	lost, err := s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: "gone", Limit: 1, Lease: time.Minute})
	if err != nil || len(lost) != 1 {
		t.Fatalf("grab: %v, %v", lost, err)
	}
	frozenTx(t, s.DB(), func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, mysql.RescueLockSQL(1), lost[0].ID)
		return err
	})
	start := time.Now()
	if n, err := s.JobsExtend(ctx, &store.JobsExtendParams{Queue: "q", Node: "live", Lease: time.Minute}); err != nil || n != 1 {
		t.Errorf("extend beside a frozen rescue: %d, %v; want 1", n, err)
	}
	if n, err := s.JobsComplete(ctx, &store.JobsCompleteParams{Node: "live", IDs: []int64{mine[0].ID}}); err != nil || n != 1 {
		t.Errorf("acknowledge beside a frozen rescue: %d, %v; want 1", n, err)
	}
	if took := time.Since(start); took > store.LockWait/2 {
		t.Errorf("extend and acknowledge took %v beside a frozen rescue; want no wait", took)
	}
}

// TestGrabUpdate_KeepsOnlyWaitingRows checks the grab's guard: its UPDATE
// leaves alone a row another grab took between its SELECT and its UPDATE,
// which an engine that ignores SKIP LOCKED (Galera across members) allows.
func TestGrabUpdate_KeepsOnlyWaitingRows(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := openMigrated(ctx, t)
	ids, err := s.JobsInsert(ctx, []*store.JobInsertParams{
		{Queue: "q", Category: "c", URL: "http://w/1"}, {Queue: "q", Category: "c", URL: "http://w/2"}, {Queue: "q", Category: "c", URL: "http://w/3"},
	})
	if err != nil {
		t.Fatal(err)
	}
	taken, err := s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: "a", Limit: 1, Lease: time.Minute})
	if err != nil || len(taken) != 1 {
		t.Fatalf("grab: %v, %v", taken, err)
	}
	args := []any{store.StateGrabbed, "b", time.Now().UTC().Add(time.Minute)}
	for _, id := range ids {
		args = append(args, id)
	}
	res, err := s.DB().ExecContext(ctx, mysql.GrabUpdateSQL(len(ids)), args...)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 2 {
		t.Errorf("the grab's UPDATE changed %d rows, want the 2 still waiting", n)
	}
	j, err := s.JobGet(ctx, "q", taken[0].ID)
	if err != nil || j.GrabbedBy != "a" {
		t.Errorf("job %d: %+v, %v; want it still grabbed by a", taken[0].ID, j, err)
	}
}

// BenchmarkJobsInsert compares, on MariaDB, the ids returned by the INSERT
// (RETURNING id, what MariaDB takes) with the ids computed from
// LAST_INSERT_ID() (what MySQL takes, and MariaDB took before Galera's
// changing auto_increment step ruled it out), for one job and for 100.
func BenchmarkJobsInsert(b *testing.B) {
	ctx := context.Background()
	for _, n := range []int{1, 100} {
		for _, returning := range []bool{true, false} {
			name := fmt.Sprintf("jobs=%d/returning=%t", n, returning)
			b.Run(name, func(b *testing.B) {
				s := dbtest.Open(b, "mysql").(*mysql.Store)
				if !returning {
					s.WithoutReturning()
				}
				jobs := make([]*store.JobInsertParams, n)
				for i := range jobs {
					jobs[i] = &store.JobInsertParams{Queue: "q", Category: "c", URL: "http://w/", Timeout: 30}
				}
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if _, err := s.JobsInsert(ctx, jobs); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}

package sqlite

import (
	"context"
	"strings"
	"testing"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/sqldb"
)

// The EXPLAIN tests: each query that must not grow with the data walks its
// index in order, with no temporary B-tree (a sort).

func TestGrab_UsesFetchIndexWithoutSort(t *testing.T) {
	checkPlan(t, openExplain(t), "grab", grabSelectSQL, "jobs_fetch", nil, nil, "q", 0, 10)
}

func TestSchedulesDue_UsesIndexWithoutSort(t *testing.T) {
	t.Parallel()
	checkPlan(t, openExplain(t), "due schedules", dueSQL, "schedules_due", 0, 100)
}

// TestOutboxRead_WalksTheRowid: the outbox's read (the moving node's
// probe) walks the table in rowid order and stops at its limit.
func TestOutboxRead_WalksTheRowid(t *testing.T) {
	if got := explain(t, openExplain(t), "outbox read", sqldb.OutboxReadSQL, 500); got != "SCAN rowq_outbox" {
		t.Errorf("outbox read plan = %q, want a plain scan in rowid order (no sort)", got)
	}
}

// TestJobsNextDue_ReadsOneEntryPerQueue: per queue, jobs_list in index order.
func TestJobsNextDue_ReadsOneEntryPerQueue(t *testing.T) {
	checkPlan(t, openExplain(t), "next due", jobsNextDueSQL, "jobs_list", `["q0","q1"]`, 0)
}

// TestJobsRescue_ReadsGrabsOnly: the rescue and the look for expired grabs
// read a queue's grabs by index and look up their nodes by key.
func TestJobsRescue_ReadsGrabsOnly(t *testing.T) {
	s := openExplain(t)
	for _, c := range []struct {
		name, query string
		args        []any
	}{
		{"rescue", rescueSQL, []any{"q", 0}},
		{"expired grabs", jobsExpiredSQL, []any{`["q0","q1"]`, 0}},
	} {
		// jobs_fetch and jobs_list both start (queue_name, state).
		got := explain(t, s, c.name, c.query, c.args...)
		if !strings.Contains(got, "SEARCH jobs") || !strings.Contains(got, "(queue_name=? AND state=?)") ||
			!strings.Contains(got, "SEARCH nodes USING COVERING INDEX sqlite_autoindex_nodes_1 (id=?)") || strings.Contains(got, "TEMP B-TREE") {
			t.Errorf("%s: plan = %q, want the queue's grabs by index and their nodes by key", c.name, got)
		}
	}
}

// openExplain opens a migrated store in a temporary directory.
func openExplain(t *testing.T) *Store {
	t.Helper()
	s, err := Open(t.TempDir() + "/x.db")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

// checkPlan fails the test unless EXPLAIN QUERY PLAN of query uses index
// and no temporary B-tree.
func checkPlan(t *testing.T, s *Store, name, query, index string, args ...any) {
	t.Helper()
	if got := explain(t, s, name, query, args...); !strings.Contains(got, "INDEX "+index) || strings.Contains(got, "TEMP B-TREE") {
		t.Errorf("%s: plan = %q, want the %s index and no sort", name, got, index)
	}
}

// explain returns the steps of EXPLAIN QUERY PLAN of query, joined by "; ".
func explain(t *testing.T, s *Store, name, query string, args ...any) string {
	t.Helper()
	rows, err := s.r.QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+query, args...)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(plan, "; ")
}

// TestKeys_PlansUseTheirIndexes: the oldest job of an ordered key is read
// from jobs_ordered, and a grab that leaves keys out still walks jobs_fetch in
// order.
func TestKeys_PlansUseTheirIndexes(t *testing.T) {
	s := openExplain(t)
	checkPlan(t, s, "key heads", keyHeadsSQL(2), "jobs_ordered", "a", "b", "q")
	cond, keys := grabKeysCond(&store.JobsGrabParams{SkipKeys: []string{"a", "b"}})
	checkPlan(t, s, "grab leaving keys out", keyedGrab(grabSelectSQL, cond), "jobs_fetch",
		append([]any{nil, nil, "q", 0, 10, nil}, keys...)...)
}

// TestFlow_PlansUseTheirKeys: what ending a flow job reads and deletes is
// found by key (job_deps' primary key, job_deps_child), however many
// edges the table holds.
func TestFlow_PlansUseTheirKeys(t *testing.T) {
	s := openExplain(t)
	for _, c := range []struct{ name, query, want string }{
		{"children", flowChildrenSQL, "SEARCH d USING PRIMARY KEY (parent_id=?)"},
		{"forget flows", flowForgetSQL[0], "SEARCH job_flows USING INTEGER PRIMARY KEY"},
		{"forget edges from parents", flowForgetSQL[1], "SEARCH job_deps USING PRIMARY KEY (parent_id=?)"},
		{"forget edges to children", flowForgetSQL[2], "SEARCH job_deps USING COVERING INDEX job_deps_child (child_id=?)"},
	} {
		got := explain(t, s, c.name, c.query, "[1,2]")
		if !strings.Contains(got, c.want) {
			t.Errorf("%s: plan = %q, want %q", c.name, got, c.want)
		}
		for _, step := range strings.Split(got, "; ") {
			if strings.HasPrefix(step, "SCAN ") && !strings.HasPrefix(step, "SCAN json_each") {
				t.Errorf("%s: plan = %q, scans a table", c.name, got)
			}
		}
	}
}

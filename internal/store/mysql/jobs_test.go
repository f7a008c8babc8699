package mysql_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/mysql"
)

// TestJobsDue_ReadsOneEntryPerQueue checks the plan of the look for due
// jobs: per queue, one entry of jobs_list in index order, however many
// jobs wait (an EXISTS would become a semi-join reading every due job).
func TestJobsDue_ReadsOneEntryPerQueue(t *testing.T) {
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
	plan := queryMaps(t, s.DB(), "EXPLAIN "+mysql.JobsDueSQL(3), "q0", "q1", "q2")
	var sub map[string]string
	for _, row := range plan {
		if row["table"] == "j" {
			sub = row
		}
	}
	if sub == nil || sub["select_type"] != "DEPENDENT SUBQUERY" || sub["key"] != "jobs_list" || strings.Contains(sub["Extra"], "filesort") {
		t.Fatalf("jobs are not read as a dependent subquery on jobs_list without a sort: %v", plan)
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
	for _, c := range []struct {
		name, query, key string
		args             []any
	}{
		{"complete", mysql.HeldSQL(mysql.CompleteSQL, len(ids)), "PRIMARY", append(ids[:len(ids):len(ids)], "n")},
		{"release", mysql.HeldSQL(mysql.ReleaseSQL, len(ids)), "PRIMARY", append(ids[:len(ids):len(ids)], "n")},
		{"grab", mysql.GrabUpdateSQL(len(ids)), "PRIMARY", append([]any{"n", now}, ids...)},
		{"extend", mysql.ExtendSQL, "jobs_fetch", []any{30_000_000, "q", "n"}},
		{"rescue", mysql.RescueSQL, "jobs_fetch", []any{"q"}},
	} {
		plan := queryMaps(t, s.DB(), "EXPLAIN "+c.query, c.args...)
		// The rescue also looks up each grab's node (nodesByKey).
		if c.name == "rescue" && len(plan) == 2 && nodesByKey(plan[1]) {
			plan = plan[:1]
		}
		if len(plan) != 1 || plan[0]["key"] != c.key || plan[0]["type"] != "range" {
			t.Errorf("%s: plan %v, want a range on %s", c.name, plan, c.key)
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
	plan := queryMaps(t, s.DB(), "EXPLAIN "+mysql.JobsExpiredSQL(3), "q0", "q1", "q2")
	var jobs, nodes map[string]string
	for _, row := range plan {
		switch row["table"] {
		case "jobs":
			jobs = row
		case "nodes":
			nodes = row
		}
	}
	// A ref per queue or a range over the queues' grabs (semi-join
	// materialization), on both columns queue_name and state: 1022 + 34
	// bytes of key in utf8mb4.
	if jobs == nil || jobs["key"] != "jobs_fetch" || (jobs["type"] != "ref" && jobs["type"] != "range") || jobs["key_len"] != "1056" {
		t.Errorf("grabs are not read from their range of jobs_fetch: %v", plan)
	}
	if nodes == nil || !nodesByKey(nodes) {
		t.Errorf("nodes are not looked up by primary key: %v", plan)
	}
}

// nodesByKey reports whether an EXPLAIN row reads one row of nodes by its
// primary key, for each row of the table before it.
func nodesByKey(row map[string]string) bool {
	return row["table"] == "nodes" && row["key"] == "PRIMARY" && row["type"] == "eq_ref"
}

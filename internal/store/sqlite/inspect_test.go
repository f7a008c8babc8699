package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rowq/rowq/internal/store"
)

// TestInspect_ListingsWalkIndexesWithoutSort checks the plans of every
// listing query: each walks its index in order with no temporary B-tree.
func TestInspect_ListingsWalkIndexesWithoutSort(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "x.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	check := func(name, query, index string, args ...any) {
		t.Helper()
		rows, err := s.r.QueryContext(ctx, "EXPLAIN QUERY PLAN "+query, args...)
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
		got := strings.Join(plan, "; ")
		if !strings.Contains(got, "INDEX "+index) || strings.Contains(got, "TEMP B-TREE") {
			t.Errorf("%s: plan = %q, want the %s index and no sort", name, got, index)
		}
	}
	for _, kind := range []string{store.JobsGrabbed, store.JobsWaiting, store.JobsDeferred} {
		for _, desc := range []bool{false, true} {
			for _, after := range []bool{false, true} {
				args := []any{"q", "waiting", 100, 0}
				if after {
					args = append(args, 0, 10)
				}
				check(fmt.Sprintf("jobs %s desc=%v after=%v", kind, desc, after), jobsListSQL(kind, desc, after), "jobs_list", args...)
			}
		}
	}
	for _, byCreated := range []bool{false, true} {
		for _, desc := range []bool{false, true} {
			for _, after := range []bool{false, true} {
				args := []any{"q", 100}
				index := "failed_jobs_queue"
				if byCreated {
					index = "failed_jobs_created"
				}
				if after && byCreated {
					args = append(args, 0, 10)
				} else if after {
					args = append(args, 10)
				}
				check(fmt.Sprintf("failed byCreated=%v desc=%v after=%v", byCreated, desc, after), failedJobsListSQL(byCreated, desc, after), index, args...)
			}
		}
	}
}

package sqlite

import (
	"fmt"
	"strings"
	"testing"

	"github.com/rowq/rowq/internal/store"
)

// TestInspect_ListingsWalkIndexesWithoutSort checks the plans of every
// listing query: each walks its index in order with no temporary B-tree.
func TestInspect_ListingsWalkIndexesWithoutSort(t *testing.T) {
	s := openExplain(t)
	check := func(name, query, index string, args ...any) {
		t.Helper()
		checkPlan(t, s, name, query, index, args...)
	}
	for _, kind := range []string{store.JobsWaiting, store.JobsDeferred} {
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
	// Grabbed and leased jobs (out for delivery: few) are read from two
	// ranges of an index and sorted; a scan of the table is what must not be.
	for _, desc := range []bool{false, true} {
		for _, after := range []bool{false, true} {
			args := []any{"q", "grabbed", 100, 0}
			if after {
				args = append(args, 0, 10)
			}
			name := fmt.Sprintf("jobs grabbed desc=%v after=%v", desc, after)
			if got := explain(t, s, name, jobsListSQL(store.JobsGrabbed, desc, after), args...); !strings.Contains(got, "USING INDEX jobs_") {
				t.Errorf("%s: plan = %q, want an index of the queue's states", name, got)
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

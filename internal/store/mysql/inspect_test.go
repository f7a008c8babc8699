package mysql_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/mysql"
)

// TestInspect_ListingsWalkIndexesWithoutFilesort checks the plans of every
// listing query: each walks its index in order and reads only the page, so
// page 1,000 costs what page 1 costs. Grabbed jobs, at most the deliveries
// in flight, are the exception: they are read from jobs_fetch and sorted.
func TestInspect_ListingsWalkIndexesWithoutFilesort(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := openMigrated(ctx, t)
	for i := range 3 {
		ps := make([]*store.JobInsertParams, 500)
		for k := range ps {
			ps[k] = &store.JobInsertParams{Queue: fmt.Sprintf("q%d", i), Category: "c", URL: "http://w/", RunAfter: time.Duration(k%3-1) * time.Hour}
		}
		if _, err := s.JobsInsert(ctx, ps); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.DB().ExecContext(ctx, "ANALYZE TABLE jobs, failed_jobs"); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	for _, kind := range []string{store.JobsGrabbed, store.JobsWaiting, store.JobsDeferred} {
		for _, desc := range []bool{false, true} {
			for _, after := range []bool{false, true} {
				args := []any{"q1", "waiting"}
				if after {
					// A cursor on the listing's side of NOW(6), so that
					// the range read is not empty: with one at about
					// NOW(6), deferred jobs before it are none, and such a
					// plan once came back as an "Impossible WHERE" that
					// names no index (in CI, under load).
					at := now.Add(-time.Hour)
					if kind == store.JobsDeferred {
						at = now.Add(time.Hour)
					}
					args = append(args, at, at, 1000)
				}
				args = append(args, 100)
				key := "jobs_list"
				if kind == store.JobsGrabbed {
					args[1] = "grabbed"
					key = "jobs_fetch"
				}
				checkPlan(t, s.DB(), fmt.Sprintf("jobs %s desc=%v after=%v", kind, desc, after), mysql.JobsListSQL(kind, desc, after), key, kind == store.JobsGrabbed, args...)
			}
		}
	}
	for _, byCreated := range []bool{false, true} {
		for _, desc := range []bool{false, true} {
			for _, after := range []bool{false, true} {
				args := []any{"q1"}
				key := "failed_jobs_queue"
				if byCreated {
					key = "failed_jobs_created"
				}
				if after && byCreated {
					args = append(args, now, now, 10)
				} else if after {
					args = append(args, 10)
				}
				args = append(args, 100)
				checkPlan(t, s.DB(), fmt.Sprintf("failed byCreated=%v desc=%v after=%v", byCreated, desc, after), mysql.FailedJobsListSQL(byCreated, desc, after), key, false, args...)
			}
		}
	}
}

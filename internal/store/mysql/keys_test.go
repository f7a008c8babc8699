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

// TestKeys_PlansUseTheirIndexes checks the plans of the concurrency keys'
// statements on a backlog of keyed and unkeyed jobs: the oldest job of a
// key is a probe of jobs_key, the count of keyed jobs in delivery reads
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
	check := func(what, want string, plan []map[string]string) {
		t.Helper()
		if len(plan) != 1 {
			t.Fatalf("%s: plan has %d rows, want 1: %v", what, len(plan), plan)
		}
		if got := plan[0]["key"]; got != want {
			t.Errorf("%s uses key %q, want %q (plan %v)", what, got, want, plan[0])
		}
		if got := plan[0]["Extra"]; strings.Contains(got, "filesort") && what == "grab" {
			t.Errorf("%s sorts: Extra = %q", what, got)
		}
	}
	check("key heads", "jobs_key", queryMaps(t, s.DB(), "EXPLAIN "+mysql.KeyHeadsSQL(3), "q1", "k0", "k2", "k4"))
	check("key busy", "jobs_fetch", queryMaps(t, s.DB(), "EXPLAIN "+mysql.KeyBusySQL, "q1", "other"))
	q, keys := mysql.GrabKeys(&store.JobsGrabParams{SkipKeys: []string{"k0", "k2"}})
	args := append(append([]any{int64(time.Minute / time.Microsecond), "q1"}, keys...), 100)
	check("grab", "jobs_fetch", queryMaps(t, s.DB(), "EXPLAIN "+q, args...))
}

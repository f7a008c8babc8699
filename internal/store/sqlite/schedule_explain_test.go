package sqlite

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

func TestSchedulesDue_UsesIndexWithoutSort(t *testing.T) {
	t.Parallel()
	s, err := Open(filepath.Join(t.TempDir(), "x.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	rows, err := s.r.QueryContext(ctx, "EXPLAIN QUERY PLAN "+dueSQL, 0, 100)
	if err != nil {
		t.Fatal(err)
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
	if !strings.Contains(got, "INDEX schedules_due") || strings.Contains(got, "TEMP B-TREE") {
		t.Fatalf("due plan = %q, want the schedules_due index and no sort", got)
	}
}

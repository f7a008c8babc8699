package postgres_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/postgres"
)

// TestKeys_PlansUseTheirIndexes: the oldest job of an ordered key is a
// probe of jobs_ordered, and a grab that leaves keys out still walks jobs_fetch in
// order, in custom and generic plans.
func TestKeys_PlansUseTheirIndexes(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	conn := analysedBacklog(ctx, t, s, 5000, func(q string, i int) *store.JobInsertParams {
		p := &store.JobInsertParams{Queue: q, Category: "c", URL: "http://w/", Payload: json.RawMessage(`{}`)}
		if i%2 == 0 {
			p.ConcurrencyKey, p.ConcurrencyLimit = fmt.Sprintf("k%d", i%100), 1
			p.Ordered = i%4 == 0
		}
		return p
	}, nil)
	for mode, p := range plans(ctx, t, conn, postgres.KeyHeadsSQL, "q", []string{"k0", "k2"}) {
		if !strings.Contains(p, "jobs_ordered") {
			t.Errorf("%s: key heads plan does not probe jobs_ordered:\n%s", mode, p)
		}
	}
	q, keys := postgres.GrabKeys(&store.JobsGrabParams{SkipKeys: []string{"k0", "k2"}})
	q = strings.ReplaceAll(q, "$6", "$3") // alone, the SELECT takes $1, $2 and the keys
	for mode, p := range plans(ctx, t, conn, q, append([]any{"q", 10}, keys...)...) {
		if !strings.Contains(p, "jobs_fetch") || strings.Contains(p, "Sort") {
			t.Errorf("%s: grab leaving keys out does not walk jobs_fetch without a sort:\n%s", mode, p)
		}
	}
}

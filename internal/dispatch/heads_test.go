package dispatch

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
)

// TestHeadsOf_OneStatementPerQueue: head checks of several keys of two
// queues, one key asked twice and one with no job, are answered together,
// each with its own key's oldest ordered job (0 for none).
func TestHeadsOf_OneStatementPerQueue(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		s := dbtest.Open(t, dialect)
		ids := map[keyAsk]int64{}
		for _, q := range []string{"qa", "qb"} {
			if _, err := s.QueuePut(ctx, &store.Queue{Name: q, MaxWorkers: 10, PollingInterval: 200}); err != nil {
				t.Fatal(err)
			}
			var ps []*store.JobInsertParams
			for _, k := range []string{"x", "y", "x"} {
				ps = append(ps, &store.JobInsertParams{Queue: q, Category: "c", URL: "http://w/",
					JobOptions: store.JobOptions{ConcurrencyKey: k, Ordered: true}})
			}
			got, err := s.JobsInsert(ctx, ps)
			if err != nil {
				t.Fatal(err)
			}
			ids[keyAsk{q, "x"}], ids[keyAsk{q, "y"}] = got[0], got[1]
		}
		asks := []keyAsk{{"qa", "x"}, {"qb", "y"}, {"qa", "x"}, {"qa", "none"}, {"qb", "x"}, {"qa", "y"}}
		heads, err := headsOf(ctx, s, asks)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]int64, len(asks))
		for i, a := range asks {
			want[i] = ids[a]
		}
		if !slices.Equal(heads, want) {
			t.Errorf("headsOf(%v) = %v, want %v", asks, heads, want)
		}
	})
}

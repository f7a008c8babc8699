package bench_test

import (
	"context"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/bench"
	"github.com/rowq/rowq/internal/config"
	"github.com/rowq/rowq/internal/server/servertest"
	"github.com/rowq/rowq/internal/store/dbtest"
)

// TestRun_Modes runs each mode briefly against a node on every backend and
// checks that the bench counts every job once. It measures nothing.
func TestRun_Modes(t *testing.T) {
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			dbURL := dbtest.URL(t, dialect)
			cfg := config.Default()
			cfg.Bind = "127.0.0.1:0"
			cfg.DatabaseURL = dbURL
			cfg.QueueDefault = ""
			cfg.ConfigRefreshInterval = 100 * time.Millisecond
			s := servertest.Start(t, cfg)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			for _, tc := range []struct {
				name string
				o    bench.Options
			}{
				{"OneJobPerRequest", bench.Options{Jobs: 100, Clients: 4}},
				{"OfferedRate", bench.Options{Jobs: 50, Clients: 2, Rate: 200}},
				{"Backlog", bench.Options{Jobs: 1500, Backlog: true, DatabaseURL: dbURL}},
				{"Pull", bench.Options{Jobs: 300, Clients: 2, Batch: 10, Pull: true, Pullers: 3, PullMax: 20}},
			} {
				t.Run(tc.name, func(t *testing.T) {
					o := tc.o
					o.Server, o.Queue, o.MaxWorkers, o.Settle, o.Timeout = "http://"+s.Addr(), "b"+tc.name, 20, 100*time.Millisecond, time.Minute
					res, err := bench.Run(ctx, o)
					if err != nil {
						t.Fatal(err)
					}
					if res.Enqueued != o.Jobs || res.Delivered != o.Jobs || res.Lost != 0 || res.Duplicates != 0 {
						t.Errorf("result %+v, want every one of %d jobs enqueued and delivered once", res, o.Jobs)
					}
					if res.EndToEndTime <= 0 || res.P50 <= 0 || res.P99 < res.P50 {
						t.Errorf("times %v, p50 %v, p99 %v: want positive, p99 ≥ p50", res.EndToEndTime, res.P50, res.P99)
					}
				})
			}
		})
	}
}

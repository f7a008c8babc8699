package mysql_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store"
)

// BenchmarkFinishedPrune_1M measures pruning a history of 1,000,000 rows
// the way a queue's leader does (batches of 1,000, each its own
// transaction), and the latency of single-job enqueues running beside it
// against the same latency without it. Run it alone:
//
//	go test -run '^$' -bench FinishedPrune_1M -benchtime 1x ./internal/store/mysql/
func BenchmarkFinishedPrune_1M(b *testing.B) {
	ctx := context.Background()
	for range b.N {
		b.StopTimer()
		s := openMigrated(ctx, b)
		digits := `(SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4
			UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)`
		if _, err := s.DB().ExecContext(ctx, `INSERT INTO finished_jobs
			(id, queue_name, category, url, payload, status, attempts, created_at, started_at, finished_at, message, result)
			SELECT a.d + 10*b.d + 100*c.d + 1000*e.d + 10000*f.d + 100000*g.d + 1, 'q', 'cat', 'http://w/x', '{"n":1}', 'succeeded', 1,
				NOW(6) - INTERVAL 2 DAY, NOW(6) - INTERVAL 2 DAY, NOW(6) - INTERVAL 2 DAY, '', '{"ok":true}'
			FROM `+digits+` a, `+digits+` b, `+digits+` c, `+digits+` e, `+digits+` f, `+digits+` g`); err != nil {
			b.Fatal(err)
		}
		if _, err := s.QueuePut(ctx, &store.Queue{Name: "live", PollingInterval: 200, MaxWorkers: 20}); err != nil {
			b.Fatal(err)
		}
		enqueue := func(stop <-chan struct{}) []time.Duration {
			var lat []time.Duration
			tick := time.NewTicker(10 * time.Millisecond) // 100 enqueues a second
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return lat
				case <-tick.C:
				}
				t0 := time.Now()
				if _, err := s.JobsInsert(ctx, []*store.JobInsertParams{{Queue: "live", Category: "c", URL: "http://w/x"}}); err != nil {
					b.Error(err)
					return lat
				}
				lat = append(lat, time.Since(t0))
			}
		}
		p99 := func(l []time.Duration) time.Duration {
			slices.Sort(l)
			return l[len(l)*99/100]
		}
		stop := make(chan struct{})
		done := make(chan []time.Duration)
		go func() { done <- enqueue(stop) }()
		time.Sleep(3 * time.Second)
		close(stop)
		before := <-done

		stop = make(chan struct{})
		go func() { done <- enqueue(stop) }()
		b.StartTimer()
		t0 := time.Now()
		var batches []time.Duration
		var total int64
		for {
			bt := time.Now()
			n, err := s.FinishedPrune(ctx, &store.FinishedPruneParams{Queue: "q", Age: 24 * time.Hour, Limit: 1000})
			if err != nil {
				b.Fatal(err)
			}
			batches = append(batches, time.Since(bt))
			total += n
			if n < 1000 {
				break
			}
		}
		elapsed := time.Since(t0)
		b.StopTimer()
		close(stop)
		during := <-done
		if total != 1000000 {
			b.Fatalf("pruned %d rows, want 1000000", total)
		}
		b.ReportMetric(elapsed.Seconds(), "s/1M-rows")
		b.ReportMetric(float64(p99(batches).Microseconds())/1000, "ms-p99-batch")
		b.ReportMetric(float64(p99(before).Microseconds())/1000, "ms-p99-enqueue-idle")
		b.ReportMetric(float64(p99(during).Microseconds())/1000, "ms-p99-enqueue-pruning")
	}
}

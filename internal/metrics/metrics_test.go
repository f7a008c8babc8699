package metrics_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rowq/rowq/internal/metrics"
	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
)

// TestHandler_DatabaseAway: when the statistics cannot be read, a scrape
// still answers 200 with the process's metrics and rowq_stats_up 0, so an
// alert can tell "rowq is up but its database is not" from "rowq is down".
func TestHandler_DatabaseAway(t *testing.T) {
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			st := dbtest.Open(t, dialect)
			h := metrics.Handler(metrics.Config{Store: st, Version: "v1"})
			get := func() string {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
				if rec.Code != http.StatusOK {
					t.Fatalf("status %d", rec.Code)
				}
				b, _ := io.ReadAll(rec.Body)
				return string(b)
			}
			if body := get(); !strings.Contains(body, "\nrowq_stats_up 1\n") {
				t.Fatalf("database up: no rowq_stats_up 1 in\n%s", body)
			}
			st.Close()
			body := get()
			for _, want := range []string{"\nrowq_stats_up 0\n", `rowq_build_info{version="v1"} 1`, "\ngo_goroutines "} {
				if !strings.Contains(body, want) {
					t.Errorf("database away: no %q in\n%s", want, body)
				}
			}
		})
	}
}

// TestHandler_QueueLimit: up to the limit each queue has series of its
// own; beyond it none has, and the totals over every queue and the number
// of queues are there either way.
func TestHandler_QueueLimit(t *testing.T) {
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			st := dbtest.Open(t, dialect)
			ctx := context.Background()
			var deltas []*store.StatsDelta
			for i := range 3 {
				name := fmt.Sprintf("q%d", i)
				if _, err := st.QueuePut(ctx, &store.Queue{Name: name, PollingInterval: 200, MaxWorkers: 5}); err != nil {
					t.Fatal(err)
				}
				deltas = append(deltas, &store.StatsDelta{Queue: name, StatsCounters: store.StatsCounters{Pushes: int64(i + 1)}})
			}
			if err := st.StatsAdd(ctx, &store.StatsAddParams{Node: "n1", Deltas: deltas}); err != nil {
				t.Fatal(err)
			}
			get := func(limit int) string {
				rec := httptest.NewRecorder()
				metrics.Handler(metrics.Config{Store: st, QueueLimit: limit}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
				b, _ := io.ReadAll(rec.Body)
				return string(b)
			}
			common := []string{"\nrowq_queues 3\n", "\nrowq_queues_pushes_total 6\n", "\nrowq_queues_max_workers 15\n"}
			body := get(3)
			for _, want := range append(common, "\nrowq_queues_over_limit 0\n", `rowq_queue_pushes_total{queue="q2"} 3`) {
				if !strings.Contains(body, want) {
					t.Errorf("limit 3: no %q in\n%s", want, body)
				}
			}
			body = get(2)
			for _, want := range append(common, "\nrowq_queues_over_limit 1\n") {
				if !strings.Contains(body, want) {
					t.Errorf("limit 2: no %q in\n%s", want, body)
				}
			}
			if strings.Contains(body, "rowq_queue_pushes_total{") {
				t.Errorf("limit 2 with 3 queues: per-queue series in\n%s", body)
			}
		})
	}
}

package metrics_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rowq/rowq/internal/metrics"
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

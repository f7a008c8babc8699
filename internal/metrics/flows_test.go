package metrics_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rowq/rowq/internal/metrics"
	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
)

// TestFlows_Counts: what ending flow jobs did is summed into this node's
// rowq_flow_* counters, and the prunes into rowq_finished_pruned_total.
func TestFlows_Counts(t *testing.T) {
	t.Parallel()
	f := metrics.NewFlows()
	h := metrics.Handler(metrics.Config{Store: dbtest.Open(t, "sqlite"), Flows: f})
	f.Add(store.FlowDone{Queues: []string{"q"}, Callbacks: 2, Released: 1})
	f.Add(store.FlowDone{Callbacks: 1, Ended: 4})
	var nilFlows *metrics.Flows
	nilFlows.Add(store.FlowDone{Callbacks: 1}) // counts nothing
	f.Pruned(1000)
	f.Pruned(7)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	b, _ := io.ReadAll(rec.Body)
	for _, want := range []string{"\nrowq_flow_callbacks_total 3\n", "\nrowq_flow_released_total 1\n", "\nrowq_flow_ended_total 4\n", "\nrowq_finished_pruned_total 1007\n"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("no %q in\n%s", strings.TrimSpace(want), b)
		}
	}
}

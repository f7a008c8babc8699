package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rowq/rowq/internal/store"
)

// Flows counts what ending jobs with a flow did on this node
// (store.FlowDone, docs/lifecycle.md): callbacks enqueued, dependents
// released, and dependents ended because a parent failed; and the
// history rows its queues' prunes deleted. Unlike the
// queue series, these are this node's own, counted since it started:
// sum() them across nodes.
type Flows struct {
	callbacks, released, ended, pruned prometheus.Counter
}

// NewFlows returns counters at zero.
func NewFlows() *Flows {
	c := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	}
	return &Flows{
		callbacks: c("rowq_flow_callbacks_total", "Callback jobs enqueued by jobs and batches that ended, on this node since it started (callbacks of batches included)."),
		released:  c("rowq_flow_released_total", "Blocked jobs released because their last parent succeeded, on this node since it started."),
		ended:     c("rowq_flow_ended_total", "Blocked jobs cancelled or failed because a parent failed or was cancelled, on this node since it started."),
		pruned:    c("rowq_finished_pruned_total", "History rows of finished jobs deleted by the prunes of the queues this node leads, since it started."),
	}
}

// Add counts d; a nil Flows counts nothing.
func (f *Flows) Add(d store.FlowDone) {
	if f == nil {
		return
	}
	f.callbacks.Add(float64(d.Callbacks))
	f.released.Add(float64(d.Released))
	f.ended.Add(float64(d.Ended))
}

// Pruned counts n history rows pruned; a nil Flows counts nothing.
func (f *Flows) Pruned(n int64) {
	if f == nil {
		return
	}
	f.pruned.Add(float64(n))
}

func (f *Flows) collectors() []prometheus.Collector {
	return []prometheus.Collector{f.callbacks, f.released, f.ended, f.pruned}
}

package httpapi

import (
	"net/http"

	"github.com/rowq/rowq/internal/stats"
	"github.com/rowq/rowq/internal/store"
)

// statsJSON is the Fireworq queue stats object. docs/api.md says what each
// counter means and how fresh it is.
type statsJSON struct {
	TotalPushes            int64   `json:"total_pushes"`
	TotalPops              int64   `json:"total_pops"`
	TotalSuccesses         int64   `json:"total_successes"`
	TotalFailures          int64   `json:"total_failures"`
	TotalPermanentFailures int64   `json:"total_permanent_failures"`
	TotalCompletes         int64   `json:"total_completes"`
	TotalElapsed           int64   `json:"total_elapsed"` // ms
	PushesPerSecond        float64 `json:"pushes_per_second"`
	PopsPerSecond          float64 `json:"pops_per_second"`
	OutstandingJobs        int64   `json:"outstanding_jobs"`
	TotalWorkers           int     `json:"total_workers"`
	IdleWorkers            int     `json:"idle_workers"`
	ActiveNodes            int     `json:"active_nodes"`
}

func toStatsJSON(q *store.QueueStats) *statsJSON {
	out := &statsJSON{
		TotalPushes: q.Pushes, TotalPops: q.Pops, TotalSuccesses: q.Successes, TotalFailures: q.Failures,
		TotalPermanentFailures: q.PermanentFailures, TotalCompletes: q.Completes, TotalElapsed: q.ElapsedMs,
		PushesPerSecond: q.PushesPerSecond, PopsPerSecond: q.PopsPerSecond, OutstandingJobs: q.Outstanding,
	}
	// One node dispatches a queue: its workers are the queue's workers.
	if q.Active {
		out.ActiveNodes = 1
		out.TotalWorkers = q.MaxWorkers
		out.IdleWorkers = max(0, q.MaxWorkers-q.BusyWorkers)
	}
	return out
}

func (a *API) queueStats(r *http.Request) (any, error) {
	name := r.PathValue("name")
	if err := checkName("name", name); err != nil {
		return nil, err
	}
	m, err := a.cfg.Store.StatsGet(r.Context(), &store.StatsGetParams{Queue: name, Fresh: stats.Fresh})
	if err != nil {
		return nil, err
	}
	q := m[name]
	if q == nil {
		return nil, errorf(http.StatusNotFound, "queue %q does not exist", name)
	}
	return toStatsJSON(q), nil
}

func (a *API) allQueueStats(r *http.Request) (any, error) {
	m, err := a.cfg.Store.StatsGet(r.Context(), &store.StatsGetParams{Fresh: stats.Fresh})
	if err != nil {
		return nil, err
	}
	out := make(map[string]*statsJSON, len(m))
	for name, q := range m {
		out[name] = toStatsJSON(q)
	}
	return out, nil
}

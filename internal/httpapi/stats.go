package httpapi

import (
	"net/http"

	"github.com/rowq/rowq/internal/auth"
	"github.com/rowq/rowq/internal/stats"
	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/rowqtype"
)

// toStatsJSON shows a queue's statistics as the Fireworq queue stats
// object.
func toStatsJSON(q *store.QueueStats) *rowqtype.QueueStats {
	out := &rowqtype.QueueStats{
		TotalPushes: q.Pushes, TotalPops: q.Pops, TotalSuccesses: q.Successes, TotalFailures: q.Failures,
		TotalPermanentFailures: q.PermanentFailures, TotalCompletes: q.Completes, TotalElapsed: q.ElapsedMs,
		TotalCancels:    q.Cancels,
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
	g := auth.FromContext(r.Context())
	out := make(map[string]*rowqtype.QueueStats, len(m))
	for name, q := range m {
		if g.Queue(name) {
			out[name] = toStatsJSON(q)
		}
	}
	return out, nil
}

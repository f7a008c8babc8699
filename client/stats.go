package client

import (
	"context"
	"net/http"
)

// QueueStats are a queue's statistics, summed over every node. docs/api.md
// says what each field means and how fresh it is.
type QueueStats struct {
	TotalPushes            int64   `json:"total_pushes"`
	TotalPops              int64   `json:"total_pops"`
	TotalSuccesses         int64   `json:"total_successes"`
	TotalFailures          int64   `json:"total_failures"`
	TotalPermanentFailures int64   `json:"total_permanent_failures"`
	TotalCompletes         int64   `json:"total_completes"`
	TotalElapsed           int64   `json:"total_elapsed"` // milliseconds
	PushesPerSecond        float64 `json:"pushes_per_second"`
	PopsPerSecond          float64 `json:"pops_per_second"`
	OutstandingJobs        int64   `json:"outstanding_jobs"`
	TotalWorkers           int     `json:"total_workers"`
	IdleWorkers            int     `json:"idle_workers"`
	ActiveNodes            int     `json:"active_nodes"`
}

// QueueStats returns one queue's statistics (GET /queue/{name}/stats).
func (c *Client) QueueStats(ctx context.Context, queue string) (*QueueStats, error) {
	var out QueueStats
	if err := c.Do(ctx, http.MethodGet, "/queue/"+esc(queue)+"/stats", nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// AllQueueStats returns every queue's statistics by name
// (GET /queues/stats).
func (c *Client) AllQueueStats(ctx context.Context) (map[string]*QueueStats, error) {
	var out map[string]*QueueStats
	return out, c.Do(ctx, http.MethodGet, "/queues/stats", nil, nil, &out)
}

package client

import (
	"context"
	"net/http"

	"github.com/rowq/rowq/rowqtype"
)

// QueueStats returns one queue's statistics (GET /queue/{name}/stats).
func (c *Client) QueueStats(ctx context.Context, queue string) (*rowqtype.QueueStats, error) {
	var out rowqtype.QueueStats
	if err := c.Do(ctx, http.MethodGet, "/queue/"+esc(queue)+"/stats", nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// AllQueueStats returns every queue's statistics by name
// (GET /queues/stats).
func (c *Client) AllQueueStats(ctx context.Context) (map[string]*rowqtype.QueueStats, error) {
	var out map[string]*rowqtype.QueueStats
	return out, c.Do(ctx, http.MethodGet, "/queues/stats", nil, nil, &out)
}

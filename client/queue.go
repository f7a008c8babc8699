package client

import (
	"context"
	"encoding/json"
	"net/http"
)

// NewJob is a job to enqueue. Durations are seconds, as in the API.
type NewJob struct {
	URL        string          `json:"url"`
	Payload    json.RawMessage `json:"payload,omitempty"`
	RunAfter   int64           `json:"run_after,omitempty"`
	MaxRetries int64           `json:"max_retries,omitempty"`
	RetryDelay int64           `json:"retry_delay,omitempty"`
	Timeout    int64           `json:"timeout,omitempty"`
	// rowq's additions (see docs/jobs.md).
	Priority      int64   `json:"priority,omitempty"`        // -1000..1000, higher first
	UniqueKey     string  `json:"unique_key,omitempty"`      // one pending job per queue and key
	RetryBackoff  string  `json:"retry_backoff,omitempty"`   // "fixed" (default) or "exponential"
	RetryDelayMax int64   `json:"retry_delay_max,omitempty"` // cap of an exponential delay, seconds
	RetryJitter   float64 `json:"retry_jitter,omitempty"`    // 0..1, a fraction of each delay
}

// PushedJob is the server's answer to an enqueue.
type PushedJob struct {
	ID         int64           `json:"id"`
	QueueName  string          `json:"queue_name"`
	Category   string          `json:"category"`
	URL        string          `json:"url"`
	Payload    json.RawMessage `json:"payload,omitempty"`
	RunAfter   int64           `json:"run_after"`
	MaxRetries int64           `json:"max_retries"`
	RetryDelay int64           `json:"retry_delay"`
	Timeout    int64           `json:"timeout"`
	// rowq's additions.
	Priority      int64   `json:"priority"`
	RetryBackoff  string  `json:"retry_backoff"`
	RetryDelayMax int64   `json:"retry_delay_max"`
	RetryJitter   float64 `json:"retry_jitter"`
	UniqueKey     string  `json:"unique_key,omitempty"`
	// Existing is true when the job's unique key was held by a pending
	// job, which is the job described; always false without a key.
	Existing bool `json:"existing,omitempty"`
}

// PushJob enqueues a job of category (POST /job/{category}). The answer
// comes after the job is committed.
func (c *Client) PushJob(ctx context.Context, category string, job *NewJob) (*PushedJob, error) {
	var out PushedJob
	if err := c.Do(ctx, http.MethodPost, "/job/"+esc(category), nil, job, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Queue is a queue's settings. Pointer fields are optional on PutQueue.
type Queue struct {
	Name                   string   `json:"name,omitempty"`
	PollingInterval        int      `json:"polling_interval,omitempty"` // milliseconds
	MaxWorkers             int      `json:"max_workers,omitempty"`
	MaxDispatchesPerSecond *float64 `json:"max_dispatches_per_second,omitempty"`
	MaxBurstSize           *int     `json:"max_burst_size,omitempty"`
	// Paused queues accept jobs but dispatch none. PutQueue pauses the
	// queue when true and keeps its state when false; see ResumeQueue.
	Paused bool `json:"paused,omitempty"`
}

// Queues lists every queue (GET /queues).
func (c *Client) Queues(ctx context.Context) ([]*Queue, error) {
	var out []*Queue
	return out, c.Do(ctx, http.MethodGet, "/queues", nil, nil, &out)
}

// Queue returns one queue (GET /queue/{name}).
func (c *Client) Queue(ctx context.Context, name string) (*Queue, error) {
	var out Queue
	if err := c.Do(ctx, http.MethodGet, "/queue/"+esc(name), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// PutQueue creates or replaces a queue (PUT /queue/{name}); zero fields
// take the server's defaults.
func (c *Client) PutQueue(ctx context.Context, name string, q *Queue) (*Queue, error) {
	in := *q
	in.Name = ""
	var out Queue
	if err := c.Do(ctx, http.MethodPut, "/queue/"+esc(name), nil, &in, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteQueue deletes a queue and returns it (DELETE /queue/{name}).
func (c *Client) DeleteQueue(ctx context.Context, name string) (*Queue, error) {
	var out Queue
	if err := c.Do(ctx, http.MethodDelete, "/queue/"+esc(name), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Node is the rowq node dispatching a queue.
type Node struct {
	ID   string `json:"id"`
	Host string `json:"host"`
}

// QueueNode returns the node dispatching the queue (GET /queue/{name}/node).
func (c *Client) QueueNode(ctx context.Context, name string) (*Node, error) {
	var out Node
	if err := c.Do(ctx, http.MethodGet, "/queue/"+esc(name)+"/node", nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Routing sends jobs of a category to a queue.
type Routing struct {
	JobCategory string `json:"job_category"`
	QueueName   string `json:"queue_name"`
}

// Routings lists every routing (GET /routings).
func (c *Client) Routings(ctx context.Context) ([]*Routing, error) {
	var out []*Routing
	return out, c.Do(ctx, http.MethodGet, "/routings", nil, nil, &out)
}

// Routing returns one routing (GET /routing/{category}).
func (c *Client) Routing(ctx context.Context, category string) (*Routing, error) {
	var out Routing
	if err := c.Do(ctx, http.MethodGet, "/routing/"+esc(category), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// PutRouting routes category to queue (PUT /routing/{category}).
func (c *Client) PutRouting(ctx context.Context, category, queue string) (*Routing, error) {
	var out Routing
	if err := c.Do(ctx, http.MethodPut, "/routing/"+esc(category), nil, map[string]string{"queue_name": queue}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteRouting deletes a routing and returns it (DELETE /routing/{category}).
func (c *Client) DeleteRouting(ctx context.Context, category string) (*Routing, error) {
	var out Routing
	if err := c.Do(ctx, http.MethodDelete, "/routing/"+esc(category), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Version returns the server's version (GET /version).
func (c *Client) Version(ctx context.Context) (string, error) {
	var out struct {
		Version string `json:"version"`
	}
	return out.Version, c.Do(ctx, http.MethodGet, "/version", nil, nil, &out)
}

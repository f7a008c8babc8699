package client

import (
	"context"
	"net/http"

	"github.com/rowq/rowq/rowqtype"
)

// Queues lists every queue (GET /queues).
func (c *Client) Queues(ctx context.Context) ([]*rowqtype.Queue, error) {
	var out []*rowqtype.Queue
	return out, c.Do(ctx, http.MethodGet, "/queues", nil, nil, &out)
}

// Queue returns one queue (GET /queue/{name}).
func (c *Client) Queue(ctx context.Context, name string) (*rowqtype.Queue, error) {
	var out rowqtype.Queue
	if err := c.Do(ctx, http.MethodGet, "/queue/"+esc(name), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// PutQueue creates or replaces a queue (PUT /queue/{name}); nil fields
// take the server's defaults, except Paused: nil keeps the queue's state.
func (c *Client) PutQueue(ctx context.Context, name string, q *rowqtype.QueueRequest) (*rowqtype.Queue, error) {
	var out rowqtype.Queue
	if err := c.Do(ctx, http.MethodPut, "/queue/"+esc(name), nil, q, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteQueue deletes a queue and returns it (DELETE /queue/{name}).
func (c *Client) DeleteQueue(ctx context.Context, name string) (*rowqtype.Queue, error) {
	var out rowqtype.Queue
	if err := c.Do(ctx, http.MethodDelete, "/queue/"+esc(name), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// QueueNode returns the node dispatching the queue (GET /queue/{name}/node).
func (c *Client) QueueNode(ctx context.Context, name string) (*rowqtype.Node, error) {
	var out rowqtype.Node
	if err := c.Do(ctx, http.MethodGet, "/queue/"+esc(name)+"/node", nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Nodes lists the live nodes and how many queues each dispatches
// (GET /nodes).
func (c *Client) Nodes(ctx context.Context) (*rowqtype.Nodes, error) {
	var out rowqtype.Nodes
	if err := c.Do(ctx, http.MethodGet, "/nodes", nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Routings lists every routing (GET /routings).
func (c *Client) Routings(ctx context.Context) ([]*rowqtype.Routing, error) {
	var out []*rowqtype.Routing
	return out, c.Do(ctx, http.MethodGet, "/routings", nil, nil, &out)
}

// Routing returns one routing (GET /routing/{category}).
func (c *Client) Routing(ctx context.Context, category string) (*rowqtype.Routing, error) {
	var out rowqtype.Routing
	if err := c.Do(ctx, http.MethodGet, "/routing/"+esc(category), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// PutRouting routes category to queue (PUT /routing/{category}).
func (c *Client) PutRouting(ctx context.Context, category, queue string) (*rowqtype.Routing, error) {
	var out rowqtype.Routing
	if err := c.Do(ctx, http.MethodPut, "/routing/"+esc(category), nil, &rowqtype.RoutingRequest{QueueName: queue}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteRouting deletes a routing and returns it (DELETE /routing/{category}).
func (c *Client) DeleteRouting(ctx context.Context, category string) (*rowqtype.Routing, error) {
	var out rowqtype.Routing
	if err := c.Do(ctx, http.MethodDelete, "/routing/"+esc(category), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Version returns the server's version (GET /version).
func (c *Client) Version(ctx context.Context) (string, error) {
	var out rowqtype.Version
	return out.Version, c.Do(ctx, http.MethodGet, "/version", nil, nil, &out)
}

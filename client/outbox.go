package client

import (
	"context"
	"net/http"

	"github.com/rowq/rowq/rowqtype"
)

// OutboxRejects returns one page of the transactional outbox's rejects:
// rows of rowq_outbox that were not valid jobs, oldest first (GET
// /outbox/rejects). Applications enqueue through the outbox with their own
// SQL, not through this client: see docs/outbox.md.
func (c *Client) OutboxRejects(ctx context.Context, opts *ListOptions) (*rowqtype.OutboxRejectPage, error) {
	var out rowqtype.OutboxRejectPage
	if err := c.Do(ctx, http.MethodGet, "/outbox/rejects", opts.query(), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

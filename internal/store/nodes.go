package store

import (
	"context"
	"time"
)

// NodeStore registers rowq processes, so that peers can nudge them and
// operators see them.
type NodeStore interface {
	// NodeHeartbeat registers the node or extends its registration to
	// now + TTL.
	NodeHeartbeat(ctx context.Context, p *NodeHeartbeatParams) error
	// NodeDelete removes the node's registration (clean shutdown).
	NodeDelete(ctx context.Context, id string) error
}

// Node is a registered rowq process.
type Node struct {
	ID        string
	Host      string
	StartedAt time.Time
	ExpiresAt time.Time
}

// NodeHeartbeatParams are the arguments of NodeStore.NodeHeartbeat.
type NodeHeartbeatParams struct {
	ID   string
	Host string // address peers and operators can reach it at
	TTL  time.Duration
}

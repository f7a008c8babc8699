package store

import (
	"context"
	"slices"
	"time"
)

// NodeStore registers rowq processes, so that peers can nudge them and
// operators see them, and ties a node's liveness to a database session, so
// that its death is noticed at once rather than when its registration
// expires.
type NodeStore interface {
	// NodeHeartbeat registers the node or extends its registration to
	// now + TTL.
	NodeHeartbeat(ctx context.Context, p *NodeHeartbeatParams) error
	// NodeDelete removes the node's registration (clean shutdown).
	NodeDelete(ctx context.Context, id string) error

	// NodeSessionOpen ties node id's liveness to a database session: it
	// takes a lock named for the node on a connection of its own
	// (MySQL/MariaDB: GET_LOCK; PostgreSQL: a session-level advisory lock;
	// SQLite: an exclusive flock on a small file beside the database file),
	// which the database (or, for SQLite, the kernel) frees the moment the
	// process dies or that connection drops. ErrConflict if another
	// session holds the lock; errors.ErrUnsupported where the dialect
	// cannot hold one (SQLite off unix, or in memory), and the node then
	// runs on its TTL alone. Open the session before the heartbeat that
	// sets NodeHeartbeatParams.Session, or NodesReap may reap the node in
	// between.
	NodeSessionOpen(ctx context.Context, id string) (NodeSession, error)
	// NodesReap deletes the registrations of nodes registered with Session
	// set whose session lock is free now (their process died or lost its
	// connection), and returns their ids. A node that holds its lock, or
	// registered without a session, is never reaped. The reaped nodes'
	// queues are then claimable and their grabs expired (JobsRescue).
	NodesReap(ctx context.Context) ([]string, error)
	// NodesReapExpired deletes the registrations that have expired by the
	// database's clock, with or without a session, and returns their ids:
	// their queues are then claimable and their grabs expired at once. It
	// serves nodes that cannot hold a session (ErrLocalSession), which keep
	// their registration as a short lease; the caller reaps only while its
	// own renewals go through, so that a database that stalled everyone's
	// renewals at once does not make it reap live peers.
	NodesReapExpired(ctx context.Context) ([]string, error)
	// NodesLive returns the nodes whose registration has not expired,
	// ordered by id, each with the number of queues it leads, and the
	// number of queues in all: what spreading queues over the nodes needs,
	// and what GET /nodes shows.
	NodesLive(ctx context.Context) (*Cluster, error)
	// NodesGlance returns the ids of the live nodes, ordered, and whether
	// some queue has no leader: what a leadership cycle reads every
	// refresh, at a cost that does not grow with the queues, to tell
	// whether it must count them (NodesLive).
	NodesGlance(ctx context.Context) (*Glance, error)
}

// Glance is a cheap look at the cluster (NodeStore.NodesGlance).
type Glance struct {
	Nodes []string // live node ids, ordered
	Free  bool     // some queue has no leader
}

// GlanceOf makes the Glance of the rows of one statement that selects the
// live node ids and, when a queue is free, one NULL, in any order: a
// glance at both costs one round trip.
func GlanceOf(rows []*string) *Glance {
	g := &Glance{Nodes: make([]string, 0, len(rows))}
	for _, id := range rows {
		if id == nil {
			g.Free = true
		} else {
			g.Nodes = append(g.Nodes, *id)
		}
	}
	slices.Sort(g.Nodes) // byte order, as the ids' collation
	return g
}

// Cluster is the live nodes of a database and the queues they share
// (NodeStore.NodesLive).
type Cluster struct {
	Nodes  []*Node // live nodes, ordered by id, with Leads set
	Queues int     // queues in all, led or not
}

// NodeSession is a node's hold on its session lock (NodeStore.NodeSessionOpen).
// It is safe for concurrent use.
type NodeSession interface {
	// Check reports whether the session still holds its lock; an error
	// means it may not, and the caller closes it and opens a new one (its
	// registration may have been reaped meanwhile: it assumes it lost its
	// queues and grabs). A Check that ctx cuts short may drop the
	// connection, and with it the lock.
	Check(ctx context.Context) error
	// Close releases the lock and the connection (or file). Idempotent.
	Close() error
}

// Node is a registered rowq process.
type Node struct {
	ID        string
	Host      string
	StartedAt time.Time
	ExpiresAt time.Time
	// Leads is the number of queues the node leads (NodesLive only).
	Leads int
}

// NodeHeartbeatParams are the arguments of NodeStore.NodeHeartbeat.
type NodeHeartbeatParams struct {
	ID   string
	Host string // address peers and operators can reach it at
	TTL  time.Duration
	// Session says that the node holds a live NodeSession, so that
	// NodesReap may delete its registration once the session's lock is
	// free. Each heartbeat stores it anew.
	Session bool
}

package postgres

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rowq/rowq/internal/store"
)

// NodeHeartbeat registers the node or extends its registration to now + TTL;
// started_at is kept.
func (s *Store) NodeHeartbeat(ctx context.Context, p *store.NodeHeartbeatParams) error {
	_, err := s.exec(ctx, `/* rowq:nodes.heartbeat */
		INSERT INTO nodes (id, host, started_at, expires_at, has_session)
		VALUES ($1, $2, now(), now() + make_interval(secs => $3), $4)
		ON CONFLICT (id) DO UPDATE SET host = EXCLUDED.host, expires_at = EXCLUDED.expires_at, has_session = EXCLUDED.has_session`,
		p.ID, p.Host, p.TTL.Seconds(), p.Session)
	if err != nil {
		return fmt.Errorf("heartbeat node %q: %w", p.ID, mapErr(err))
	}
	return nil
}

// NodeDelete removes the node's registration; its queues are then free to
// be claimed.
func (s *Store) NodeDelete(ctx context.Context, id string) error {
	if _, err := s.exec(ctx, `/* rowq:nodes.delete */ DELETE FROM nodes WHERE id = $1`, id); err != nil {
		return fmt.Errorf("delete node %q: %w", id, mapErr(err))
	}
	return nil
}

// nodeLockSpace is the first key of every node's session lock, an advisory
// lock of the two-int4 form ("rown" in ASCII); the second is
// hashtext('rowq_node:' || id). pg_locks shows such a lock with classid =
// the first key, objid = the second as an oid (a negative hash wraps to
// 2^32 + hash) and objsubid = 2, in the database's own lock space, so two
// rowq databases on one server do not meet. Two node ids whose hashes
// collide (odds about n²/2^33 for n nodes alive at once) share a lock: the
// second to open gets ErrConflict and runs on its TTL alone.
const nodeLockSpace int32 = 0x726f776e

// nodeLockArgs is the SQL of a node's lock keys, from $1 (nodeLockSpace)
// and $2 (the node id).
const nodeLockArgs = `$1::int4, hashtext('rowq_node:' || $2::text)`

// NodeSessionOpen takes the node's advisory lock (pg_try_advisory_lock, at
// session level) on a connection taken out of the pool for good (hijacked),
// so that the pool neither hands it to others nor closes it for its age or
// health, and Store.Close does not wait for it. PostgreSQL frees the lock
// when that connection's backend ends, however it ends.
func (s *Store) NodeSessionOpen(ctx context.Context, id string) (store.NodeSession, error) {
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("open session of node %q: %w", id, mapErr(err))
	}
	conn := pc.Hijack()
	var got bool
	err = conn.QueryRow(ctx, `/* rowq:nodes.session_open */ SELECT pg_try_advisory_lock(`+nodeLockArgs+`)`, nodeLockSpace, id).Scan(&got)
	if err == nil && !got {
		err = fmt.Errorf("%w: another session holds its lock", store.ErrConflict)
	}
	if err != nil {
		closeConn(conn)
		return nil, fmt.Errorf("open session of node %q: %w", id, mapErr(err))
	}
	return &nodeSession{id: id, conn: conn}, nil
}

// nodeSession holds a node's advisory lock on conn, a connection of its own.
type nodeSession struct {
	id   string
	mu   sync.Mutex // a pgx.Conn serves one caller at a time
	conn *pgx.Conn  // nil once closed
}

// Check runs a trivial statement on the session's connection: an advisory
// lock taken at session level lasts as long as the session, so a
// connection that answers still holds it. It reads whether the server is
// read-only: a lock held on a standby, or on a primary fenced read-only
// before a failover, is no lock the other nodes see.
func (n *nodeSession) Check(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.conn == nil {
		return fmt.Errorf("check session of node %q: closed", n.id)
	}
	tag, err := n.conn.Exec(ctx, `/* rowq:nodes.session_check */ SELECT 1 WHERE current_setting('transaction_read_only') = 'off'`)
	if err != nil {
		return fmt.Errorf("check session of node %q: %w", n.id, mapErr(err))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("check session of node %q: %w", n.id, errReadOnly)
	}
	return nil
}

// Close unlocks, so that the lock is free when Close returns, and closes
// the connection (which would free the lock if the unlock failed).
func (n *nodeSession) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.conn == nil {
		return nil
	}
	conn := n.conn
	n.conn = nil
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn.Exec(ctx, `/* rowq:nodes.session_close */ SELECT pg_advisory_unlock(`+nodeLockArgs+`)`, nodeLockSpace, n.id)
	closeConn(conn)
	return nil
}

// closeConn closes a hijacked connection, bounded in time.
func closeConn(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn.Close(ctx)
}

// NodesReap deletes, in one statement, the rows of nodes registered with a
// session whose advisory lock no backend of this database holds. pg_locks
// is read once (the CTE is materialized), not once per node.
func (s *Store) NodesReap(ctx context.Context) ([]string, error) {
	ids, err := queryAll(ctx, s, pgx.RowTo[string], nodesReapSQL, nodeLockSpace)
	if err != nil {
		return nil, fmt.Errorf("reap nodes: %w", mapErr(err))
	}
	return ids, nil
}

// NodesReapExpired deletes, in one statement, the rows of nodes whose
// registration expired.
func (s *Store) NodesReapExpired(ctx context.Context) ([]string, error) {
	ids, err := queryAll(ctx, s, pgx.RowTo[string], `/* rowq:nodes.reap_expired */
		DELETE FROM nodes WHERE expires_at < now() RETURNING id`)
	if err != nil {
		return nil, fmt.Errorf("reap expired nodes: %w", mapErr(err))
	}
	return ids, nil
}

// nodesReapSQL deletes the nodes whose session lock is free; $1 is
// nodeLockSpace.
const nodesReapSQL = `/* rowq:nodes.reap */
	WITH held AS MATERIALIZED (
		SELECT objid FROM pg_locks
		WHERE locktype = 'advisory' AND granted AND objsubid = 2 AND classid = $1::int4::oid
			AND database = (SELECT oid FROM pg_database WHERE datname = current_database()))
	DELETE FROM nodes WHERE has_session
		AND NOT EXISTS (SELECT 1 FROM held WHERE held.objid = hashtext('rowq_node:' || nodes.id)::oid)
	RETURNING id`

func scanNode(row pgx.CollectableRow) (*store.Node, error) {
	var n store.Node
	err := row.Scan(&n.ID, &n.Host, &n.StartedAt, &n.ExpiresAt)
	n.StartedAt, n.ExpiresAt = n.StartedAt.UTC(), n.ExpiresAt.UTC()
	return &n, err
}

// NodesLive returns the live nodes with the number of queues each leads
// (one look into queues_leader_updated per node), and the number of queues.
func (s *Store) NodesLive(ctx context.Context) (*store.Cluster, error) {
	var c store.Cluster
	n, err := queryOne(ctx, s, pgx.RowTo[int], `/* rowq:nodes.live */ SELECT count(*) FROM queues`)
	if err == nil {
		c.Queues = n
		c.Nodes, err = queryAll(ctx, s, func(row pgx.CollectableRow) (*store.Node, error) {
			var n store.Node
			err := row.Scan(&n.ID, &n.Host, &n.StartedAt, &n.ExpiresAt, &n.Leads)
			n.StartedAt, n.ExpiresAt = n.StartedAt.UTC(), n.ExpiresAt.UTC()
			return &n, err
		}, `/* rowq:nodes.live */
			SELECT n.id, n.host, n.started_at, n.expires_at,
				(SELECT count(*) FROM queues q WHERE q.leader = n.id)
			FROM nodes n WHERE n.expires_at > now() ORDER BY n.id`)
	}
	if err != nil {
		return nil, fmt.Errorf("list live nodes: %w", mapErr(err))
	}
	return &c, nil
}

// NodesGlance returns the live node ids and whether a queue is free, in
// one statement: a short read of nodes, and a probe of queues_leader_updated that
// adds a NULL row when a queue has no leader (store.GlanceOf).
func (s *Store) NodesGlance(ctx context.Context) (*store.Glance, error) {
	rows, err := queryAll(ctx, s, pgx.RowTo[*string], `/* rowq:nodes.glance */ SELECT id FROM nodes WHERE expires_at > now()
		UNION ALL SELECT NULL WHERE EXISTS (SELECT 1 FROM queues WHERE leader IS NULL)`)
	if err != nil {
		return nil, fmt.Errorf("glance at the nodes: %w", mapErr(err))
	}
	return store.GlanceOf(rows), nil
}

package mysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"sync"
	"time"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/sqldb"
)

// NodeHeartbeat registers the node or extends its registration to
// NOW(6) + TTL; started_at keeps the first registration's time.
func (s *Store) NodeHeartbeat(ctx context.Context, p *store.NodeHeartbeatParams) error {
	ttl := p.TTL.Microseconds()
	err := retry(ctx, func() error {
		_, err := s.db.ExecContext(ctx, `/* rowq:nodes.heartbeat */
			INSERT INTO nodes (id, host, started_at, expires_at, has_session)
			VALUES (?, ?, NOW(6), NOW(6) + INTERVAL ? MICROSECOND, ?)
			ON DUPLICATE KEY UPDATE host = ?, expires_at = NOW(6) + INTERVAL ? MICROSECOND, has_session = ?`,
			p.ID, p.Host, ttl, p.Session, p.Host, ttl, p.Session)
		return err
	})
	if err != nil {
		return fmt.Errorf("heartbeat node %q: %w", p.ID, mapErr(err))
	}
	return nil
}

// NodeDelete removes the node's registration; the queues it led become
// claimable at once.
func (s *Store) NodeDelete(ctx context.Context, id string) error {
	if _, err := s.db.ExecContext(ctx, `/* rowq:nodes.delete */ DELETE FROM nodes WHERE id = ?`, id); err != nil {
		return fmt.Errorf("delete node %q: %w", id, mapErr(err))
	}
	return nil
}

// nodeLock is the SQL of the name of a node's session lock, computed by the
// server from idExpr, the node id ("?" or a column). Named locks are global
// to the server and at most 64 characters long, so the name hashes the
// database's name with the id: 10 + 40 characters.
func nodeLock(idExpr string) string {
	return "CONCAT('rowq_node:', LEFT(SHA1(CONCAT(DATABASE(), ':', " + idExpr + ")), 40))"
}

// NodeSessionOpen takes the node's named lock (GET_LOCK, without waiting) on
// a connection held out of the pool for the session's life; the server frees
// the lock when that connection ends, however it ends. The pool's
// ConnMaxLifetime closes a connection only when it goes back to the pool, so
// it does not end a session early.
//
// On a Galera member it answers store.ErrLocalSession: GET_LOCK is local to
// the member, so a node whose lock is held on one member looks dead to
// every client of another.
func (s *Store) NodeSessionOpen(ctx context.Context, id string) (store.NodeSession, error) {
	info, err := s.server(ctx)
	if err != nil {
		return nil, fmt.Errorf("open session of node %q: %w", id, mapErr(err))
	}
	if info.galera {
		return nil, fmt.Errorf("open session of node %q: %w", id, store.ErrLocalSession)
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("open session of node %q: %w", id, mapErr(err))
	}
	var got sql.NullInt64
	var connID int64
	err = conn.QueryRowContext(ctx, `/* rowq:nodes.session_open */ SELECT GET_LOCK(`+nodeLock("?")+`, 0), CONNECTION_ID()`, id).Scan(&got, &connID)
	switch {
	case err != nil:
		discard(conn)
		return nil, fmt.Errorf("open session of node %q: %w", id, mapErr(err))
	case !got.Valid || got.Int64 != 1:
		conn.Close() // it holds nothing: back to the pool
		return nil, fmt.Errorf("open session of node %q: %w: another connection holds its lock", id, store.ErrConflict)
	}
	return &nodeSession{id: id, conn: conn, connID: connID}, nil
}

// nodeSession holds a node's named lock on conn, connection connID.
type nodeSession struct {
	id     string
	connID int64
	mu     sync.Mutex
	conn   *sql.Conn // nil once closed
}

// Check asks, on the session's own connection, whether that connection
// still holds the lock.
func (n *nodeSession) Check(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.conn == nil {
		return fmt.Errorf("check session of node %q: closed", n.id)
	}
	var held sql.NullBool
	err := n.conn.QueryRowContext(ctx, `/* rowq:nodes.session_check */ SELECT IS_USED_LOCK(`+nodeLock("?")+`) = CONNECTION_ID()`, n.id).Scan(&held)
	if err != nil {
		return fmt.Errorf("check session of node %q: %w", n.id, mapErr(err))
	}
	if !held.Bool {
		return fmt.Errorf("check session of node %q: its connection no longer holds the lock", n.id)
	}
	return nil
}

// Close releases the lock and returns the connection to the pool; if the
// release fails, it closes the connection, which frees the lock too.
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
	var released sql.NullInt64
	err := conn.QueryRowContext(ctx, `/* rowq:nodes.session_close */ SELECT RELEASE_LOCK(`+nodeLock("?")+`)`, n.id).Scan(&released)
	if err != nil || released.Int64 != 1 {
		discard(conn)
		return nil // the lock is gone with the connection
	}
	return conn.Close()
}

// discard closes conn's connection instead of returning it to the pool.
func discard(conn *sql.Conn) {
	conn.Raw(func(any) error { return driver.ErrBadConn })
	conn.Close()
}

// NodesReap deletes the rows of nodes registered with a session whose lock
// no connection holds. Each delete checks the lock again, so a node that
// took its lock back after the look is kept.
func (s *Store) NodesReap(ctx context.Context) ([]string, error) {
	dead, err := s.reap(ctx, `/* rowq:nodes.reap_find */
		SELECT id FROM nodes WHERE has_session AND IS_USED_LOCK(`+nodeLock("id")+`) IS NULL`, `/* rowq:nodes.reap */
		DELETE FROM nodes WHERE id = ? AND has_session AND IS_USED_LOCK(`+nodeLock("?")+`) IS NULL`, 2)
	if err != nil {
		return dead, fmt.Errorf("reap nodes: %w", err)
	}
	return dead, nil
}

// NodesReapExpired deletes the rows of nodes whose registration expired.
// Each delete checks the expiry again, so a node that renewed after the
// look is kept.
func (s *Store) NodesReapExpired(ctx context.Context) ([]string, error) {
	dead, err := s.reap(ctx, `/* rowq:nodes.reap_expired_find */ SELECT id FROM nodes WHERE expires_at < NOW(6)`,
		`/* rowq:nodes.reap_expired */ DELETE FROM nodes WHERE id = ? AND expires_at < NOW(6)`, 1)
	if err != nil {
		return dead, fmt.Errorf("reap expired nodes: %w", err)
	}
	return dead, nil
}

// reap selects the ids of dead nodes with find, then deletes each with del,
// which takes the id idArgs times and checks again that it is dead, and
// returns the ids it deleted.
func (s *Store) reap(ctx context.Context, find, del string, idArgs int) ([]string, error) {
	var dead []string
	err := retry(ctx, func() (err error) {
		dead, err = sqldb.QueryAll(ctx, s.db, sqldb.ScanString, find)
		return err
	})
	if err != nil {
		return nil, mapErr(err)
	}
	reaped := dead[:0]
	for _, id := range dead {
		args := make([]any, idArgs)
		for i := range args {
			args[i] = id
		}
		var n int64
		err := retry(ctx, func() (err error) {
			n, err = sqldb.Affected(s.db.ExecContext(ctx, del, args...))
			return err
		})
		if err != nil {
			return reaped, fmt.Errorf("node %q: %w", id, mapErr(err))
		}
		if n == 1 {
			reaped = append(reaped, id)
		}
	}
	return reaped, nil
}

// NodesLive returns the live nodes with the number of queues each leads
// (one look into queues_leader_updated per node), and the number of queues.
func (s *Store) NodesLive(ctx context.Context) (*store.Cluster, error) {
	var c store.Cluster
	err := retry(ctx, func() error {
		if err := s.db.QueryRowContext(ctx, `/* rowq:nodes.live */ SELECT COUNT(*) FROM queues`).Scan(&c.Queues); err != nil {
			return err
		}
		var err error
		c.Nodes, err = sqldb.QueryAll(ctx, s.db, func(row sqldb.Scanner) (*store.Node, error) {
			var n store.Node
			return &n, row.Scan(&n.ID, &n.Host, &n.StartedAt, &n.ExpiresAt, &n.Leads)
		}, `/* rowq:nodes.live */
			SELECT n.id, n.host, n.started_at, n.expires_at,
				(SELECT COUNT(*) FROM queues q WHERE q.leader = n.id)
			FROM nodes n WHERE n.expires_at > NOW(6) ORDER BY n.id`)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list live nodes: %w", mapErr(err))
	}
	return &c, nil
}

// NodesGlance returns the live node ids and whether a queue is free, in
// one statement: a short read of nodes, and a probe of queues_leader_updated that
// adds a NULL row when a queue has no leader (store.GlanceOf).
func (s *Store) NodesGlance(ctx context.Context) (*store.Glance, error) {
	var rows []*string
	err := retry(ctx, func() error {
		var err error
		rows, err = sqldb.QueryAll(ctx, s.db, sqldb.ScanNullString, `/* rowq:nodes.glance */ SELECT id FROM nodes WHERE expires_at > NOW(6)
			UNION ALL SELECT NULL FROM DUAL WHERE EXISTS (SELECT 1 FROM queues WHERE leader IS NULL)`)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("glance at the nodes: %w", mapErr(err))
	}
	return store.GlanceOf(rows), nil
}

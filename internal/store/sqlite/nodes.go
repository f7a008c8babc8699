package sqlite

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/sqldb"
)

// NodeHeartbeat registers the node or extends its registration.
func (s *Store) NodeHeartbeat(ctx context.Context, p *store.NodeHeartbeatParams) error {
	now := s.micros()
	_, err := s.w.ExecContext(ctx, `/* rowq:nodes.heartbeat */
		INSERT INTO nodes (id, host, started_at, expires_at, has_session) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET host = excluded.host, expires_at = excluded.expires_at, has_session = excluded.has_session`,
		p.ID, p.Host, now, now+p.TTL.Microseconds(), p.Session)
	if err != nil {
		return fmt.Errorf("heartbeat node %q: %w", p.ID, mapErr(err))
	}
	return nil
}

// NodeDelete removes the node's registration.
func (s *Store) NodeDelete(ctx context.Context, id string) error {
	if _, err := s.w.ExecContext(ctx, `/* rowq:nodes.delete */ DELETE FROM nodes WHERE id = ?`, id); err != nil {
		return fmt.Errorf("delete node %q: %w", id, mapErr(err))
	}
	return nil
}

// Node sessions on SQLite: the processes sharing a database file are on
// one host, so a node's session is an exclusive flock on a file beside the
// database (nodeLockPath), which the kernel frees when the process dies.
// Locks belong to an open file description: a second open of the same
// file, even in the same process, does not get the lock while the first
// holds it.
//
// A lock file is removed only by the process that holds its lock (the
// owner on Close, a reaper that found it free), and whoever takes a lock
// checks afterwards that the path still names the file it locked, opening
// again if not (lockFile). So a held lock is always the one the path
// names, and a missing file means that nobody holds the session.

// errLocked means another open file holds the flock.
var errLocked = errors.New("locked by another open file")

// nodeLockPath is the lock file of node id's session:
// <database file>-node-<16 hex digits of SHA-1(id)>.lock.
func (s *Store) nodeLockPath(id string) (string, error) {
	if s.path == "" || strings.Contains(s.path, ":memory:") || strings.Contains(s.path, "mode=memory") {
		return "", fmt.Errorf("%w: an in-memory database has no file to keep a session lock beside", errors.ErrUnsupported)
	}
	sum := sha1.Sum([]byte(id))
	return s.path + "-node-" + hex.EncodeToString(sum[:8]) + ".lock", nil
}

// NodeSessionOpen takes an exclusive flock, without waiting, on the node's
// lock file, creating it (with the node id in it, for operators);
// errors.ErrUnsupported off unix.
func (s *Store) NodeSessionOpen(ctx context.Context, id string) (store.NodeSession, error) {
	path, err := s.nodeLockPath(id)
	if err == nil {
		var f *os.File
		if f, err = lockFile(path, true); err == nil {
			if err = writeID(f, id); err == nil {
				return &nodeSession{id: id, path: path, f: f}, nil
			}
			f.Close()
		}
	}
	if errors.Is(err, errLocked) {
		err = fmt.Errorf("%w: another session holds %s", store.ErrConflict, path)
	}
	return nil, fmt.Errorf("open session of node %q: %w", id, err)
}

// writeID replaces the content of the lock file f with the node id.
func writeID(f *os.File, id string) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	_, err := f.WriteAt([]byte(id+"\n"), 0)
	return err
}

// nodeSession holds the flock of a node's lock file f, at path.
type nodeSession struct {
	id   string
	path string
	mu   sync.Mutex
	f    *os.File // nil once closed
}

// Check reports an error if the session's file was closed or its path no
// longer names it (removed from outside).
func (n *nodeSession) Check(context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.f == nil {
		return fmt.Errorf("check session of node %q: closed", n.id)
	}
	same, err := namesFile(n.path, n.f)
	if err == nil && !same {
		err = fmt.Errorf("%s names another file", n.path)
	}
	if err != nil {
		return fmt.Errorf("check session of node %q: %w", n.id, err)
	}
	return nil
}

// Close removes the lock file, while it still holds its lock, and closes
// it, which frees the lock.
func (n *nodeSession) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.f == nil {
		return nil
	}
	f := n.f
	n.f = nil
	if same, err := namesFile(n.path, f); err == nil && same {
		os.Remove(n.path)
	}
	f.Close() // an error here means it was closed already: the lock is free
	return nil
}

// namesFile reports whether path names the open file f.
func namesFile(path string, f *os.File) (bool, error) {
	fi, err := f.Stat()
	if err != nil {
		return false, err
	}
	pi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return os.SameFile(fi, pi), nil
}

// NodesReapExpired deletes the rows of nodes whose registration expired.
func (s *Store) NodesReapExpired(ctx context.Context) ([]string, error) {
	ids, err := sqldb.QueryAll(ctx, s.w, sqldb.ScanString, `/* rowq:nodes.reap_expired */
		DELETE FROM nodes WHERE expires_at < ? RETURNING id`, s.micros())
	if err != nil {
		return nil, fmt.Errorf("reap expired nodes: %w", mapErr(err))
	}
	return ids, nil
}

// NodesReap lists the nodes registered with a session and tries each one's
// lock file without waiting: a file it can lock, or a missing one, means
// the node's process is gone. It deletes such a node's row while it holds
// the lock, then removes the file.
func (s *Store) NodesReap(ctx context.Context) ([]string, error) {
	ids, err := sqldb.QueryAll(ctx, s.r, sqldb.ScanString, `/* rowq:nodes.reap_find */ SELECT id FROM nodes WHERE has_session`)
	if err != nil {
		return nil, fmt.Errorf("reap nodes: %w", mapErr(err))
	}
	var reaped []string
	for _, id := range ids {
		path, err := s.nodeLockPath(id)
		if err != nil {
			return reaped, fmt.Errorf("reap node %q: %w", id, err)
		}
		f, err := lockFile(path, false)
		switch {
		case errors.Is(err, errLocked), errors.Is(err, errors.ErrUnsupported):
			continue // alive, or not for this platform to judge
		case errors.Is(err, os.ErrNotExist):
			f = nil
		case err != nil:
			return reaped, fmt.Errorf("reap node %q: %w", id, err)
		}
		n, err := affected(s.w.ExecContext(ctx, `/* rowq:nodes.reap */ DELETE FROM nodes WHERE id = ? AND has_session`, id))
		if f != nil {
			if err == nil {
				os.Remove(path)
			}
			f.Close()
		}
		if err != nil {
			return reaped, fmt.Errorf("reap node %q: %w", id, err)
		}
		if n == 1 {
			reaped = append(reaped, id)
		}
	}
	return reaped, nil
}

// NodesLive returns the live nodes with the number of queues each leads,
// and the number of queues.
func (s *Store) NodesLive(ctx context.Context) (*store.Cluster, error) {
	var c store.Cluster
	err := s.r.QueryRowContext(ctx, `/* rowq:nodes.live */ SELECT COUNT(*) FROM queues`).Scan(&c.Queues)
	if err == nil {
		c.Nodes, err = sqldb.QueryAll(ctx, s.r, func(row sqldb.Scanner) (*store.Node, error) {
			var (
				n                  store.Node
				started, expiresAt int64
			)
			err := row.Scan(&n.ID, &n.Host, &started, &expiresAt, &n.Leads)
			n.StartedAt, n.ExpiresAt = fromMicros(started), fromMicros(expiresAt)
			return &n, err
		}, `/* rowq:nodes.live */
			SELECT n.id, n.host, n.started_at, n.expires_at,
				(SELECT COUNT(*) FROM queues q WHERE q.leader = n.id)
			FROM nodes n WHERE n.expires_at > ? ORDER BY n.id`, s.micros())
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
	rows, err := sqldb.QueryAll(ctx, s.r, sqldb.ScanNullString, `/* rowq:nodes.glance */ SELECT id FROM nodes WHERE expires_at > ?
		UNION ALL SELECT NULL WHERE EXISTS (SELECT 1 FROM queues WHERE leader IS NULL)`, s.micros())
	if err != nil {
		return nil, fmt.Errorf("glance at the nodes: %w", mapErr(err))
	}
	return store.GlanceOf(rows), nil
}

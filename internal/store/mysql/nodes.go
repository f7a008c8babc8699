package mysql

import (
	"context"
	"fmt"

	"github.com/rowq/rowq/internal/store"
)

// NodeHeartbeat registers the node or extends its registration to
// NOW(6) + TTL; started_at keeps the first registration's time.
func (s *Store) NodeHeartbeat(ctx context.Context, p *store.NodeHeartbeatParams) error {
	ttl := p.TTL.Microseconds()
	err := retry(ctx, func() error {
		_, err := s.db.ExecContext(ctx, `/* rowq:nodes.heartbeat */
			INSERT INTO nodes (id, host, started_at, expires_at)
			VALUES (?, ?, NOW(6), NOW(6) + INTERVAL ? MICROSECOND)
			ON DUPLICATE KEY UPDATE host = ?, expires_at = NOW(6) + INTERVAL ? MICROSECOND`,
			p.ID, p.Host, ttl, p.Host, ttl)
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

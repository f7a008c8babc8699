package sqlite

import (
	"context"
	"fmt"

	"github.com/rowq/rowq/internal/store"
)

// NodeHeartbeat registers the node or extends its registration.
func (s *Store) NodeHeartbeat(ctx context.Context, p *store.NodeHeartbeatParams) error {
	now := s.micros()
	_, err := s.w.ExecContext(ctx, `/* rowq:nodes.heartbeat */
		INSERT INTO nodes (id, host, started_at, expires_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET host = excluded.host, expires_at = excluded.expires_at`,
		p.ID, p.Host, now, now+p.TTL.Microseconds())
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

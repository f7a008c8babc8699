package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/rowq/rowq/internal/store"
)

// NodeHeartbeat registers the node or extends its registration to now + TTL;
// started_at is kept.
func (s *Store) NodeHeartbeat(ctx context.Context, p *store.NodeHeartbeatParams) error {
	_, err := s.exec(ctx, `/* rowq:nodes.heartbeat */
		INSERT INTO nodes (id, host, started_at, expires_at)
		VALUES ($1, $2, now(), now() + make_interval(secs => $3))
		ON CONFLICT (id) DO UPDATE SET host = EXCLUDED.host, expires_at = EXCLUDED.expires_at`,
		p.ID, p.Host, p.TTL.Seconds())
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

func scanNode(row pgx.CollectableRow) (*store.Node, error) {
	var n store.Node
	err := row.Scan(&n.ID, &n.Host, &n.StartedAt, &n.ExpiresAt)
	n.StartedAt, n.ExpiresAt = n.StartedAt.UTC(), n.ExpiresAt.UTC()
	return &n, err
}

package sqlite

import (
	"context"
	"database/sql"
	"fmt"
)

// SecretEnsure stores a secret unless one of that name exists, and returns
// the stored one.
func (s *Store) SecretEnsure(ctx context.Context, name, value string) (string, error) {
	var got string
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `/* rowq:secrets.ensure */
			INSERT INTO secrets (name, value, created_at) VALUES (?, ?, ?) ON CONFLICT (name) DO NOTHING`, name, value, s.micros()); err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, `/* rowq:secrets.ensure */ SELECT value FROM secrets WHERE name = ?`, name).Scan(&got)
	})
	if err != nil {
		return "", fmt.Errorf("ensure secret %q: %w", name, err)
	}
	return got, nil
}

package mysql

import (
	"context"
	"fmt"
)

// SecretEnsure stores a secret unless one of that name exists, and returns
// the stored one. INSERT IGNORE would also hide other errors; the no-op
// update does not.
func (s *Store) SecretEnsure(ctx context.Context, name, value string) (string, error) {
	var got string
	_, err := s.db.ExecContext(ctx, `/* rowq:secrets.ensure */
		INSERT INTO secrets (name, value, created_at) VALUES (?, ?, NOW(6)) ON DUPLICATE KEY UPDATE name = name`, name, value)
	if err == nil {
		err = s.db.QueryRowContext(ctx, `/* rowq:secrets.ensure */ SELECT value FROM secrets WHERE name = ?`, name).Scan(&got)
	}
	if err != nil {
		return "", fmt.Errorf("ensure secret %q: %w", name, mapErr(err))
	}
	return got, nil
}

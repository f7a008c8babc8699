package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// SecretEnsure stores a secret unless one of that name exists, and returns
// the stored one. A statement that lost a race to insert sees no row (its
// snapshot predates the winner's commit); the next one sees the winner's.
func (s *Store) SecretEnsure(ctx context.Context, name, value string) (string, error) {
	var (
		got string
		err error
	)
	for range 3 {
		got, err = queryOne(ctx, s, pgx.RowTo[string], `/* rowq:secrets.ensure */
			WITH ins AS (
				INSERT INTO secrets (name, value, created_at) VALUES ($1, $2, now())
				ON CONFLICT (name) DO NOTHING RETURNING value)
			SELECT value FROM ins UNION ALL SELECT value FROM secrets WHERE name = $1`, name, value)
		if !errors.Is(err, pgx.ErrNoRows) {
			break
		}
	}
	if err != nil {
		return "", fmt.Errorf("ensure secret %q: %w", name, mapErr(err))
	}
	return got, nil
}

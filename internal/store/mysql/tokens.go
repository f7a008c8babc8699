package mysql

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/sqldb"
)

// tokenCols ends with live, judged by the database's clock.
const tokenCols = `name, hash, scopes, queues, created_at, expires_at, last_used_at, revoked_at,
	revoked_at IS NULL AND (expires_at IS NULL OR expires_at > NOW(6)) AS live`

func scanToken(row sqldb.Scanner) (*store.Token, error) {
	var (
		t                     store.Token
		scopes, queues        string
		expires, used, revoke sql.NullTime
	)
	if err := row.Scan(&t.Name, &t.Hash, &scopes, &queues, &t.CreatedAt, &expires, &used, &revoke, &t.Live); err != nil {
		return nil, err
	}
	t.Scopes, t.Queues = store.SplitList(scopes), store.SplitList(queues)
	t.ExpiresAt, t.LastUsedAt, t.RevokedAt = expires.Time, used.Time, revoke.Time
	return &t, nil
}

// getToken reads one token by name.
func (s *Store) getToken(ctx context.Context, name string) (*store.Token, error) {
	return scanToken(s.db.QueryRowContext(ctx, `/* rowq:tokens.get */ SELECT `+tokenCols+` FROM tokens WHERE name = ?`, name))
}

// TokenCreate stores a new token, then reads it back (MySQL has no
// RETURNING).
func (s *Store) TokenCreate(ctx context.Context, p *store.TokenCreateParams) (*store.Token, error) {
	var ttl sql.NullInt64
	if p.TTL != 0 {
		ttl = sql.NullInt64{Int64: p.TTL.Microseconds(), Valid: true}
	}
	_, err := s.db.ExecContext(ctx, `/* rowq:tokens.create */
		INSERT INTO tokens (name, hash, scopes, queues, created_at, expires_at)
		VALUES (?, ?, ?, ?, NOW(6), NOW(6) + INTERVAL ? MICROSECOND)`,
		p.Name, p.Hash, store.JoinList(p.Scopes), store.JoinList(p.Queues), ttl)
	var t *store.Token
	if err == nil {
		t, err = s.getToken(ctx, p.Name)
	}
	if err != nil {
		return nil, fmt.Errorf("create token %q: %w", p.Name, mapErr(err))
	}
	return t, nil
}

// TokenList returns every token by name.
func (s *Store) TokenList(ctx context.Context) ([]*store.Token, error) {
	ts, err := sqldb.QueryAll(ctx, s.db, scanToken, `/* rowq:tokens.list */ SELECT `+tokenCols+` FROM tokens ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", mapErr(err))
	}
	return ts, nil
}

// TokenGet reads one token by hash.
func (s *Store) TokenGet(ctx context.Context, hash string) (*store.Token, error) {
	t, err := scanToken(s.db.QueryRowContext(ctx, `/* rowq:tokens.get_by_hash */ SELECT `+tokenCols+` FROM tokens WHERE hash = ?`, hash))
	if err != nil {
		return nil, fmt.Errorf("get token by hash: %w", mapErr(err))
	}
	return t, nil
}

// TokenRevoke revokes the named token, then reads it back.
func (s *Store) TokenRevoke(ctx context.Context, name string) (*store.Token, error) {
	n, err := sqldb.Affected(s.db.ExecContext(ctx, `/* rowq:tokens.revoke */
		UPDATE tokens SET revoked_at = NOW(6) WHERE name = ? AND revoked_at IS NULL`, name))
	if err == nil && n == 0 {
		err = store.ErrNotFound
	}
	var t *store.Token
	if err == nil {
		t, err = s.getToken(ctx, name)
	}
	if err != nil {
		return nil, fmt.Errorf("revoke token %q: %w", name, mapErr(err))
	}
	return t, nil
}

// TokenTouch sets last_used_at on the named tokens.
func (s *Store) TokenTouch(ctx context.Context, names []string) error {
	if len(names) == 0 {
		return nil
	}
	args := make([]any, len(names))
	for i, n := range names {
		args[i] = n
	}
	err := retry(ctx, func() error {
		_, err := s.db.ExecContext(ctx, `/* rowq:tokens.touch */
			UPDATE tokens SET last_used_at = NOW(6) WHERE name IN (`+sqldb.Placeholders(len(names))+`)`, args...)
		return err
	})
	if err != nil {
		return fmt.Errorf("touch tokens: %w", mapErr(err))
	}
	return nil
}

package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/sqldb"
)

const tokenCols = `name, hash, scopes, queues, created_at, expires_at, last_used_at, revoked_at`

// scanToken scans tokenCols; now decides Live.
func scanToken(row sqldb.Scanner, now int64) (*store.Token, error) {
	var (
		t                     store.Token
		scopes, queues        string
		created               int64
		expires, used, revoke sql.NullInt64
	)
	if err := row.Scan(&t.Name, &t.Hash, &scopes, &queues, &created, &expires, &used, &revoke); err != nil {
		return nil, err
	}
	t.Scopes, t.Queues = store.SplitList(scopes), store.SplitList(queues)
	t.CreatedAt = fromMicros(created)
	if expires.Valid {
		t.ExpiresAt = fromMicros(expires.Int64)
	}
	if used.Valid {
		t.LastUsedAt = fromMicros(used.Int64)
	}
	if revoke.Valid {
		t.RevokedAt = fromMicros(revoke.Int64)
	}
	t.Live = !revoke.Valid && (!expires.Valid || expires.Int64 > now)
	return &t, nil
}

// TokenCreate stores a new token.
func (s *Store) TokenCreate(ctx context.Context, p *store.TokenCreateParams) (*store.Token, error) {
	now := s.micros()
	var expires sql.NullInt64
	if p.TTL != 0 {
		expires = sql.NullInt64{Int64: now + p.TTL.Microseconds(), Valid: true}
	}
	t, err := scanToken(s.w.QueryRowContext(ctx, `/* rowq:tokens.create */
		INSERT INTO tokens (name, hash, scopes, queues, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)
		RETURNING `+tokenCols,
		p.Name, p.Hash, store.JoinList(p.Scopes), store.JoinList(p.Queues), now, expires), now)
	if err != nil {
		return nil, fmt.Errorf("create token %q: %w", p.Name, mapErr(err))
	}
	return t, nil
}

// TokenList returns every token by name.
func (s *Store) TokenList(ctx context.Context) ([]*store.Token, error) {
	now := s.micros()
	ts, err := sqldb.QueryAll(ctx, s.r, func(row sqldb.Scanner) (*store.Token, error) { return scanToken(row, now) },
		`/* rowq:tokens.list */ SELECT `+tokenCols+` FROM tokens ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", mapErr(err))
	}
	return ts, nil
}

// TokenGet reads one token by hash.
func (s *Store) TokenGet(ctx context.Context, hash string) (*store.Token, error) {
	now := s.micros()
	t, err := scanToken(s.r.QueryRowContext(ctx, `/* rowq:tokens.get_by_hash */ SELECT `+tokenCols+` FROM tokens WHERE hash = ?`, hash), now)
	if err != nil {
		return nil, fmt.Errorf("get token by hash: %w", mapErr(err))
	}
	return t, nil
}

// TokenRevoke revokes the named token.
func (s *Store) TokenRevoke(ctx context.Context, name string) (*store.Token, error) {
	now := s.micros()
	t, err := scanToken(s.w.QueryRowContext(ctx, `/* rowq:tokens.revoke */
		UPDATE tokens SET revoked_at = ? WHERE name = ? AND revoked_at IS NULL RETURNING `+tokenCols, now, name), now)
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
	args := []any{s.micros()}
	for _, n := range names {
		args = append(args, n)
	}
	_, err := s.w.ExecContext(ctx, `/* rowq:tokens.touch */
		UPDATE tokens SET last_used_at = ? WHERE name IN (`+sqldb.Placeholders(len(names))+`)`, args...)
	if err != nil {
		return fmt.Errorf("touch tokens: %w", mapErr(err))
	}
	return nil
}

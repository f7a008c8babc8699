package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rowq/rowq/internal/store"
)

// tokenCols ends with live, judged by the database's clock.
const tokenCols = `name, hash, scopes, queues, created_at, expires_at, last_used_at, revoked_at,
	revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now()) AS live`

func scanToken(row pgx.CollectableRow) (*store.Token, error) {
	var (
		t                     store.Token
		scopes, queues        string
		expires, used, revoke *time.Time
	)
	if err := row.Scan(&t.Name, &t.Hash, &scopes, &queues, &t.CreatedAt, &expires, &used, &revoke, &t.Live); err != nil {
		return nil, err
	}
	t.Scopes, t.Queues = store.SplitList(scopes), store.SplitList(queues)
	t.CreatedAt = t.CreatedAt.UTC()
	for _, f := range []struct {
		dst *time.Time
		v   *time.Time
	}{{&t.ExpiresAt, expires}, {&t.LastUsedAt, used}, {&t.RevokedAt, revoke}} {
		if f.v != nil {
			*f.dst = f.v.UTC()
		}
	}
	return &t, nil
}

// TokenCreate stores a new token.
func (s *Store) TokenCreate(ctx context.Context, p *store.TokenCreateParams) (*store.Token, error) {
	t, err := queryOne(ctx, s, scanToken, `/* rowq:tokens.create */
		INSERT INTO tokens (name, hash, scopes, queues, created_at, expires_at)
		VALUES ($1, $2, $3, $4, now(), CASE WHEN $5::bigint = 0 THEN NULL ELSE now() + $5::bigint * interval '1 microsecond' END)
		RETURNING `+tokenCols,
		p.Name, p.Hash, store.JoinList(p.Scopes), store.JoinList(p.Queues), p.TTL.Microseconds())
	if err != nil {
		return nil, fmt.Errorf("create token %q: %w", p.Name, mapErr(err))
	}
	return t, nil
}

// TokenList returns every token by name.
func (s *Store) TokenList(ctx context.Context) ([]*store.Token, error) {
	ts, err := queryAll(ctx, s, scanToken, `/* rowq:tokens.list */ SELECT `+tokenCols+` FROM tokens ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", mapErr(err))
	}
	return ts, nil
}

// TokenGet reads one token by hash.
func (s *Store) TokenGet(ctx context.Context, hash string) (*store.Token, error) {
	t, err := queryOne(ctx, s, scanToken, `/* rowq:tokens.get_by_hash */ SELECT `+tokenCols+` FROM tokens WHERE hash = $1`, hash)
	if err != nil {
		return nil, fmt.Errorf("get token by hash: %w", mapErr(err))
	}
	return t, nil
}

// TokenRevoke revokes the named token.
func (s *Store) TokenRevoke(ctx context.Context, name string) (*store.Token, error) {
	t, err := queryOne(ctx, s, scanToken, `/* rowq:tokens.revoke */
		UPDATE tokens SET revoked_at = now() WHERE name = $1 AND revoked_at IS NULL RETURNING `+tokenCols, name)
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
	if _, err := s.exec(ctx, `/* rowq:tokens.touch */ UPDATE tokens SET last_used_at = now() WHERE name = ANY($1)`, names); err != nil {
		return fmt.Errorf("touch tokens: %w", mapErr(err))
	}
	return nil
}

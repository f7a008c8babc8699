package store

import (
	"context"
	"strings"
	"time"
)

// TokenStore keeps the API tokens. A row holds a token's hash, never the
// token itself (internal/auth makes tokens and says why a hash suffices).
// Revoking keeps the row, so that the names of revoked tokens stay taken
// and the table, once it held a token, is never empty again (auth "auto"
// keeps authentication on).
type TokenStore interface {
	// TokenCreate stores a new token with created_at = now and, when p.TTL
	// is not 0, expires_at = now + p.TTL, by the database's clock; it
	// returns the token as stored, or ErrConflict if the name or the hash
	// is taken.
	TokenCreate(ctx context.Context, p *TokenCreateParams) (*Token, error)
	// TokenList returns every token, revoked and expired ones too, by
	// name; each one's Live is judged by the database's clock at the read.
	TokenList(ctx context.Context) ([]*Token, error)
	// TokenGet returns the token whose hash is hash, revoked and expired
	// too, with Live judged by the database's clock at the read;
	// ErrNotFound if no token has that hash. It reads one index entry:
	// a node looks up a token it does not hold in memory yet.
	TokenGet(ctx context.Context, hash string) (*Token, error)
	// TokenRevoke sets revoked_at = now on the named token unless it is
	// revoked already, and returns it; ErrNotFound if no token has that
	// name or it was revoked before.
	TokenRevoke(ctx context.Context, name string) (*Token, error)
	// TokenTouch sets last_used_at = now on the named tokens; names that
	// match no token are ignored.
	TokenTouch(ctx context.Context, names []string) error
}

// Token is a stored API token.
type Token struct {
	Name string
	// Hash is the hex SHA-256 of the token.
	Hash string
	// Scopes are the token's scopes, such as "read" or "admin".
	Scopes []string
	// Queues are glob patterns of the queues the token is confined to;
	// none means every queue.
	Queues     []string
	CreatedAt  time.Time
	ExpiresAt  time.Time // zero: never
	LastUsedAt time.Time // zero: never used
	RevokedAt  time.Time // zero: not revoked
	// Live is whether the token was neither revoked nor expired when read.
	Live bool
}

// TokenCreateParams are the arguments of TokenStore.TokenCreate.
type TokenCreateParams struct {
	Name   string
	Hash   string // hex SHA-256 of the token
	Scopes []string
	Queues []string
	TTL    time.Duration // 0: never expires; kept to the microsecond
}

// JoinList and SplitList are how the dialects keep a token's scopes and
// queue patterns in one text column: comma-separated (neither scopes nor
// patterns may hold a comma).
func JoinList(xs []string) string { return strings.Join(xs, ",") }

// SplitList undoes JoinList; "" is the empty list.
func SplitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

package storetest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store"
)

// tokenTests are the conformance tests of store.TokenStore.
var tokenTests = []conformanceTest{
	{"Token_CreateList", testTokenCreateList},
	{"Token_NameAndHashUnique", testTokenUnique},
	{"Token_Expiry", testTokenExpiry},
	{"Token_Revoke", testTokenRevoke},
	{"Token_Touch", testTokenTouch},
	{"Token_GetByHash", testTokenGet},
}

func createToken(t *testing.T, s store.Store, name, hash string, ttl time.Duration) *store.Token {
	t.Helper()
	return must(s.TokenCreate(ctxT(t), &store.TokenCreateParams{
		Name: name, Hash: hash, Scopes: []string{"read", "enqueue"}, Queues: []string{"billing-*", "shared"}, TTL: ttl,
	}))(t)
}

// hashOf returns a 64-character hex string made of c.
func hashOf(c byte) string { return string(slices.Repeat([]byte{c}, 64)) }

func testTokenCreateList(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	if list := must(s.TokenList(ctx))(t); len(list) != 0 {
		t.Fatalf("TokenList of an empty store = %+v", list)
	}
	before := must(s.Now(ctx))(t)
	b := createToken(t, s, "b", hashOf('b'), 0)
	if b.Name != "b" || b.Hash != hashOf('b') || !slices.Equal(b.Scopes, []string{"read", "enqueue"}) ||
		!slices.Equal(b.Queues, []string{"billing-*", "shared"}) || !b.Live {
		t.Fatalf("TokenCreate returned %+v", b)
	}
	if !b.ExpiresAt.IsZero() || !b.LastUsedAt.IsZero() || !b.RevokedAt.IsZero() {
		t.Fatalf("new token without TTL has times set: %+v", b)
	}
	if d := b.CreatedAt.Sub(before); d < -time.Millisecond || d > 10*time.Second {
		t.Fatalf("created_at %v is %v after the database's now %v", b.CreatedAt, d, before)
	}
	must(s.TokenCreate(ctx, &store.TokenCreateParams{Name: "a", Hash: hashOf('a'), Scopes: []string{"admin"}}))(t)
	list := must(s.TokenList(ctx))(t)
	if len(list) != 2 || list[0].Name != "a" || list[1].Name != "b" {
		t.Fatalf("TokenList = %+v, want a then b", list)
	}
	if a := list[0]; len(a.Queues) != 0 || !slices.Equal(a.Scopes, []string{"admin"}) || !a.Live {
		t.Fatalf("token without queues listed as %+v", a)
	}
	if got := list[1]; !got.CreatedAt.Equal(b.CreatedAt) || got.Hash != b.Hash {
		t.Fatalf("listed %+v, created %+v", got, b)
	}
}

func testTokenUnique(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	createToken(t, s, "t", hashOf('1'), 0)
	for _, p := range []*store.TokenCreateParams{
		{Name: "t", Hash: hashOf('2'), Scopes: []string{"read"}},
		{Name: "u", Hash: hashOf('1'), Scopes: []string{"read"}},
	} {
		if _, err := s.TokenCreate(ctx, p); !errors.Is(err, store.ErrConflict) {
			t.Errorf("TokenCreate(%s, %s…) err = %v, want ErrConflict", p.Name, p.Hash[:4], err)
		}
	}
	// A revoked token's name stays taken.
	must(s.TokenRevoke(ctx, "t"))(t)
	if _, err := s.TokenCreate(ctx, &store.TokenCreateParams{Name: "t", Hash: hashOf('3'), Scopes: []string{"read"}}); !errors.Is(err, store.ErrConflict) {
		t.Errorf("TokenCreate of a revoked token's name err = %v, want ErrConflict", err)
	}
}

func testTokenExpiry(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	now := must(s.Now(ctx))(t)
	long := createToken(t, s, "long", hashOf('l'), 90*24*time.Hour)
	if d := long.ExpiresAt.Sub(now); d < 90*24*time.Hour-time.Second || d > 90*24*time.Hour+10*time.Second {
		t.Fatalf("expires_at is %v after now, want 90 days", d)
	}
	short := createToken(t, s, "short", hashOf('s'), 300*time.Millisecond)
	if !short.Live {
		t.Fatalf("token with 300ms to live is not live at once: %+v", short)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		list := must(s.TokenList(ctx))(t)
		if !list[0].Live {
			t.Fatalf("long token is not live: %+v", list[0])
		}
		if !list[1].Live {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("short token still live 10s after it expired: %+v", list[1])
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func testTokenRevoke(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	createToken(t, s, "a", hashOf('a'), 0)
	createToken(t, s, "b", hashOf('b'), 0)
	if _, err := s.TokenRevoke(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("TokenRevoke(missing) err = %v, want ErrNotFound", err)
	}
	r := must(s.TokenRevoke(ctx, "a"))(t)
	if r.Live || r.RevokedAt.IsZero() || r.Name != "a" {
		t.Fatalf("TokenRevoke returned %+v", r)
	}
	if _, err := s.TokenRevoke(ctx, "a"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second TokenRevoke err = %v, want ErrNotFound", err)
	}
	list := must(s.TokenList(ctx))(t)
	if len(list) != 2 || list[0].Live || !list[0].RevokedAt.Equal(r.RevokedAt) || !list[1].Live {
		t.Fatalf("TokenList after revoking a = %+v", list)
	}
}

func testTokenTouch(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	createToken(t, s, "a", hashOf('a'), 0)
	createToken(t, s, "b", hashOf('b'), 0)
	createToken(t, s, "c", hashOf('c'), 0)
	ok(t, s.TokenTouch(ctx, nil))
	before := must(s.Now(ctx))(t)
	ok(t, s.TokenTouch(ctx, []string{"a", "c", "missing"}))
	list := must(s.TokenList(ctx))(t)
	for i, want := range []bool{true, false, true} {
		tk := list[i]
		if touched := !tk.LastUsedAt.IsZero(); touched != want {
			t.Errorf("token %s last_used_at = %v, want touched %v", tk.Name, tk.LastUsedAt, want)
		} else if touched && tk.LastUsedAt.Before(before.Add(-time.Millisecond)) {
			t.Errorf("token %s last_used_at %v is before the touch (%v)", tk.Name, tk.LastUsedAt, before)
		}
	}
}

func testTokenGet(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	a := createToken(t, s, "a", hashOf('a'), 0)
	createToken(t, s, "b", hashOf('b'), 0)
	got := must(s.TokenGet(ctx, hashOf('a')))(t)
	if got.Name != "a" || got.Hash != a.Hash || !slices.Equal(got.Scopes, a.Scopes) || !slices.Equal(got.Queues, a.Queues) ||
		!got.CreatedAt.Equal(a.CreatedAt) || !got.Live {
		t.Fatalf("TokenGet(a's hash) = %+v, created %+v", got, a)
	}
	if _, err := s.TokenGet(ctx, hashOf('c')); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("TokenGet(unknown hash) err = %v, want ErrNotFound", err)
	}
	// A revoked token is still found, not live: the caller tells "revoked"
	// from "unknown".
	must(s.TokenRevoke(ctx, "a"))(t)
	if got := must(s.TokenGet(ctx, hashOf('a')))(t); got.Live || got.RevokedAt.IsZero() {
		t.Fatalf("TokenGet of a revoked token = %+v, want it not live", got)
	}
	if got := must(s.TokenGet(ctx, hashOf('b')))(t); got.Name != "b" || !got.Live {
		t.Fatalf("TokenGet(b's hash) = %+v", got)
	}
}

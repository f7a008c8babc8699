package auth_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/auth"
	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
)

func TestNewToken_FormatAndHash(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		tok, hash := auth.NewToken()
		if !regexp.MustCompile(`^rowq_[a-z2-7]{52}$`).MatchString(tok) {
			t.Fatalf("token %q: want rowq_ and 52 base32 characters (256 bits)", tok)
		}
		if hash != auth.Hash(tok) || len(hash) != 64 || strings.Contains(hash, tok) {
			t.Fatalf("hash %q of %q", hash, tok)
		}
		if seen[tok] {
			t.Fatalf("token %q made twice", tok)
		}
		seen[tok] = true
	}
}

func TestParseScopes(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []auth.Scope
		err  string
	}{
		{in: "read", want: []auth.Scope{auth.Read}},
		{in: "read, enqueue,read", want: []auth.Scope{auth.Read, auth.Enqueue}},
		{in: "locks,admin", want: []auth.Scope{auth.Locks, auth.Admin}},
		{in: "", err: `scope: want read,enqueue,locks,work,admin, got ""`},
		{in: "read,write", err: `got "write"`},
		{in: "node", err: `got "node"`},
	} {
		got, err := auth.ParseScopes(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseScopes(%q) err = %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("ParseScopes(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestParsePatterns(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		err  string
	}{
		{in: "", want: nil},
		{in: "billing-*", want: []string{"billing-*"}},
		{in: "a-?, b[0-9]*,a-?", want: []string{"a-?", "b[0-9]*"}},
		{in: "a,,b", err: "empty pattern"},
		{in: "a/b", err: "globs"},
		{in: "a b", err: "globs"},
		{in: "[a-", err: "syntax error in pattern"},
		{in: strings.Repeat("x", 129), err: "at most 128"},
		{in: strings.Repeat("x,", 32) + "y", want: []string{"x", "y"}},
		{in: manyPatterns(33), err: "at most 32 patterns, got 33"},
	} {
		got, err := auth.ParsePatterns(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParsePatterns(%q) err = %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("ParsePatterns(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

// manyPatterns returns "q0,q1,…" with n patterns.
func manyPatterns(n int) string {
	ps := make([]string, n)
	for i := range ps {
		ps[i] = "q" + strconv.Itoa(i)
	}
	return strings.Join(ps, ",")
}

func TestGrant_ScopesAndQueues(t *testing.T) {
	g := auth.NewGrant("t", []auth.Scope{auth.Read, auth.Enqueue}, []string{"billing-*", "shared"})
	for _, tc := range []struct {
		scopes []auth.Scope
		want   bool
	}{
		{[]auth.Scope{auth.Read}, true},
		{[]auth.Scope{auth.Enqueue}, true},
		{[]auth.Scope{auth.Locks}, false},
		{[]auth.Scope{auth.Read, auth.Locks}, true},
		{[]auth.Scope{auth.Admin}, false},
		{[]auth.Scope{auth.Node}, false},
	} {
		if got := g.Has(tc.scopes...); got != tc.want {
			t.Errorf("Has(%v) = %v, want %v", tc.scopes, got, tc.want)
		}
	}
	if err := g.Need(auth.Locks, auth.Admin); err == nil || err.Error() != `token "t" lacks scope locks or admin (it has read,enqueue)` {
		t.Errorf("Need(locks, admin) = %v", err)
	}
	for q, want := range map[string]bool{"billing-eu": true, "billing-": true, "shared": true, "shared2": false, "billing": false, "acme-billing-x": false} {
		if got := g.Queue(q); got != want {
			t.Errorf("Queue(%q) = %v, want %v", q, got, want)
		}
	}
	if !g.Confined() {
		t.Error("a grant with patterns is not confined")
	}
	admin := auth.NewGrant("a", []auth.Scope{auth.Admin}, nil)
	if !admin.Has(auth.Read) || !admin.Has(auth.Node) || admin.Confined() || !admin.Queue("anything") {
		t.Error("an unconfined admin grant must hold every scope and queue")
	}
	var none *auth.Grant
	if none.Has(auth.Read) || none.Queue("q") || !none.Confined() || none.Need(auth.Read) == nil {
		t.Error("a nil grant must be allowed nothing")
	}
}

func TestTokenFrom(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(r *http.Request)
		want string
	}{
		{"none", func(*http.Request) {}, ""},
		{"bearer", func(r *http.Request) { r.Header.Set("Authorization", "Bearer rowq_x") }, "rowq_x"},
		{"bearer lower case", func(r *http.Request) { r.Header.Set("Authorization", "bearer  rowq_x ") }, "rowq_x"},
		{"basic password", func(r *http.Request) { r.SetBasicAuth("anyone", "rowq_y") }, "rowq_y"},
		{"basic user only", func(r *http.Request) { r.SetBasicAuth("rowq_z", "") }, "rowq_z"},
		{"other scheme", func(r *http.Request) { r.Header.Set("Authorization", "Digest x") }, ""},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		tc.set(r)
		if got := auth.TokenFrom(r); got != tc.want {
			t.Errorf("%s: TokenFrom = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// newVerifier starts a verifier reading st every 50 ms.
func newVerifier(t *testing.T, st auth.Tokens, cfg auth.Config) *auth.Verifier {
	t.Helper()
	cfg.Tokens = st
	if cfg.Interval == 0 {
		cfg.Interval = 50 * time.Millisecond
	}
	v := auth.New(cfg)
	if err := v.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Stop(context.Background()) })
	return v
}

func create(t *testing.T, st store.Store, name string, scopes []string, ttl time.Duration) string {
	t.Helper()
	tok, hash := auth.NewToken()
	if _, err := st.TokenCreate(t.Context(), &store.TokenCreateParams{Name: name, Hash: hash, Scopes: scopes, TTL: ttl}); err != nil {
		t.Fatal(err)
	}
	return tok
}

// eventually polls cond every 10 ms for up to 5 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 5s", what)
		}
	}
}

func TestVerifier_AutoRevokeExpireTouch(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		st := dbtest.Open(t, dialect)
		v := newVerifier(t, st, auth.Config{TouchEvery: time.Millisecond})
		ctx := t.Context()
		if on, err := v.Enabled(ctx); err != nil || on {
			t.Fatalf("auto with no token row: Enabled = %v, %v; want off", on, err)
		}
		tok := create(t, st, "ci", []string{"read", "enqueue"}, 0)
		short := create(t, st, "short", []string{"admin"}, 400*time.Millisecond)
		create(t, st, "idle", []string{"read"}, 0)
		eventually(t, "auto turns on once a token row exists", func() bool { on, _ := v.Enabled(ctx); return on })
		g, err := v.Check(ctx, tok)
		if err != nil || g.Name != "ci" || !g.Has(auth.Enqueue) || g.Has(auth.Admin) {
			t.Fatalf("Check(ci) = %+v, %v", g, err)
		}
		if _, err := v.Check(ctx, tok+"x"); !errors.Is(err, auth.ErrBadToken) {
			t.Fatalf("Check(unknown) err = %v, want ErrBadToken", err)
		}
		if _, err := v.Check(ctx, ""); !errors.Is(err, auth.ErrNoToken) {
			t.Fatalf("Check(\"\") err = %v, want ErrNoToken", err)
		}
		eventually(t, "an expired token stops working", func() bool { _, err := v.Check(ctx, short); return errors.Is(err, auth.ErrBadToken) })
		eventually(t, "a used token's last use is written", func() bool {
			ts, err := st.TokenList(ctx)
			return err == nil && ts[0].Name == "ci" && !ts[0].LastUsedAt.IsZero() && ts[1].Name == "idle" && ts[1].LastUsedAt.IsZero()
		})
		if _, err := st.TokenRevoke(ctx, "ci"); err != nil {
			t.Fatal(err)
		}
		eventually(t, "a revoked token stops working", func() bool { _, err := v.Check(ctx, tok); return errors.Is(err, auth.ErrBadToken) })
		// Every token revoked or expired: auto stays on.
		if on, err := v.Enabled(ctx); err != nil || !on {
			t.Fatalf("auto after revoking every token: Enabled = %v, %v; want on", on, err)
		}
	})
}

func TestVerifier_AdminAndNodeKeys(t *testing.T) {
	st := dbtest.Open(t, "sqlite")
	admin := strings.Repeat("a", 40)
	v := newVerifier(t, st, auth.Config{AdminToken: admin, NodeKey: "node-key"})
	ctx := t.Context()
	if on, err := v.Enabled(ctx); err != nil || !on {
		t.Fatalf("auto with an admin token: Enabled = %v, %v; want on", on, err)
	}
	g, err := v.Check(ctx, admin)
	if err != nil || !g.Has(auth.Admin) || g.Confined() || strings.Contains(g.Name, admin) {
		t.Fatalf("Check(admin token) = %+v, %v", g, err)
	}
	g, err = v.Check(ctx, "node-key")
	if err != nil || !g.Has(auth.Node) || g.Has(auth.Read) {
		t.Fatalf("Check(node key) = %+v, %v; want only scope node", g, err)
	}
	if _, err := v.Check(ctx, admin[:39]); !errors.Is(err, auth.ErrBadToken) {
		t.Fatalf("Check(admin token less a character) err = %v", err)
	}
	if err := auth.CheckAdminSecret(admin[:31]); err == nil {
		t.Fatal("CheckAdminSecret accepted 31 characters")
	}
}

func TestVerifier_ModesAndUnavailable(t *testing.T) {
	st := dbtest.Open(t, "sqlite")
	ctx := t.Context()
	create(t, st, "t", []string{"read"}, 0)
	off := newVerifier(t, st, auth.Config{Mode: auth.ModeOff})
	r := httptest.NewRequest("GET", "/", nil)
	if g, err := off.Authenticate(r); err != nil || g != auth.Unrestricted {
		t.Fatalf("off: Authenticate without a token = %v, %v; want Unrestricted", g, err)
	}
	on := newVerifier(t, dbtest.Open(t, "sqlite"), auth.Config{Mode: auth.ModeOn})
	if _, err := on.Authenticate(r); !errors.Is(err, auth.ErrNoToken) {
		t.Fatalf("on with no token row: Authenticate err = %v, want ErrNoToken", err)
	}
	// The database goes away: once the tokens in memory are too old, a
	// check fails with ErrUnavailable rather than trusting them.
	broken := dbtest.Open(t, "sqlite")
	tok := create(t, broken, "t", []string{"read"}, 0)
	v := newVerifier(t, broken, auth.Config{})
	eventually(t, "the token is read", func() bool { _, err := v.Check(ctx, tok); return err == nil })
	broken.Close()
	eventually(t, "a check fails once the tokens cannot be read", func() bool {
		_, err := v.Check(ctx, tok)
		return errors.Is(err, store.ErrUnavailable)
	})
}

// countingTokens counts the reads of a real store's tokens: reads of
// every token, and lookups of one.
type countingTokens struct {
	store.Store
	reads, lookups atomic.Int64
}

func (c *countingTokens) TokenList(ctx context.Context) ([]*store.Token, error) {
	c.reads.Add(1)
	return c.Store.TokenList(ctx)
}

func (c *countingTokens) TokenGet(ctx context.Context, hash string) (*store.Token, error) {
	c.lookups.Add(1)
	return c.Store.TokenGet(ctx, hash)
}

// A token made after the verifier read the tokens works on its first
// check, long before the next read (an hour away here): it is looked up.
// The lookup reads every token again, so its next checks cost none.
func TestVerifier_NewTokenWorksAtOnce(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		st := &countingTokens{Store: dbtest.Open(t, dialect)}
		ctx := t.Context()
		old := create(t, st, "old", []string{"read"}, 0)
		v := newVerifier(t, st, auth.Config{Interval: time.Hour})
		if _, err := v.Check(ctx, old); err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			tok := create(t, st, "new"+strconv.Itoa(i), []string{"enqueue"}, 0)
			g, err := v.Check(ctx, tok)
			if err != nil || g.Name != "new"+strconv.Itoa(i) || !g.Has(auth.Enqueue) || g.Has(auth.Read) {
				t.Fatalf("first check of a token made after the last read = %+v, %v; want its grant", g, err)
			}
			lookups := st.lookups.Load()
			for range 10 {
				if _, err := v.Check(ctx, tok); err != nil {
					t.Fatalf("check again: %v", err)
				}
			}
			if n := st.lookups.Load() - lookups; n != 0 {
				t.Fatalf("checks after the first looked the token up %d times, want 0 (it is in memory)", n)
			}
		}
		// A revoked token found by a lookup is refused, and not looked up
		// again for a while.
		tok := create(t, st, "gone", []string{"read"}, 0)
		if _, err := st.TokenRevoke(ctx, "gone"); err != nil {
			t.Fatal(err)
		}
		lookups := st.lookups.Load()
		for range 5 {
			if _, err := v.Check(ctx, tok); !errors.Is(err, auth.ErrBadToken) {
				t.Fatalf("check of a token revoked before any read: err = %v, want ErrBadToken", err)
			}
		}
		if n := st.lookups.Load() - lookups; n != 1 {
			t.Fatalf("5 checks of a revoked token looked it up %d times, want 1", n)
		}
	})
}

// A flood of unknown well-formed tokens reaches the database at most
// Lookups times a second (with a burst of as many), and tokens that are not
// well-formed never; the tokens in memory keep working meanwhile.
func TestVerifier_UnknownTokensBounded(t *testing.T) {
	st := &countingTokens{Store: dbtest.Open(t, "sqlite")}
	ctx := t.Context()
	known := create(t, st, "known", []string{"read"}, 0)
	const perSecond = 5
	v := newVerifier(t, st, auth.Config{Interval: time.Hour, Lookups: perSecond})
	if _, err := v.Check(ctx, known); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"x", "rowq_", "rowq_" + strings.Repeat("a", 51), "rowq_" + strings.Repeat("A", 52), strings.Repeat("a", 57)} {
		if _, err := v.Check(ctx, bad); !errors.Is(err, auth.ErrBadToken) {
			t.Fatalf("Check(%q) err = %v, want ErrBadToken", bad, err)
		}
	}
	if n := st.lookups.Load(); n != 0 {
		t.Fatalf("tokens that are not well-formed were looked up %d times, want 0", n)
	}

	const guessers, each = 32, 40
	began := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, guessers)
	for range guessers {
		wg.Go(func() {
			for range each {
				guess, _ := auth.NewToken()
				if _, err := v.Check(ctx, guess); !errors.Is(err, auth.ErrBadToken) {
					errs <- fmt.Errorf("Check(a guess) err = %v, want ErrBadToken", err)
					return
				}
				if _, err := v.Check(ctx, known); err != nil {
					errs <- fmt.Errorf("Check(a known token) during the flood: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(began)
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// The bucket holds perSecond lookups and gains perSecond a second.
	bound := int64(perSecond + perSecond*took.Seconds())
	n := st.lookups.Load()
	t.Logf("%d guesses in %v: %d lookups (bound %d)", guessers*each, took.Round(time.Millisecond), n, bound)
	if n < perSecond || n > bound {
		t.Fatalf("%d guesses in %v made %d lookups, want %d..%d", guessers*each, took, n, perSecond, bound)
	}
}

// An idle node reads no tokens; the request that ends its idleness reads
// them first, so it sees a token revoked meanwhile.
func TestVerifier_IdleReadsNothing(t *testing.T) {
	st := &countingTokens{Store: dbtest.Open(t, "sqlite")}
	ctx := t.Context()
	tok := create(t, st, "t", []string{"read"}, 0)
	v := newVerifier(t, st, auth.Config{})
	if _, err := v.Check(ctx, tok); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // the read the check asked for
	before := st.reads.Load()
	time.Sleep(500 * time.Millisecond) // ten intervals without a request
	if n := st.reads.Load() - before; n != 0 {
		t.Fatalf("an idle verifier read the tokens %d times in 10 intervals, want 0", n)
	}
	if _, err := st.TokenRevoke(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Check(ctx, tok); !errors.Is(err, auth.ErrBadToken) {
		t.Fatalf("first check after idleness, of a token revoked meanwhile: err = %v, want ErrBadToken", err)
	}
	if n := st.reads.Load() - before; n != 1 {
		t.Fatalf("first check after idleness read the tokens %d times, want 1", n)
	}
}

// BenchmarkAuthenticate is the cost authentication adds to a request
// (go test -bench Authenticate ./internal/auth).
func BenchmarkAuthenticate(b *testing.B) {
	st := dbtest.Open(b, "sqlite")
	tok, hash := auth.NewToken()
	if _, err := st.TokenCreate(b.Context(), &store.TokenCreateParams{Name: "b", Hash: hash, Scopes: []string{"enqueue"}}); err != nil {
		b.Fatal(err)
	}
	for i := range 1000 { // a table with many tenants
		_, h := auth.NewToken()
		if _, err := st.TokenCreate(b.Context(), &store.TokenCreateParams{Name: "t" + strconv.Itoa(i), Hash: h, Scopes: []string{"read"}}); err != nil {
			b.Fatal(err)
		}
	}
	v := auth.New(auth.Config{Tokens: st})
	if err := v.Start(b.Context()); err != nil {
		b.Fatal(err)
	}
	defer v.Stop(context.Background())
	r := httptest.NewRequest("POST", "/job/c", nil)
	r.Header.Set("Authorization", "Bearer "+tok)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if g, err := v.Authenticate(r); err != nil || !g.Has(auth.Enqueue) {
				b.Fatal(g, err)
			}
		}
	})
}

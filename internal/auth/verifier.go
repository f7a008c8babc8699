package auth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rowq/rowq/internal/store"
)

// Modes of authentication (--auth).
const (
	// ModeAuto is on as soon as a token row exists or an admin token is
	// set, off before.
	ModeAuto = "auto"
	ModeOn   = "on"
	ModeOff  = "off"
)

// Errors of Check and Authenticate.
var (
	// ErrNoToken means the request carries no token.
	ErrNoToken = errors.New("authentication required: send Authorization: Bearer TOKEN, or HTTP Basic with the token as the password")
	// ErrBadToken means the token is unknown, revoked or expired.
	ErrBadToken = errors.New("unknown, revoked or expired token")
)

// Tokens is what the Verifier reads and writes (store.Store does).
type Tokens interface {
	TokenList(ctx context.Context) ([]*store.Token, error)
	TokenGet(ctx context.Context, hash string) (*store.Token, error)
	TokenTouch(ctx context.Context, names []string) error
}

// Config configures a Verifier.
type Config struct {
	Tokens Tokens
	Logger *slog.Logger
	// Mode is ModeAuto (the default), ModeOn or ModeOff.
	Mode string
	// AdminToken, when set, is accepted as a token with every scope; it
	// has no row.
	AdminToken string
	// NodeKey, when set, is accepted as a token of scope Node.
	NodeKey string
	// Interval is how often the tokens are read again (1 s): a revoked
	// token stops working within about that.
	Interval time.Duration
	// TouchEvery bounds how often a token's last use is written (1 min).
	TouchEvery time.Duration
	// Lookups bounds how many tokens a second (10) that are not in memory
	// are looked up in the database one by one, so that a token made a
	// moment ago works at once while guesses cannot flood the database:
	// docs/security.md, *A new token works at once*.
	Lookups int
}

// Verifier verifies tokens against the database's, held in memory. It is
// safe for concurrent use.
type Verifier struct {
	cfg       Config
	log       *slog.Logger
	adminHash [sha256.Size]byte
	nodeHash  [sha256.Size]byte
	admin     *Grant
	node      *Grant

	snap atomic.Pointer[snapshot]
	// asked is set when a request looks at the tokens: the background
	// read keeps them fresh only for a node that serves requests, and an
	// idle node reads nothing.
	asked atomic.Bool
	// loading is held by whoever reads the tokens, so that requests that
	// find them stale wait for one read instead of each making their own.
	loading chan struct{}
	lookups *lookups

	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
	started  bool
}

// snapshot is the tokens as one read found them.
type snapshot struct {
	read   time.Time // when the read began
	any    bool      // a token row exists, live or not
	byHash map[[sha256.Size]byte]*entry
}

type entry struct {
	grant *Grant
	used  atomic.Bool // since the last touch
}

// New returns a Verifier; Start begins reading the tokens.
func New(cfg Config) *Verifier {
	if cfg.Mode == "" {
		cfg.Mode = ModeAuto
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.TouchEvery <= 0 {
		cfg.TouchEvery = time.Minute
	}
	if cfg.Lookups <= 0 {
		cfg.Lookups = 10
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	v := &Verifier{
		cfg: cfg, log: cfg.Logger, loading: make(chan struct{}, 1), lookups: newLookups(cfg.Lookups),
		stop: make(chan struct{}), done: make(chan struct{}),
		admin: NewGrant("(admin token)", []Scope{Admin}, nil),
		node:  NewGrant("(node)", []Scope{Node}, nil),
	}
	v.adminHash = sha256.Sum256([]byte(cfg.AdminToken))
	v.nodeHash = sha256.Sum256([]byte(cfg.NodeKey))
	return v
}

// maxAge is how old the tokens in memory may be before a request reads
// them itself: the background read is late (a slow database).
func (v *Verifier) maxAge() time.Duration { return v.cfg.Interval + v.cfg.Interval/2 }

// Start reads the tokens (a failed read is retried: requests that need
// them answer 503 until one succeeds) and keeps reading them every
// Interval while requests look at them. With ModeOff it does nothing.
func (v *Verifier) Start(ctx context.Context) error {
	if v.cfg.Mode == ModeOff {
		return nil
	}
	if _, err := v.load(ctx); err != nil {
		v.log.Warn("read the API tokens; retrying", "err", err)
	}
	v.started = true
	go v.run()
	return nil
}

// Stop ends the background reads. It is idempotent.
func (v *Verifier) Stop(context.Context) error {
	v.stopOnce.Do(func() {
		close(v.stop)
		if v.started {
			<-v.done
		}
	})
	return nil
}

func (v *Verifier) run() {
	defer close(v.done)
	t := time.NewTicker(v.cfg.Interval)
	defer t.Stop()
	touched := map[string]time.Time{} // when this node last wrote each token's last use
	failing := false
	for {
		select {
		case <-v.stop:
			return
		case <-t.C:
		}
		if !v.asked.Swap(false) {
			continue // nobody looked since the last read: the next who does reads first
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*v.cfg.Interval)
		v.touch(ctx, touched)
		_, err := v.load(ctx)
		cancel()
		switch {
		case err != nil && !failing:
			v.log.Warn("read the API tokens; requests that need a token get 503 until the database answers", "err", err)
		case err == nil && failing:
			v.log.Info("read the API tokens again")
		}
		failing = err != nil
	}
}

// touch writes the last use of the tokens used since the last touch,
// each at most once per TouchEvery.
func (v *Verifier) touch(ctx context.Context, touched map[string]time.Time) {
	s := v.snap.Load()
	if s == nil {
		return
	}
	now := time.Now()
	var names []string
	for _, e := range s.byHash {
		if e.used.Load() && e.used.Swap(false) && now.Sub(touched[e.grant.Name]) >= v.cfg.TouchEvery {
			names = append(names, e.grant.Name)
			touched[e.grant.Name] = now
		}
	}
	if err := v.cfg.Tokens.TokenTouch(ctx, names); err != nil {
		v.log.Debug("write the tokens' last use", "err", err)
	}
}

// load reads the tokens unless a read that began after the caller asked
// has already done so, and returns the fresh snapshot.
func (v *Verifier) load(ctx context.Context) (*snapshot, error) {
	asked := time.Now()
	select {
	case v.loading <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: read the API tokens: %w", store.ErrUnavailable, ctx.Err())
	}
	defer func() { <-v.loading }()
	if s := v.snap.Load(); s != nil && !s.read.Before(asked) {
		return s, nil
	}
	began := time.Now()
	ts, err := v.cfg.Tokens.TokenList(ctx)
	if err != nil {
		if !errors.Is(err, store.ErrUnavailable) {
			err = fmt.Errorf("%w: %w", store.ErrUnavailable, err)
		}
		return nil, fmt.Errorf("read the API tokens: %w", err)
	}
	s := &snapshot{read: began, any: len(ts) > 0, byHash: make(map[[sha256.Size]byte]*entry, len(ts))}
	old := v.snap.Load()
	for _, t := range ts {
		key, ok := hashKey(t.Hash)
		if !t.Live || !ok {
			continue
		}
		e := &entry{grant: NewGrant(t.Name, knownScopes(t.Scopes), t.Queues)}
		if old != nil && old.byHash[key] != nil {
			e.used.Store(old.byHash[key].used.Load()) // a use not touched yet
		}
		s.byHash[key] = e
	}
	v.snap.Store(s)
	return s, nil
}

// current returns the tokens in memory, or reads them when they are older
// than maxAge.
func (v *Verifier) current(ctx context.Context) (*snapshot, error) {
	if !v.asked.Load() {
		v.asked.Store(true)
	}
	if s := v.snap.Load(); s != nil && time.Since(s.read) < v.maxAge() {
		return s, nil
	}
	return v.load(ctx)
}

func hashKey(h string) (key [sha256.Size]byte, ok bool) {
	if len(h) != 2*sha256.Size {
		return key, false
	}
	_, err := hex.Decode(key[:], []byte(h))
	return key, err == nil
}

// knownScopes keeps the scopes this version knows (a newer one may have
// written others).
func knownScopes(ss []string) []Scope {
	var out []Scope
	for _, s := range ss {
		for _, k := range Scopes {
			if Scope(s) == k {
				out = append(out, k)
			}
		}
	}
	return out
}

// Enabled reports whether requests need a token: the mode, and in auto
// mode whether a token row exists or an admin token is set.
func (v *Verifier) Enabled(ctx context.Context) (bool, error) {
	switch {
	case v.cfg.Mode == ModeOn:
		return true, nil
	case v.cfg.Mode == ModeOff:
		return false, nil
	case v.cfg.AdminToken != "":
		return true, nil
	}
	s, err := v.current(ctx)
	if err != nil {
		return false, err
	}
	return s.any, nil
}

// Check verifies a token and returns its grant: ErrBadToken if it is not
// a live token, an error wrapping store.ErrUnavailable if the tokens could
// not be read. It does not look at the mode: a dashboard's login checks
// a token with it whether or not the API needs one.
func (v *Verifier) Check(ctx context.Context, token string) (*Grant, error) {
	if token == "" {
		return nil, ErrNoToken
	}
	return v.check(ctx, sha256.Sum256([]byte(token)), wellFormed(token))
}

// CheckHash is Check of the token whose SHA-256 is h: a dashboard session
// names its token so, and is checked again on every request (a revoked
// token ends its sessions with it). The session is signed with the key the
// nodes share, so h is a token's that some node verified: it may be looked
// up.
func (v *Verifier) CheckHash(ctx context.Context, h [sha256.Size]byte) (*Grant, error) {
	return v.check(ctx, h, true)
}

// check is Check and CheckHash; lookup says whether a token not in memory
// may be looked up in the database.
func (v *Verifier) check(ctx context.Context, h [sha256.Size]byte, lookup bool) (*Grant, error) {
	// The secrets of the environment are compared in constant time. A
	// database token is found by its hash: a lookup's timing tells at
	// most how much of the hash of the caller's own guess matches a
	// stored hash, which says nothing of any token.
	if v.cfg.AdminToken != "" && subtle.ConstantTimeCompare(h[:], v.adminHash[:]) == 1 {
		return v.admin, nil
	}
	if v.cfg.NodeKey != "" && subtle.ConstantTimeCompare(h[:], v.nodeHash[:]) == 1 {
		return v.node, nil
	}
	s, err := v.current(ctx)
	if err != nil {
		return nil, err
	}
	e := s.byHash[h]
	if e == nil {
		if !lookup {
			return nil, ErrBadToken
		}
		return v.lookup(ctx, h)
	}
	if !e.used.Load() {
		e.used.Store(true)
	}
	return e.grant, nil
}

// lookup looks up a token that the tokens in memory lack, which may have
// been made since they were read: at most Lookups a second per node, and
// not again for unknownFor once a lookup found it unknown or not live.
// Beyond that a token is refused until the next read of every token has
// it (within about Interval), as it was before lookups.
func (v *Verifier) lookup(ctx context.Context, h [sha256.Size]byte) (*Grant, error) {
	ok, dry := v.lookups.take(h, time.Now())
	if dry {
		v.log.Warn("unknown API tokens arrive faster than the database is asked about them: refused without a lookup until the next read of the tokens",
			"lookups_per_second", v.cfg.Lookups)
	}
	if !ok {
		return nil, ErrBadToken
	}
	t, err := v.cfg.Tokens.TokenGet(ctx, hex.EncodeToString(h[:]))
	switch {
	case errors.Is(err, store.ErrNotFound) || err == nil && !t.Live:
		v.lookups.refuse(h, time.Now())
		return nil, ErrBadToken
	case err != nil:
		if !errors.Is(err, store.ErrUnavailable) {
			err = fmt.Errorf("%w: %w", store.ErrUnavailable, err)
		}
		return nil, fmt.Errorf("look up an API token: %w", err)
	}
	// Read every token again, so that this one's next requests find it in
	// memory instead of spending lookups. The read began after the lookup
	// found the token, so it lacks it only if it was revoked or expired
	// meanwhile; if the read fails, the lookup's answer is as fresh.
	s, err := v.load(ctx)
	if err != nil {
		return NewGrant(t.Name, knownScopes(t.Scopes), t.Queues), nil
	}
	e := s.byHash[h]
	if e == nil {
		return nil, ErrBadToken
	}
	e.used.Store(true)
	return e.grant, nil
}

// Authenticate returns the grant of a request: Unrestricted while
// authentication is off, else the grant of the token it carries
// (TokenFrom), or ErrNoToken, ErrBadToken or an error wrapping
// store.ErrUnavailable.
func (v *Verifier) Authenticate(r *http.Request) (*Grant, error) {
	on, err := v.Enabled(r.Context())
	if err != nil {
		return nil, err
	}
	if !on {
		return Unrestricted, nil
	}
	return v.Check(r.Context(), TokenFrom(r))
}

// TokenFrom returns the token a request carries: Authorization: Bearer
// TOKEN, or HTTP Basic with the token as the password (or as the user name
// when the password is empty, as `curl -u TOKEN:` sends it); "" if none.
func TokenFrom(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:])
	}
	if user, pass, ok := r.BasicAuth(); ok {
		if pass != "" {
			return pass
		}
		return user
	}
	return ""
}

// Challenge sets the WWW-Authenticate header of a 401 answer.
func Challenge(h http.Header) {
	h.Set("WWW-Authenticate", `Bearer realm="rowq"`)
	h.Add("WWW-Authenticate", `Basic realm="rowq", charset="UTF-8"`)
}

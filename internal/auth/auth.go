// Package auth decides who may use rowq's API. A caller presents a token:
// an API token made by `rowq token create` (kept in the database as its
// SHA-256, so every node agrees), the admin token of the node's
// environment (ROWQ_ADMIN_TOKEN), or the key the nodes of one database
// nudge each other with. A verified token becomes a Grant: its name, its
// scopes and the queue patterns it is confined to.
//
// Tokens are 256 random bits, so a plain SHA-256 is enough to keep them:
// nobody can search 2^256 candidates for one whose hash matches a stolen
// row, and a fast hash lets every request be checked in microseconds. (A
// slow password hash is for secrets people choose.)
//
// The Verifier keeps every token of the database in memory and reads them
// again every second: a request costs no query, and a revoked or expired
// token stops working on every node within about a second. A well-formed
// token not in memory may have been made since the last read: it is looked
// up by its hash before it is refused, at most Config.Lookups a second per
// node, so that a new token works at once and guesses cannot flood the
// database.
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
)

// Scope is what a token may do.
type Scope string

// The scopes a token may be given.
const (
	// Read: every GET of the API, /metrics and the dashboard.
	Read Scope = "read"
	// Enqueue: POST /job/{category} and POST /jobs.
	Enqueue Scope = "enqueue"
	// Locks: the lock endpoints.
	Locks Scope = "locks"
	// Work: what a worker sends about a job it accepted: POST
	// /job/{id}/heartbeat and POST /job/{id}/complete.
	Work Scope = "work"
	// Admin: everything, the other scopes' routes included.
	Admin Scope = "admin"
)

// Node is the scope of the key the nodes of one database nudge each other
// with (POST /queue/{name}/wake). No token can be given it.
const Node Scope = "node"

// Scopes lists the scopes a token may be given, in the order they are
// shown.
var Scopes = []Scope{Read, Enqueue, Locks, Work, Admin}

// TokenPrefix starts every token rowq makes, so that a token is
// recognised in a config file or by a secret scanner.
const TokenPrefix = "rowq_"

// Limits of a token's definition.
const (
	MaxNameLen     = 128
	MaxPatterns    = 32
	MaxPatternLen  = 128
	minAdminSecret = 32 // characters of ROWQ_ADMIN_TOKEN
)

// Grant is what a verified token may do. Its methods are safe on a nil
// Grant, which may do nothing.
type Grant struct {
	// Name names the token in logs and error messages; never the secret.
	Name   string
	scopes []Scope
	queues []string // glob patterns; none: every queue
}

// Unrestricted is the grant of every request while authentication is
// off: every scope, every queue.
var Unrestricted = &Grant{Name: "(auth off)", scopes: []Scope{Admin}}

// NewGrant returns the grant of a token named name with scopes, confined
// to the queues matching patterns (none: every queue).
func NewGrant(name string, scopes []Scope, patterns []string) *Grant {
	return &Grant{Name: name, scopes: slices.Clone(scopes), queues: slices.Clone(patterns)}
}

// Scopes returns the grant's scopes.
func (g *Grant) Scopes() []Scope {
	if g == nil {
		return nil
	}
	return slices.Clone(g.scopes)
}

// Patterns returns the glob patterns of the queues the grant is confined
// to; none means every queue.
func (g *Grant) Patterns() []string {
	if g == nil {
		return nil
	}
	return slices.Clone(g.queues)
}

// Has reports whether the grant holds one of scopes; admin holds them all.
func (g *Grant) Has(scopes ...Scope) bool {
	if g == nil {
		return false
	}
	for _, s := range g.scopes {
		if s == Admin || slices.Contains(scopes, s) {
			return true
		}
	}
	return false
}

// Confined reports whether the grant is confined to some queues.
func (g *Grant) Confined() bool { return g == nil || len(g.queues) > 0 }

// Queue reports whether the grant may use the queue (or lock) name.
func (g *Grant) Queue(name string) bool {
	if g == nil {
		return false
	}
	if len(g.queues) == 0 {
		return true
	}
	for _, p := range g.queues {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}

// Need returns nil if the grant holds one of scopes, else an error that
// names what is missing.
func (g *Grant) Need(scopes ...Scope) error {
	if g.Has(scopes...) {
		return nil
	}
	want := make([]string, len(scopes))
	for i, s := range scopes {
		want[i] = string(s)
	}
	has := "none"
	if g != nil && len(g.scopes) > 0 {
		has = joinScopes(g.scopes)
	}
	return fmt.Errorf("token %q lacks scope %s (it has %s)", g.name(), strings.Join(want, " or "), has)
}

// QueueError returns the error of a grant that may not use the queue
// what names ("queue \"x\"", "category \"c\"'s queue").
func (g *Grant) QueueError(what string) error {
	return fmt.Errorf("token %q may not use %s: it is confined to queues %s", g.name(), what, strings.Join(g.Patterns(), ","))
}

func (g *Grant) name() string {
	if g == nil {
		return ""
	}
	return g.Name
}

func joinScopes(ss []Scope) string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = string(s)
	}
	return strings.Join(out, ",")
}

// NodeKeySecret names the node key among the secrets the nodes of a
// database share (store.SecretStore).
const NodeKeySecret = "node-key"

// NewNodeKey returns a candidate node key: 256 random bits in hex. The
// first node's candidate becomes the key of every node.
func NewNodeKey() string {
	b := make([]byte, 32)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// NewToken returns a new token and its hash: TokenPrefix and 256 random
// bits in lower-case base32 (letters and digits only, so it fits a URL's
// userinfo and a shell word unquoted).
func NewToken() (token, hash string) {
	b := make([]byte, 32)
	rand.Read(b) // never fails (crypto/rand)
	token = TokenPrefix + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b))
	return token, Hash(token)
}

// Hash returns the hex SHA-256 of a token: what the database keeps.
func Hash(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_.:-]+$`)

// CheckName validates a token's name: 1..128 letters, digits and _ . : -
// (as a queue name).
func CheckName(name string) error {
	switch {
	case name == "":
		return errors.New("name: must not be empty")
	case len(name) > MaxNameLen:
		return fmt.Errorf("name: at most %d characters, got %d", MaxNameLen, len(name))
	case !nameRE.MatchString(name):
		return fmt.Errorf("name: %q: use letters, digits and _ . : - only", name)
	}
	return nil
}

// ParseScopes parses a comma-separated list of scopes.
func ParseScopes(s string) ([]Scope, error) {
	var out []Scope
	for _, f := range strings.Split(s, ",") {
		sc := Scope(strings.TrimSpace(f))
		if !slices.Contains(Scopes, sc) {
			return nil, fmt.Errorf("scope: want %s, got %q", joinScopes(Scopes), sc)
		}
		if !slices.Contains(out, sc) {
			out = append(out, sc)
		}
	}
	return out, nil
}

var patternRE = regexp.MustCompile(`^[A-Za-z0-9_.:*?\[\]^!\\-]+$`)

// ParsePatterns parses a comma-separated list of queue globs (as
// path.Match takes them: * any run of characters, ? one, [a-z] a class).
// "" is no list: every queue.
func ParsePatterns(s string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	var out []string
	for _, f := range strings.Split(s, ",") {
		p := strings.TrimSpace(f)
		switch {
		case p == "":
			return nil, fmt.Errorf("queues: empty pattern in %q", s)
		case len(p) > MaxPatternLen:
			return nil, fmt.Errorf("queues: pattern at most %d characters, got %d", MaxPatternLen, len(p))
		case !patternRE.MatchString(p):
			return nil, fmt.Errorf("queues: %q: a queue name with the globs * ? [...]", p)
		}
		if _, err := path.Match(p, ""); err != nil {
			return nil, fmt.Errorf("queues: %q: %v", p, err)
		}
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	if len(out) > MaxPatterns {
		return nil, fmt.Errorf("queues: at most %d patterns, got %d", MaxPatterns, len(out))
	}
	return out, nil
}

// CheckAdminSecret validates an admin token given by the environment: long
// enough to be a secret nobody guesses (its hash is kept nowhere, but a
// short one could be found by trying).
func CheckAdminSecret(s string) error {
	if len(s) < minAdminSecret {
		return fmt.Errorf("at least %d characters, got %d (make one with `openssl rand -hex 32`)", minAdminSecret, len(s))
	}
	return nil
}

type grantKey struct{}

// NewContext returns ctx carrying g.
func NewContext(ctx context.Context, g *Grant) context.Context {
	return context.WithValue(ctx, grantKey{}, g)
}

// FromContext returns the grant ctx carries, or nil (which may do nothing).
func FromContext(ctx context.Context) *Grant {
	g, _ := ctx.Value(grantKey{}).(*Grant)
	return g
}

package auth

import (
	"crypto/sha256"
	"strings"
	"sync"
	"time"
)

// unknownFor is how long a hash that a lookup did not find live is refused
// without another lookup. A token cannot come to exist after a client
// sends it (its 256 bits are drawn at creation), so this delays no new
// token; it keeps one client that repeats a wrong or revoked token from
// spending the lookups that new tokens need. A revoked token that is
// somehow made live again is still found by the next full read.
const unknownFor = time.Minute

// lookups bounds how often a node looks up, one by one, tokens it does not
// hold in memory: a token bucket of rate lookups a second holding at most
// rate, so that in any span of t seconds at most rate × (1 + t) lookups
// reach the database, whatever a guesser sends. It is safe for concurrent
// use.
type lookups struct {
	rate float64

	mu      sync.Mutex
	tokens  float64   // lookups the bucket holds now
	filled  time.Time // when tokens was last topped up
	unknown map[[sha256.Size]byte]time.Time
	warned  time.Time // the last warning that lookups ran out
}

func newLookups(perSecond int) *lookups {
	return &lookups{rate: float64(perSecond), tokens: float64(perSecond), unknown: map[[sha256.Size]byte]time.Time{}}
}

// take reports whether the hash h may be looked up now, and takes a lookup
// from the bucket if so; dry is true when it may not because the bucket is
// empty and no warning was given within the last minute.
func (l *lookups) take(h [sha256.Size]byte, now time.Time) (ok, dry bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if until, seen := l.unknown[h]; seen && now.Before(until) {
		return false, false
	}
	if !l.filled.IsZero() {
		l.tokens = min(l.rate, l.tokens+now.Sub(l.filled).Seconds()*l.rate)
	}
	l.filled = now
	if l.tokens < 1 {
		if now.Sub(l.warned) < time.Minute {
			return false, false
		}
		l.warned = now
		return false, true
	}
	l.tokens--
	return true, false
}

// refuse remembers that a lookup found no live token of hash h. The map
// stays small: at most rate × 61 hashes are looked up within unknownFor
// (a minute), and expired ones go as new ones come.
func (l *lookups) refuse(h [sha256.Size]byte, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, until := range l.unknown {
		if !now.Before(until) {
			delete(l.unknown, k)
		}
	}
	l.unknown[h] = now.Add(unknownFor)
}

// wellFormed reports whether token could be one that NewToken made:
// TokenPrefix and 52 characters of lower-case base32. Anything else is
// refused without a lookup.
func wellFormed(token string) bool {
	rest, ok := strings.CutPrefix(token, TokenPrefix)
	if !ok || len(rest) != 52 {
		return false
	}
	for _, c := range []byte(rest) {
		if !('a' <= c && c <= 'z' || '2' <= c && c <= '7') {
			return false
		}
	}
	return true
}

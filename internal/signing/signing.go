// Package signing signs deliveries as the Standard Webhooks specification
// (https://www.standardwebhooks.com) defines, so that a worker can tell
// rowq's requests from anyone else's with any of the spec's verifiers, and
// verifies such signatures for rowq's echo worker.
//
// A delivery carries webhook-id, webhook-timestamp (Unix seconds) and
// webhook-signature: "v1," and the base64 HMAC-SHA256 of
// "{id}.{timestamp}.{body}", keyed by a secret's decoded bytes, once per
// secret, space-separated, so that secrets can be rotated without a
// moment when a worker refuses rowq.
package signing

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Header names, as the spec writes them.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// Tolerance is how far a delivery's timestamp may be from the verifier's
// clock, either way: the spec's suggestion, which bounds replays.
const Tolerance = 5 * time.Minute

// Secret lengths the spec allows: at least 24 bytes, at most 64.
const (
	minSecret = 24
	maxSecret = 64
)

// ParseSecrets reads comma-separated secrets, each "whsec_" and the
// standard base64 of 24 to 64 random bytes. "" is no secret.
func ParseSecrets(s string) ([][]byte, error) {
	var keys [][]byte
	for i, e := range strings.Split(s, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		b64, ok := strings.CutPrefix(e, "whsec_")
		if !ok {
			return nil, fmt.Errorf("secret %d: want whsec_ followed by base64", i+1)
		}
		key, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			return nil, fmt.Errorf("secret %d: the part after whsec_ is not standard base64: %w", i+1, err)
		}
		if len(key) < minSecret || len(key) > maxSecret {
			return nil, fmt.Errorf("secret %d: want %d to %d bytes once decoded, got %d", i+1, minSecret, maxSecret, len(key))
		}
		keys = append(keys, key)
	}
	return keys, nil
}

// Signer signs deliveries with one or more secrets. A nil *Signer signs
// nothing.
type Signer struct {
	macs []*sync.Pool // per secret: keyed HMAC-SHA256 hashes, reused
}

// NewSigner returns a signer for the keys (ParseSecrets), or nil when
// there are none.
func NewSigner(keys [][]byte) *Signer {
	if len(keys) == 0 {
		return nil
	}
	s := &Signer{}
	for _, k := range keys {
		s.macs = append(s.macs, &sync.Pool{New: func() any { return hmac.New(sha256.New, k) }})
	}
	return s
}

// sigLen is the length of one "v1,<base64 of 32 bytes>".
var sigLen = len("v1,") + base64.StdEncoding.EncodedLen(sha256.Size)

// Sign returns the webhook-signature value of a message: one "v1,"
// signature per secret, space-separated.
func (s *Signer) Sign(id, timestamp string, body []byte) string {
	out := make([]byte, 0, len(s.macs)*(sigLen+1))
	head := signedHead(id, timestamp)
	var sum [sha256.Size]byte
	for i, pool := range s.macs {
		mac := pool.Get().(hash.Hash)
		mac.Write(head)
		mac.Write(body)
		mac.Sum(sum[:0])
		mac.Reset()
		pool.Put(mac)
		if i > 0 {
			out = append(out, ' ')
		}
		out = append(out, "v1,"...)
		out = base64.StdEncoding.AppendEncode(out, sum[:])
	}
	return string(out)
}

// signedHead is what the signed content, "{id}.{timestamp}.{body}", holds
// before the body.
func signedHead(id, timestamp string) []byte {
	b := make([]byte, 0, len(id)+len(timestamp)+2)
	b = append(b, id...)
	b = append(b, '.')
	b = append(b, timestamp...)
	return append(b, '.')
}

// Errors of Verify.
var (
	ErrMissingHeader = errors.New("missing webhook-id, webhook-timestamp or webhook-signature")
	ErrTimestamp     = errors.New("webhook-timestamp is not a Unix time within 5 minutes of now")
	ErrSignature     = errors.New("no webhook-signature matches a secret")
)

// Verify checks a delivery's signature headers (as read by get, e.g.
// http.Header.Get) against body with any of keys, and its timestamp
// against now within Tolerance.
func Verify(keys [][]byte, get func(string) string, body []byte, now time.Time) error {
	id, ts, sigs := get(HeaderID), get(HeaderTimestamp), get(HeaderSignature)
	if id == "" || ts == "" || sigs == "" {
		return ErrMissingHeader
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return ErrTimestamp
	}
	if d := now.Sub(time.Unix(sec, 0)); d > Tolerance || d < -Tolerance {
		return ErrTimestamp
	}
	head := signedHead(id, ts)
	for _, k := range keys {
		mac := hmac.New(sha256.New, k)
		mac.Write(head)
		mac.Write(body)
		want := mac.Sum(nil)
		for sig := range strings.FieldsSeq(sigs) {
			b64, ok := strings.CutPrefix(sig, "v1,")
			if !ok {
				continue // another scheme, such as v1a
			}
			got, err := base64.StdEncoding.DecodeString(b64)
			if err == nil && hmac.Equal(got, want) {
				return nil
			}
		}
	}
	return ErrSignature
}

package web

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"
)

// SessionTTL is how long a dashboard login lasts.
const SessionTTL = 12 * time.Hour

// SessionKeySecret names the key that signs the dashboard's sessions
// among the secrets the nodes of a database share (store.SecretStore).
const SessionKeySecret = "dashboard-session-key"

// sessionCookie names the cookie of a dashboard login.
const sessionCookie = "rowq_session"

// session is what a login's cookie holds, signed with the key the nodes
// share: the token it was made with, by name and hash, never the token
// itself. Every request checks the token again (Verifier.CheckHash), so a
// revoked or expired token ends its sessions.
type session struct {
	Name    string `json:"n"` // the token's name, shown on the pages
	Hash    string `json:"h"` // hex SHA-256 of the token
	Expires int64  `json:"e"` // Unix seconds
	CSRF    string `json:"c"` // the token of the session's forms
}

var errBadSession = errors.New("no valid dashboard session")

// seal returns the cookie value of s: the JSON of s and its HMAC-SHA256
// under key, each in base64url, joined by a dot.
func seal(key []byte, s *session) string {
	b, _ := json.Marshal(s) // of strings and a number: never fails
	payload := base64.RawURLEncoding.EncodeToString(b)
	return payload + "." + base64.RawURLEncoding.EncodeToString(sign(key, payload))
}

func sign(key []byte, payload string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("rowq dashboard session v1\n"))
	m.Write([]byte(payload))
	return m.Sum(nil)
}

// unseal returns the session of a cookie value if its signature is key's
// and it has not expired at now.
func unseal(key []byte, value string, now time.Time) (*session, error) {
	payload, mac, ok := strings.Cut(value, ".")
	if !ok {
		return nil, errBadSession
	}
	got, err := base64.RawURLEncoding.DecodeString(mac)
	if err != nil || !hmac.Equal(got, sign(key, payload)) {
		return nil, errBadSession
	}
	b, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		return nil, errBadSession
	}
	var s session
	if err := json.Unmarshal(b, &s); err != nil || s.CSRF == "" || !now.Before(time.Unix(s.Expires, 0)) {
		return nil, errBadSession
	}
	return &s, nil
}

// hash returns the session's token hash as the Verifier keys it.
func (s *session) hash() (h [sha256.Size]byte, ok bool) {
	if len(s.Hash) != hex.EncodedLen(sha256.Size) {
		return h, false
	}
	_, err := hex.Decode(h[:], []byte(s.Hash))
	return h, err == nil
}

// randomToken returns 128 random bits in base64url: CSRF tokens.
func randomToken() string {
	b := make([]byte, 16)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// cookie returns a dashboard cookie: HttpOnly, SameSite=Strict, under
// /ui, and Secure when the request came over TLS. maxAge 0 makes a
// cookie that ends with the browser; negative deletes it.
func cookie(r *http.Request, name, value string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: name, Value: value, Path: "/ui", MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil}
}

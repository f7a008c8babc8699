// Package client is the Go client of rowq's HTTP API: jobs and their
// flows (callbacks, dependencies, batches: PushBatch, Blocked), queues and
// routings (the Fireworq-compatible surface), locks and schedules. It
// imports only the standard library and package rowqtype, whose request
// and answer bodies it sends and returns: the server uses the same types.
//
// Every method takes a context and returns an *Error when the server
// answered with a status other than 200; the Error carries the status, the
// server's message, which names the field at fault, and its Retry-After.
package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/rowq/rowq/rowqtype"
)

// DefaultServer is the address a client talks to when none is given.
const DefaultServer = "http://127.0.0.1:8080"

// Client talks to one rowq server. It is safe for concurrent use.
type Client struct {
	base  string
	http  *http.Client
	token string
}

// Option configures a Client.
type Option func(*Client)

// WithToken sends token with every request (Authorization: Bearer), as
// a server with authentication on needs; "" sends none. A token in the
// base URL's userinfo (http://x:TOKEN@host:8080) is sent too, as HTTP
// Basic, when WithToken gives none.
func WithToken(token string) Option { return func(c *Client) { c.token = token } }

// New returns a client of the rowq server at base (such as
// http://127.0.0.1:8080 or https://rowq.example.com). A nil httpClient
// means a client with a 60 s timeout per request that trusts the system's
// certificate authorities; HTTPClient makes one that trusts a private CA.
func New(base string, httpClient *http.Client, opts ...Option) *Client {
	if base == "" {
		base = DefaultServer
	}
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	if httpClient == nil {
		httpClient = &http.Client{Timeout: requestTimeout}
	}
	c := &Client{base: strings.TrimRight(base, "/"), http: httpClient}
	for _, o := range opts {
		o(c)
	}
	return c
}

// requestTimeout bounds each request of a client New makes.
const requestTimeout = 60 * time.Second

// HTTPClient returns an HTTP client for New that trusts the certificate
// authorities in caFile, a PEM file, and no others: the way to reach a
// server whose certificate a private CA signed (rowq serve --tls-cert).
// Like New's default it allows 60 s per request, takes proxies from the
// environment and speaks HTTP/2 over TLS. An empty caFile trusts the
// system's authorities.
func HTTPClient(caFile string) (*http.Client, error) {
	t := http.DefaultTransport.(*http.Transport).Clone()
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("rowq: read CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("rowq: read CA file %s: no PEM certificate in it", caFile)
		}
		t.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return &http.Client{Transport: t, Timeout: requestTimeout}, nil
}

// Base returns the server's base URL.
func (c *Client) Base() string { return c.base }

// Error is a non-200 answer of the server.
type Error struct {
	Status  int    // HTTP status code
	Message string // the server's "error" message, or the body's head
	// Body is the whole answer, for endpoints whose errors carry more than
	// a message (a lock's 409 lists its holders).
	Body json.RawMessage
	// RetryAfter is the answer's Retry-After in seconds, which a 503 (the
	// database is away) carries; zero when it had none.
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	return fmt.Sprintf("rowq: %d %s: %s", e.Status, http.StatusText(e.Status), e.Message)
}

// IsNotFound reports whether err is a 404 answer.
func IsNotFound(err error) bool { return statusOf(err) == http.StatusNotFound }

// IsUnauthorized reports whether err is a 401 answer: no token, or one
// the server does not know (unknown, revoked or expired).
func IsUnauthorized(err error) bool { return statusOf(err) == http.StatusUnauthorized }

// IsForbidden reports whether err is a 403 answer: the token lacks the
// scope or the queue; the message names what is missing.
func IsForbidden(err error) bool { return statusOf(err) == http.StatusForbidden }

// IsConflict reports whether err is a 409 answer.
func IsConflict(err error) bool { return statusOf(err) == http.StatusConflict }

func statusOf(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

// Do sends a request with in as its JSON body (none when nil) and decodes
// a 200 answer into out (ignored when nil). Other answers become an *Error.
// Methods of Client cover the API; Do serves what they do not.
func (c *Client) Do(ctx context.Context, method, path string, query url.Values, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("rowq: encode request: %w", err)
		}
		body = bytes.NewReader(b)
	}
	u := c.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return fmt.Errorf("rowq: %w", err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("rowq: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("rowq: %s %s: read answer: %w", method, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		e := &Error{Status: resp.StatusCode, Body: raw}
		if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && secs > 0 {
			e.RetryAfter = time.Duration(secs) * time.Second
		}
		var eb rowqtype.ErrorBody
		if json.Unmarshal(raw, &eb) == nil && eb.Error != "" {
			e.Message = eb.Error
		} else {
			e.Message = strings.TrimSpace(string(raw[:min(len(raw), 512)]))
		}
		return e
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("rowq: %s %s: decode answer: %w", method, path, err)
	}
	return nil
}

// esc escapes one path segment.
func esc(s string) string { return url.PathEscape(s) }

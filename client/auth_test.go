package client_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rowq/rowq/client"
	"github.com/rowq/rowq/internal/auth"
	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/rowqtype"
)

// TestClient_Token: with a token row (auth auto is on), a client without a
// token gets 401, WithToken works, and so does a token in the server
// URL's userinfo, as an existing Fireworq client would send it.
func TestClient_Token(t *testing.T) {
	t.Parallel()
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			_, s := startServer(t, dialect)
			ctx := t.Context()
			tok, hash := auth.NewToken()
			if _, err := s.Store().TokenCreate(ctx, &store.TokenCreateParams{Name: "app", Hash: hash, Scopes: []string{"admin"}}); err != nil {
				t.Fatal(err)
			}
			anon := client.New(s.Addr(), nil)
			if _, err := waitUnauthorized(t, anon); !client.IsUnauthorized(err) {
				t.Fatalf("no token: err = %v, want a 401", err)
			}
			c := client.New(s.Addr(), nil, client.WithToken(tok))
			if _, err := c.PutQueue(ctx, "q", &rowqtype.QueueRequest{}); err != nil {
				t.Fatalf("WithToken: %v", err)
			}
			inURL := client.New("http://x:"+tok+"@"+s.Addr(), nil)
			if _, err := inURL.Queue(ctx, "q"); err != nil {
				t.Fatalf("token in the URL's userinfo: %v", err)
			}
			// A Fireworq client: plain HTTP with the token in the URL.
			res, err := http.Post("http://x:"+tok+"@"+s.Addr()+"/job/cat", "application/json", strings.NewReader(`{"url":"http://127.0.0.1:1/"}`))
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != 404 { // no routing and no default queue: past authentication
				t.Fatalf("POST /job/cat with the token in the URL: %d, want 404 (no routing)", res.StatusCode)
			}
			bad := client.New(s.Addr(), nil, client.WithToken(tok+"x"))
			_, err = bad.Queues(ctx)
			if !client.IsUnauthorized(err) || strings.Contains(err.Error(), tok) {
				t.Fatalf("wrong token: err = %v, want a 401 that does not show the token", err)
			}
		})
	}
}

// waitUnauthorized asks until auto mode has seen the token row (within
// about a second) and returns the last answer.
func waitUnauthorized(t *testing.T, c *client.Client) ([]*rowqtype.Queue, error) {
	t.Helper()
	for range 100 {
		qs, err := c.Queues(t.Context())
		if client.IsUnauthorized(err) {
			return qs, err
		}
		time.Sleep(30 * time.Millisecond)
	}
	return c.Queues(t.Context())
}

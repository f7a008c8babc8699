package client_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/rowq/rowq/client"
	"github.com/rowq/rowq/internal/httpapi"
	"github.com/rowq/rowq/internal/lock"
	"github.com/rowq/rowq/internal/store/backend"
)

// TestError_RetryAfter: the answer of a node whose database is away (here
// a MySQL server nobody listens for) is a 503 whose Retry-After the Error
// carries; other answers carry none.
func TestError_RetryAfter(t *testing.T) {
	t.Parallel()
	st, err := backend.Open("mysql://root@127.0.0.1:1/x?timeout=2s")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	srv := httptest.NewServer(httpapi.New(httpapi.Config{Store: st, Locks: lock.New(lock.Config{Store: st})}))
	t.Cleanup(srv.Close)
	c := client.New(srv.URL, nil)

	_, err = c.Lock(t.Context(), "l")
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status != http.StatusServiceUnavailable || ce.RetryAfter != time.Second {
		t.Fatalf("lock of a node without its database: err = %#v, want a 503 with Retry-After 1s", err)
	}
	_, err = c.Acquire(t.Context(), "l", "", client.AcquireOptions{TTL: time.Second})
	if !errors.As(err, &ce) || ce.Status != http.StatusBadRequest || ce.RetryAfter != 0 {
		t.Fatalf("acquire without an owner: err = %#v, want a 400 without Retry-After", err)
	}
}

package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store/backend"
	"github.com/rowq/rowq/internal/store/dbtest"
)

// lease is a lease as the API answers it.
type lease struct {
	Name       string    `json:"name"`
	Owner      string    `json:"owner"`
	Token      int64     `json:"token"`
	AcquiredAt time.Time `json:"acquired_at"`
	ExpiresAt  time.Time `json:"expires_at"`
	Limit      int       `json:"limit"`
}

type lockAnswer struct {
	Name    string   `json:"name"`
	Holders []*lease `json:"holders"`
}

// Bad input is refused with a 400 naming the field, and takes nothing.
func TestLock_BadInput(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) { testLockBadInput(t, setupDialect(t, dialect, nil)) })
}

func testLockBadInput(t *testing.T, b *bundle) {
	long := strings.Repeat("x", 129)
	tests := []struct {
		name, method, path, body string
		field                    string // the field the error must name first
	}{
		{"NoOwner", "PUT", "/lock/l", `{"ttl": 10}`, "owner"},
		{"EmptyOwner", "PUT", "/lock/l", `{"owner": "", "ttl": 10}`, "owner"},
		{"OwnerTooLong", "PUT", "/lock/l", `{"owner": "` + strings.Repeat("o", 256) + `", "ttl": 10}`, "owner"},
		{"OwnerTrailingSpace", "PUT", "/lock/l", `{"owner": "host ", "ttl": 10}`, "owner"},
		{"OwnerControlChar", "PUT", "/lock/l", `{"owner": "a\nb", "ttl": 10}`, "owner"},
		{"OwnerNotString", "PUT", "/lock/l", `{"owner": 5, "ttl": 10}`, "owner"},
		{"NoTTL", "PUT", "/lock/l", `{"owner": "me"}`, "ttl"},
		{"TTLZero", "PUT", "/lock/l", `{"owner": "me", "ttl": 0}`, "ttl"},
		{"TTLNegative", "PUT", "/lock/l", `{"owner": "me", "ttl": -1}`, "ttl"},
		{"TTLBelowMicrosecond", "PUT", "/lock/l", `{"owner": "me", "ttl": 0.0000004}`, "ttl"},
		{"TTLTooLarge", "PUT", "/lock/l", `{"owner": "me", "ttl": 86400.5}`, "ttl"},
		{"TTLString", "PUT", "/lock/l", `{"owner": "me", "ttl": "10s"}`, "ttl"},
		{"WaitNegative", "PUT", "/lock/l", `{"owner": "me", "ttl": 10, "wait": -0.5}`, "wait"},
		{"WaitTooLarge", "PUT", "/lock/l", `{"owner": "me", "ttl": 10, "wait": 301}`, "wait"},
		{"LimitZero", "PUT", "/lock/l", `{"owner": "me", "ttl": 10, "limit": 0}`, "limit"},
		{"LimitTooLarge", "PUT", "/lock/l", `{"owner": "me", "ttl": 10, "limit": 1001}`, "limit"},
		{"LimitFraction", "PUT", "/lock/l", `{"owner": "me", "ttl": 10, "limit": 1.5}`, "limit"},
		{"UnknownField", "PUT", "/lock/l", `{"owner": "me", "ttl": 10, "token": 3}`, "token"},
		{"NoBody", "PUT", "/lock/l", ``, "body"},
		{"NameTooLong", "PUT", "/lock/" + long, `{"owner": "me", "ttl": 10}`, "name"},
		{"NameBadChars", "PUT", "/lock/a%20b", `{"owner": "me", "ttl": 10}`, "name"},
		{"NameStar", "GET", "/lock/a*b", ``, "name"},
		{"RenewNoToken", "POST", "/lock/l/renew", `{"owner": "me", "ttl": 10}`, "token"},
		{"RenewTokenZero", "POST", "/lock/l/renew", `{"owner": "me", "token": 0, "ttl": 10}`, "token"},
		{"RenewNoOwner", "POST", "/lock/l/renew", `{"token": 1, "ttl": 10}`, "owner"},
		{"RenewTTLTooLarge", "POST", "/lock/l/renew", `{"owner": "me", "token": 1, "ttl": 1e9}`, "ttl"},
		{"RenewBadName", "POST", "/lock/%2E%2E/renew", `{"owner": "me", "token": 1, "ttl": 10}`, "name"},
		{"ReleaseNoOwner", "DELETE", "/lock/l?token=1", ``, "owner"},
		{"ReleaseNoToken", "DELETE", "/lock/l?owner=me", ``, "token"},
		{"ReleaseTokenNotNumber", "DELETE", "/lock/l?owner=me&token=abc", ``, "token"},
		{"ReleaseTokenNegative", "DELETE", "/lock/l?owner=me&token=-3", ``, "token"},
		{"ListLimitZero", "GET", "/locks?limit=0", ``, "limit"},
		{"ListLimitTooLarge", "GET", "/locks?limit=5000", ``, "limit"},
		{"ListCursorBad", "GET", "/locks?cursor=a%20b", ``, "cursor"},
		{"ListCursorNotBase64", "GET", "/locks?cursor=!!", ``, "cursor"},
		{"ListCursorOfSchedules", "GET", "/locks?cursor=czphYmM", ``, "cursor"}, // "s:abc"
		{"ListCursorBadEscape", "GET", "/locks?cursor=%zz", ``, "cursor"},
	}
	// The group returns once its parallel cases are done.
	t.Run("cases", func(t *testing.T) {
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				msg := errorMessage(t, b.do(t, tc.method, tc.path, tc.body), http.StatusBadRequest)
				if !strings.HasPrefix(msg, tc.field+":") {
					t.Errorf("error %q does not start with the field %q", msg, tc.field)
				}
			})
		}
	})
	// Nothing was taken.
	var got lockAnswer
	b.ok(t, "GET", "/lock/l", "", &got)
	if len(got.Holders) != 0 {
		t.Fatalf("bad requests left holders %+v", got.Holders)
	}
}

func TestLock_LifecycleOverHTTP(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		b := setupDialect(t, dialect, nil)
		var a lease
		b.ok(t, "PUT", "/lock/deploy:prod", `{"owner": "host-a:41", "ttl": 30.5}`, &a)
		if a.Name != "deploy:prod" || a.Owner != "host-a:41" || a.Token != 1 || a.Limit != 1 {
			t.Fatalf("lease = %+v", a)
		}
		if got, want := a.ExpiresAt.Sub(a.AcquiredAt), 30500*time.Millisecond; got != want {
			t.Fatalf("expires_at - acquired_at = %v, want %v", got, want)
		}
		// The answer's times are RFC 3339 with a zone.
		raw := string(b.do(t, "GET", "/lock/deploy:prod", "").body)
		if !strings.Contains(raw, `"expires_at":"`+a.ExpiresAt.Format(time.RFC3339Nano)+`"`) || !strings.Contains(raw, "Z\"") {
			t.Fatalf("GET answer %s does not carry expires_at %s in RFC 3339", raw, a.ExpiresAt.Format(time.RFC3339Nano))
		}

		// A retried acquire by the same owner gets the same lease.
		var again lease
		b.ok(t, "PUT", "/lock/deploy:prod", `{"owner": "host-a:41", "ttl": 30.5}`, &again)
		if again.Token != a.Token || !again.ExpiresAt.Equal(a.ExpiresAt) {
			t.Fatalf("retried acquire = %+v, want %+v", again, a)
		}

		// Another owner gets 409 with the holders.
		res := b.do(t, "PUT", "/lock/deploy:prod", `{"owner": "host-b:7", "ttl": 10, "wait": 0.2}`)
		msg := errorMessage(t, res, http.StatusConflict)
		if !strings.Contains(msg, "host-a:41") || !strings.Contains(string(res.body), `"holders":[{"name":"deploy:prod","owner":"host-a:41"`) {
			t.Fatalf("409 body %s does not list the holder", res.body)
		}

		// Renew and release with a wrong or stale token fail and change nothing.
		for _, body := range []string{
			`{"owner": "host-a:41", "token": 2, "ttl": 60}`,
			`{"owner": "host-b:7", "token": 1, "ttl": 60}`,
		} {
			errorMessage(t, b.do(t, "POST", "/lock/deploy:prod/renew", body), http.StatusConflict)
		}
		errorMessage(t, b.do(t, "DELETE", "/lock/deploy:prod?owner=host-a:41&token=2", ""), http.StatusConflict)
		errorMessage(t, b.do(t, "DELETE", "/lock/deploy:prod?owner=host-b:7&token=1", ""), http.StatusConflict)
		var got lockAnswer
		b.ok(t, "GET", "/lock/deploy:prod", "", &got)
		if len(got.Holders) != 1 || *got.Holders[0] != a {
			t.Fatalf("after bad renews and releases holders = %+v, want only %+v", got.Holders, a)
		}

		var renewed lease
		b.ok(t, "POST", "/lock/deploy:prod/renew", `{"owner": "host-a:41", "token": 1, "ttl": 600}`, &renewed)
		if renewed.Token != 1 || !renewed.ExpiresAt.After(a.ExpiresAt) {
			t.Fatalf("renewed = %+v, want token 1 expiring after %v", renewed, a.ExpiresAt)
		}

		// A waiter is served when the holder releases.
		done := make(chan *response, 1)
		go func() {
			// Not b.do: it may stop the test, which only the test's own
			// goroutine may do.
			req, _ := http.NewRequest("PUT", b.server.URL+"/lock/deploy:prod", strings.NewReader(`{"owner": "host-b:7", "ttl": 10, "wait": 60}`))
			res, err := b.server.Client().Do(req)
			if err != nil {
				done <- &response{status: -1, body: []byte(err.Error())}
				return
			}
			defer res.Body.Close()
			body, _ := io.ReadAll(res.Body)
			done <- &response{status: res.StatusCode, body: body}
		}()
		time.Sleep(100 * time.Millisecond)
		var released lease
		b.ok(t, "DELETE", "/lock/deploy:prod?"+url.Values{"owner": {"host-a:41"}, "token": {"1"}}.Encode(), "", &released)
		if released.Token != 1 || released.Owner != "host-a:41" {
			t.Fatalf("released = %+v", released)
		}
		errorMessage(t, b.do(t, "DELETE", "/lock/deploy:prod?owner=host-a:41&token=1", ""), http.StatusConflict)
		var next lease
		select {
		case r := <-done:
			if r.status != http.StatusOK {
				t.Fatalf("waiter: %d %s", r.status, r.body)
			}
			if err := json.Unmarshal(r.body, &next); err != nil || next.Owner != "host-b:7" || next.Token != 2 {
				t.Fatalf("waiter got %s, want host-b:7 with token 2", r.body)
			}
		case <-time.After(2 * time.Minute):
			t.Fatal("waiter not served")
		}
	})
}

func TestLock_SemaphoreAndListing(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		b := setupDialect(t, dialect, nil)
		for i := range 3 {
			b.ok(t, "PUT", "/lock/pool", fmt.Sprintf(`{"owner": "w%d", "ttl": 60, "limit": 3}`, i), nil)
		}
		res := b.do(t, "PUT", "/lock/pool", `{"owner": "w3", "ttl": 60, "limit": 3}`)
		errorMessage(t, res, http.StatusConflict)
		if n := strings.Count(string(res.body), `"owner":"w`); n != 3 {
			t.Fatalf("409 lists %d holders, want 3: %s", n, res.body)
		}
		for _, name := range []string{"a", "c", "d"} {
			b.ok(t, "PUT", "/lock/"+name, `{"owner": "x", "ttl": 60}`, nil)
		}
		var page struct {
			Locks      []lockAnswer `json:"locks"`
			NextCursor string       `json:"next_cursor"`
		}
		var names []string
		cursor, pages := "", 0
		for ; pages < 5; pages++ {
			page.NextCursor = ""
			b.ok(t, "GET", "/locks?limit=2&cursor="+url.QueryEscape(cursor), "", &page)
			for _, l := range page.Locks {
				names = append(names, fmt.Sprintf("%s:%d", l.Name, len(l.Holders)))
			}
			if page.NextCursor == "" {
				break
			}
			cursor = page.NextCursor
		}
		if got, want := fmt.Sprint(names), "[a:1 c:1 d:1 pool:3]"; got != want {
			t.Fatalf("paged listing = %s, want %s", got, want)
		}
		// 4 locks, 2 a page: the second page is the last and says so.
		if pages != 1 {
			t.Fatalf("paged listing took %d pages, want 2 (no next_cursor on the last)", pages+1)
		}
	})
}

// A waiter whose client goes away stops waiting: it does not take the lock
// when it comes free.
func TestLock_WaiterGoneTakesNothing(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		b := setupDialect(t, dialect, nil)
		var a lease
		b.ok(t, "PUT", "/lock/l", `{"owner": "a", "ttl": 60}`, &a)

		ctx, cancel := context.WithCancel(t.Context())
		gone := make(chan error, 1)
		go func() {
			req, _ := http.NewRequestWithContext(ctx, "PUT", b.server.URL+"/lock/l", strings.NewReader(`{"owner": "gone", "ttl": 60, "wait": 60}`))
			res, err := b.server.Client().Do(req)
			if err == nil {
				res.Body.Close()
			}
			gone <- err
		}()
		time.Sleep(200 * time.Millisecond) // the request waits on the server
		cancel()
		if err := <-gone; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled request: err = %v", err)
		}
		time.Sleep(time.Second) // the server notices, even on a loaded machine
		b.ok(t, "DELETE", "/lock/l?owner=a&token=1", "", nil)
		// A waiter still there would be woken by the release at once.
		time.Sleep(500 * time.Millisecond)
		var got lockAnswer
		b.ok(t, "GET", "/lock/l", "", &got)
		if len(got.Holders) != 0 {
			t.Fatalf("after its client went away the waiter took the lock: %+v", got.Holders[0])
		}
	})
}

// With the database away, every lock call answers 503 and a waiting
// acquire does not wait it out.
func TestLock_DatabaseUnavailable(t *testing.T) {
	t.Parallel()
	urls := map[string]string{
		"mysql":    "mysql://root@127.0.0.1:1/x",
		"postgres": "postgres://postgres@127.0.0.1:1/x?sslmode=disable&connect_timeout=2",
	}
	for dialect, url := range urls {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			st, err := backend.Open(url)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			b := setup(t, st, nil)
			requests := []struct{ method, path, body string }{
				{"PUT", "/lock/l", `{"owner": "me", "ttl": 10, "wait": 60}`},
				{"POST", "/lock/l/renew", `{"owner": "me", "token": 1, "ttl": 10}`},
				{"DELETE", "/lock/l?owner=me&token=1", ""},
				{"GET", "/lock/l", ""},
				{"GET", "/locks", ""},
			}
			for _, rq := range requests {
				t.Run(rq.method+rq.path, func(t *testing.T) {
					t.Parallel()
					res := b.do(t, rq.method, rq.path, rq.body)
					if msg := errorMessage(t, res, http.StatusServiceUnavailable); !strings.Contains(msg, "database unavailable") {
						t.Errorf("error %q does not say the database is unavailable", msg)
					}
					if res.header.Get("Retry-After") == "" {
						t.Errorf("503 without a Retry-After header")
					}
				})
			}
		})
	}
}

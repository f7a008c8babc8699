package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/dispatch"
	"github.com/rowq/rowq/internal/enqueue"
	"github.com/rowq/rowq/internal/httpapi"
	"github.com/rowq/rowq/internal/lock"
	"github.com/rowq/rowq/internal/schedule"
	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/backend"
	"github.com/rowq/rowq/internal/store/dbtest"
)

// bundle is what an API test needs: the store behind the API, a server
// serving it and the API's dispatcher (not started).
type bundle struct {
	st     store.Store
	server *httptest.Server
	disp   *dispatch.Dispatcher
	api    *httpapi.API
}

// options are what a test may change of an API's setup.
type options struct {
	api  httpapi.Config
	enq  enqueue.Config
	disp dispatch.Config
}

// setup serves an API on st with the services of a node (enqueueing, a
// dispatcher that is not started, locks and a schedule loop that is not
// started); tweak may change the options before they are built.
func setup(t testing.TB, st store.Store, tweak func(*options)) *bundle {
	t.Helper()
	o := options{
		api: httpapi.Config{QueueDefaults: store.Queue{PollingInterval: 200, MaxWorkers: 20}, MaxBodyBytes: 1 << 16},
	}
	if tweak != nil {
		tweak(&o)
	}
	api, disp := newAPI(t, st, o)
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	return &bundle{st: st, server: srv, disp: disp, api: api}
}

// newAPI builds an API on st and the services it needs, stopped when the
// test ends, and returns it with its dispatcher.
func newAPI(t testing.TB, st store.Store, o options) (*httpapi.API, *dispatch.Dispatcher) {
	t.Helper()
	o.disp.Store = st
	if o.disp.Node == "" {
		o.disp.Node = "test-node"
	}
	disp := dispatch.New(o.disp)
	o.enq.Store, o.enq.Dispatcher = st, disp
	enq := enqueue.New(o.enq)
	locks := lock.New(lock.Config{Store: st})
	o.api.Store, o.api.Enqueue, o.api.Dispatcher, o.api.Locks = st, enq, disp, locks
	o.api.Scheduler = schedule.New(schedule.Config{Store: st, Enqueue: enq})
	t.Cleanup(func() {
		ctx := context.Background()
		enq.Stop(ctx)
		disp.Stop(ctx)
	})
	return httpapi.New(o.api), disp
}

// setupDialect serves an API on a fresh, migrated database of the dialect.
func setupDialect(t *testing.T, dialect string, tweak func(*options)) *bundle {
	t.Helper()
	return setup(t, dbtest.Open(t, dialect), tweak)
}

// response is an answer read in full.
type response struct {
	status int
	header http.Header
	body   []byte
}

// do sends a request with body ("" for none) and reads the answer.
func (b *bundle) do(t *testing.T, method, path, body string) *response {
	t.Helper()
	return b.doAs(t, "", method, path, body)
}

// doAs is do with a bearer token ("" for none).
func (b *bundle) doAs(t *testing.T, token, method, path, body string) *response {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, b.server.URL+path, r)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := b.server.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	got, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s %s: read answer: %v", method, path, err)
	}
	return &response{status: res.StatusCode, header: res.Header, body: got}
}

// ok sends a request, fails the test unless it gets 200, and decodes the
// answer into dst (when not nil).
func (b *bundle) ok(t *testing.T, method, path, body string, dst any) {
	t.Helper()
	res := b.do(t, method, path, body)
	if res.status != http.StatusOK {
		t.Fatalf("%s %s: status %d, want 200; body %s", method, path, res.status, res.body)
	}
	if dst != nil {
		if err := json.Unmarshal(res.body, dst); err != nil {
			t.Fatalf("%s %s: decode %s: %v", method, path, res.body, err)
		}
	}
}

// errorMessage checks that res is a JSON error answer with the status and
// returns its message.
func errorMessage(t *testing.T, res *response, status int) string {
	t.Helper()
	if got, want := res.status, status; got != want {
		t.Errorf("status = %d, want %d; body %s", got, want, res.body)
	}
	if got, want := res.header.Get("Content-Type"), "application/json"; got != want {
		t.Errorf("Content-Type = %q, want %q", got, want)
	}
	var e map[string]any
	if err := json.Unmarshal(res.body, &e); err != nil {
		t.Fatalf("error body %q is not a JSON object: %v", res.body, err)
	}
	msg, ok := e["error"].(string)
	if !ok || msg == "" {
		t.Fatalf(`error body %s has no "error" string`, res.body)
	}
	return msg
}

// Routing-level answers never reach the database: sqlite only.
func TestAPI_UnknownRoute(t *testing.T) {
	t.Parallel()
	b := setup(t, dbtest.Open(t, "sqlite"), nil)

	tests := []struct {
		name, method, path string
		status             int
		allow              []string // methods the Allow header must list
	}{
		{name: "UnknownPath", method: "GET", path: "/nope", status: 404},
		{name: "Root", method: "GET", path: "/", status: 404},
		{name: "JobWithoutCategory", method: "POST", path: "/job/", status: 404},
		{name: "QueueSubresource", method: "GET", path: "/queue/q/nope", status: 404},
		{name: "GetJob", method: "GET", path: "/job/x", status: 405, allow: []string{"POST"}},
		{name: "PutJob", method: "PUT", path: "/job/x", status: 405, allow: []string{"POST"}},
		{name: "PatchQueue", method: "PATCH", path: "/queue/q", status: 405, allow: []string{"GET", "PUT", "DELETE"}},
		{name: "PostQueues", method: "POST", path: "/queues", status: 405, allow: []string{"GET"}},
		{name: "PostRouting", method: "POST", path: "/routing/c", status: 405, allow: []string{"GET", "PUT", "DELETE"}},
		{name: "DeleteNode", method: "DELETE", path: "/queue/q/node", status: 405, allow: []string{"GET"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res := b.do(t, tc.method, tc.path, "")
			msg := errorMessage(t, res, tc.status)
			if !strings.Contains(msg, tc.path) {
				t.Errorf("error %q does not name the path %s", msg, tc.path)
			}
			allow := res.header.Get("Allow")
			if tc.status == http.StatusMethodNotAllowed && allow == "" {
				t.Errorf("405 without an Allow header")
			}
			for _, m := range tc.allow {
				if !strings.Contains(allow, m) {
					t.Errorf("Allow = %q, want it to list %s", allow, m)
				}
			}
		})
	}
}

// Size checks happen before the database is reached: sqlite only.
func TestPushJob_BodyTooLarge(t *testing.T) {
	t.Parallel()
	const limit = 1024
	valid := `{"url":"http://worker.example/run"}`
	tests := []struct {
		name, body string
	}{
		{"LargePayload", `{"url":"http://worker.example/run","payload":"` + strings.Repeat("x", 4*limit) + `"}`},
		{"LargeURL", `{"url":"http://worker.example/` + strings.Repeat("x", 2*limit) + `"}`},
		// The object fits; what follows it does not.
		{"PaddingAfterObject", valid + strings.Repeat(" ", 2*limit)},
		{"GarbageAfterLimit", valid + strings.Repeat(" ", 2*limit) + "x"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, dbtest.Open(t, "sqlite"), func(o *options) {
				o.enq.DefaultQueue = "default"
				o.api.MaxBodyBytes = limit
			})
			msg := errorMessage(t, b.do(t, "POST", "/job/cat", tc.body), http.StatusRequestEntityTooLarge)
			if !strings.Contains(msg, "1024") {
				t.Errorf("error %q does not state the limit", msg)
			}
			jobs, err := b.st.JobsGrab(t.Context(), &store.JobsGrabParams{Queue: "default", Node: "test", Limit: 10, Lease: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			if got, want := len(jobs), 0; got != want {
				t.Errorf("%d jobs stored after a 413, want %d", got, want)
			}
		})
	}

	t.Run("PutQueue", func(t *testing.T) {
		t.Parallel()
		b := setup(t, dbtest.Open(t, "sqlite"), func(o *options) { o.api.MaxBodyBytes = 64 })
		body := `{"max_workers":5` + strings.Repeat(" ", 100) + `}`
		errorMessage(t, b.do(t, "PUT", "/queue/q", body), http.StatusRequestEntityTooLarge)
		if _, err := b.st.QueueGet(t.Context(), "q"); err == nil {
			t.Errorf("queue q stored after a 413")
		}
	})
}

// TestAPI_DatabaseUnavailable points the API at servers that refuse
// connections (port 1); stores are opened but never migrated.
func TestAPI_DatabaseUnavailable(t *testing.T) {
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
			b := setup(t, st, func(o *options) { o.enq.DefaultQueue = "default" })

			requests := []struct{ method, path, body string }{
				{"POST", "/job/cat", `{"url":"http://worker.example/run"}`},
				{"GET", "/queues", ""},
				{"PUT", "/queue/q", `{"max_workers":5}`},
				{"GET", "/routings", ""},
				{"GET", "/healthz", ""},
			}
			for _, rq := range requests {
				t.Run(rq.method+rq.path, func(t *testing.T) {
					t.Parallel()
					res := b.do(t, rq.method, rq.path, rq.body)
					msg := errorMessage(t, res, http.StatusServiceUnavailable)
					if !strings.Contains(msg, "database unavailable") {
						t.Errorf("error %q does not say the database is unavailable", msg)
					}
					if got := res.header.Get("Retry-After"); got == "" {
						t.Errorf("503 without a Retry-After header")
					}
				})
			}
		})
	}
}

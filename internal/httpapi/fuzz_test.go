package httpapi_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/httpapi"
	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
)

var fuzzMethods = []string{"GET", "POST", "PUT", "DELETE", "PATCH", "HEAD"}

// FuzzAPI drives every route's decoders and handlers with fuzzed methods,
// paths, query strings and bodies against a real store (SQLite, or the
// dialect ROWQ_FUZZ_DIALECT names): no input may get a 5xx answer or panic. The seed corpus (one request per route, good
// and bad) runs in every `go test`; `go test -fuzz FuzzAPI` explores.
func FuzzAPI(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(uint8(s.method), s.path, s.query, []byte(s.body))
	}
	// SQLite by default; ROWQ_FUZZ_DIALECT=mysql or postgres fuzzes those.
	dialect := os.Getenv("ROWQ_FUZZ_DIALECT")
	if dialect == "" {
		dialect = "sqlite"
	}
	api := fuzzAPI(f, dbtest.Open(f, dialect))
	f.Fuzz(func(t *testing.T, method uint8, path, query string, body []byte) {
		if code, answer := fuzzRequest(api, method, path, query, body); code >= 500 {
			t.Fatalf("%s %s?%s body %q: %d %s", fuzzMethods[int(method)%len(fuzzMethods)], path, query, body, code, answer)
		}
	})
}

// TestAPI_FuzzSeedsOnEveryDialect sends the fuzz seeds (every route, good
// and bad input) to the API on every database: a refusal by one database
// that the others accept must not become a 5xx.
func TestAPI_FuzzSeedsOnEveryDialect(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		api := fuzzAPI(t, dbtest.Open(t, dialect))
		for _, s := range fuzzSeeds {
			if code, answer := fuzzRequest(api, uint8(s.method), s.path, s.query, []byte(s.body)); code >= 500 {
				t.Errorf("%s %s?%s body %q: %d %s", fuzzMethods[s.method], s.path, s.query, s.body, code, answer)
			}
		}
	})
}

// fuzzSeeds are requests to every route, good and bad.
var fuzzSeeds = []struct {
	method      int
	path, query string
	body        string
}{
	{1, "/job/c", "", `{"url":"http://127.0.0.1:1/w","payload":{"a":[1,2]},"run_after":5,"max_retries":2,"retry_delay":1,"timeout":3}`},
	{1, "/job/c", "", `{"url":"http://127.0.0.1:1/w","payload":"raw \u00e9"}`},
	{1, "/job/c", "", `{"url":"http://x","payload":"\xff"}`},
	{1, "/job/c", "", `{"url":"http://x","timeout":1e99}`},
	{1, "/job/c", "", `{"url":"http://x"}{}`},
	{1, "/job/c", "", `[]`},
	{1, "/job/..", "", `{}`},
	{1, "/job/unrouted", "", `{"url":"http://x"}`},
	{0, "/queues", "", ""},
	{0, "/queue/q", "", ""},
	{2, "/queue/q", "", `{"polling_interval":100,"max_workers":3,"max_dispatches_per_second":2.5,"max_burst_size":4}`},
	{2, "/queue/q2", "", `{"max_dispatches_per_second":-1}`},
	{2, "/queue/q2", "", `{"max_burst_size":99999999999}`},
	{3, "/queue/q2", "", ""},
	{0, "/queue/q/node", "", ""},
	{0, "/routings", "", ""},
	{0, "/routing/c", "", ""},
	{2, "/routing/c2", "", `{"queue_name":"q"}`},
	{2, "/routing/c2", "", `{"queue_name":""}`},
	{3, "/routing/c2", "", ""},
	{0, "/queue/q/waiting", "limit=2&order=asc", ""},
	{0, "/queue/q/grabbed", "limit=1000&order=desc", ""},
	{0, "/queue/q/deferred", "cursor=ajoxMjM6NA&limit=1", ""},
	{0, "/queue/q/deferred", "cursor=ajotOTIyMzM3MjAzNjg1NDc3NTgwODox", ""},
	{0, "/queue/q/waiting", "cursor=%zz", ""},
	{0, "/queue/q/waiting", "limit=-1", ""},
	{0, "/queue/q/failed", "order=created&limit=1", ""},
	{0, "/queue/q/failed", "cursor=Zjo0", ""},
	{0, "/queue/q/failed", "order=created&cursor=ZmM6OTIyMzM3MjAzNjg1NDc3NTgwNzox", ""},
	{0, "/queue/q/job/1", "", ""},
	{3, "/queue/q/job/2", "", ""},
	{0, "/queue/q/job/9223372036854775807", "", ""},
	{0, "/queue/q/failed/1", "", ""},
	{3, "/queue/q/failed/1", "", ""},
	{0, "/queue/q/stats", "", ""},
	{0, "/queues/stats", "", ""},
	{0, "/version", "", ""},
	{0, "/settings", "", ""},
	{0, "/healthz", "", ""},
	{4, "/queue/q", "", "{}"},
	{5, "/queue/q", "", ""},
	{0, "/nope", "", ""},
	{0, "/queue/q/deferred", "cursor=ajotOTIyMzM3MjAzNjg1NDc3NTgwODox", ""},
	{0, "/queue/q/deferred", "cursor=ajo5MjIzMzcyMDM2ODU0Nzc1ODA3OjE", ""},
	{0, "/queue/q/failed", "order=created&cursor=ZmM6LTkyMjMzNzIwMzY4NTQ3NzU4MDg6MQ", ""},
	{0, "/queue/q/job/9223372036854775807", "", ""},
	{1, "/job/c", "", `{"url":"http://x","payload":"\u0000"}`},
	{1, "/job/c", "", `{"url":"http://x/\u0000"}`},
}

// fuzzAPI serves an API on st, seeded with jobs to find.
func fuzzAPI(tb testing.TB, st store.Store) *httpapi.API {
	api, _ := newAPI(tb, st, options{api: httpapi.Config{
		QueueDefaults: store.Queue{PollingInterval: 200, MaxWorkers: 20},
		MaxBodyBytes:  1 << 14,
		Version:       "fuzz",
		Settings:      map[string]string{"database-url": "sqlite://x"},
	}})
	seedStore(tb, st)
	return api
}

// fuzzRequest serves one request and returns the status and the answer.
func fuzzRequest(api *httpapi.API, method uint8, path, query string, body []byte) (int, []byte) {
	r := &http.Request{
		Method: fuzzMethods[int(method)%len(fuzzMethods)],
		URL:    &url.URL{Path: path, RawQuery: query},
		Proto:  "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"application/json"}},
		Body:   io.NopCloser(bytes.NewReader(body)),
		Host:   "rowq.test",
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r = r.WithContext(ctx)
	w := httptest.NewRecorder()
	api.ServeHTTP(w, r)
	return w.Code, w.Body.Bytes()
}

// seedStore gives the fuzzed requests something to find: a queue with a
// routing, waiting, deferred and grabbed jobs, and failure log entries.
func seedStore(tb testing.TB, st store.Store) {
	ctx := context.Background()
	if _, err := st.QueuePut(ctx, &store.Queue{Name: "q", PollingInterval: 200, MaxWorkers: 20}); err != nil {
		tb.Fatal(err)
	}
	if _, err := st.RoutingPut(ctx, &store.Routing{JobCategory: "c", QueueName: "q"}); err != nil {
		tb.Fatal(err)
	}
	var ps []*store.JobInsertParams
	for i := range 20 {
		ps = append(ps, &store.JobInsertParams{Queue: "q", Category: "c", URL: "http://w/", Payload: []byte(fmt.Sprintf(`{"i":%d}`, i)),
			RunAfter: time.Duration(i%2) * time.Hour})
	}
	if _, err := st.JobsInsert(ctx, ps); err != nil {
		tb.Fatal(err)
	}
	jobs, err := st.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: "n", Limit: 6, Lease: time.Hour})
	if err != nil {
		tb.Fatal(err)
	}
	for _, j := range jobs[:3] {
		if _, err := st.JobFail(ctx, &store.JobFailParams{ID: j.ID, Node: "n", Status: "failure", Code: 500, Message: "x"}); err != nil {
			tb.Fatal(err)
		}
	}
}

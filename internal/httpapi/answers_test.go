package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/rowq/rowq/internal/auth"
	"github.com/rowq/rowq/internal/httpapi"
	"github.com/rowq/rowq/internal/metrics"
	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/backend"
	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/testworker"
)

var update = flag.Bool("update", false, "rewrite testdata/answers.golden from the server's answers")

const (
	goldenFile  = "testdata/answers.golden"
	openAPIFile = "../../docs/openapi.yaml"
	// specServer is the server openapi.yaml names: an answer's operation
	// is found by its path on it, whatever address the test serves on.
	specServer = "http://localhost:8080"
	// goldenAdmin is the admin token of the golden answers' API (every
	// request carries it unless the file says otherwise).
	goldenAdmin = "golden-admin-token-0123456789abcdef"
)

// masks hide what differs from run to run (times, cursors) or from
// database to database (a driver's words for a refused connection);
// answers keep their place.
var masks = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`"\d{4}-\d\d-\d\dT[^"]*"`), `"TIME"`},
	{regexp.MustCompile(`"next_cursor":"[^"]*"`), `"next_cursor":"CURSOR"`},
	{regexp.MustCompile(`cursor=[^&>]*`), `cursor=CURSOR`},
	{regexp.MustCompile(`retry later: (?:[^"\\\n]|\\.)*`), `retry later: DRIVER ERROR`},
}

// recordedHeaders are the headers the golden file shows when an answer
// has them.
var recordedHeaders = []string{"Allow", "Link", "Location", "Retry-After", "WWW-Authenticate"}

// TestAPI_AnswersByteForByte sends a request of every kind, good and bad,
// to an API on each database and to the dashboard served beside it
// (answers_dashboard_test.go), and compares the answers with
// testdata/answers.golden byte for byte (times, cursors and a driver's
// error words masked): field names, their order and which are present
// ("paused": false, "existing" only with a unique key), every error
// message and the headers that matter (Link, Allow, WWW-Authenticate,
// Retry-After). The three databases share the file: an answer that differs
// by database fails. Every answer must also match its operation's schema
// in docs/openapi.yaml for its status (the schemas are closed: a field the
// file does not name fails), and every status every operation documents
// must be answered at least once, so that a route or status added to the
// file without a case here fails. A change to an answer shows here;
// rewrite the file with -update only when the change is meant, and say so
// in docs/api.md.
func TestAPI_AnswersByteForByte(t *testing.T) {
	var (
		mu   sync.Mutex
		outs = map[string][]byte{}
	)
	t.Parallel()
	t.Cleanup(func() { compareGolden(t, outs) })
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		g := newGolden(t, dialect)
		g.run()
		g.checkCovered()
		mu.Lock()
		outs[dialect] = g.out.Bytes()
		mu.Unlock()
	})
}

// compareGolden compares each database's answers with the golden file;
// with -update, it writes SQLite's answers first.
func compareGolden(t *testing.T, outs map[string][]byte) {
	if *update && outs["sqlite"] != nil {
		if err := os.WriteFile(goldenFile, outs["sqlite"], 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(goldenFile)
	if err != nil {
		t.Fatalf("%v (run go test -run TestAPI_AnswersByteForByte -update to write it)", err)
	}
	for _, d := range dbtest.Dialects {
		got, ok := outs[d]
		if !ok || bytes.Equal(got, want) {
			continue // a database that failed before the end has said why
		}
		gl, wl := bytes.Split(got, []byte("\n")), bytes.Split(want, []byte("\n"))
		for i := range min(len(gl), len(wl)) {
			if !bytes.Equal(gl[i], wl[i]) {
				t.Errorf("%s: answers differ from %s at line %d:\n got: %s\nwant: %s", d, goldenFile, i+1, gl[i], wl[i])
				break
			}
		}
		if len(gl) != len(wl) {
			t.Errorf("%s: answers differ from %s: %d lines, want %d", d, goldenFile, len(gl), len(wl))
		}
	}
}

// golden is one database's run of the golden answers: the API, the
// tokens requests carry, and what was answered.
type golden struct {
	t      *testing.T
	b      *bundle
	tokens map[string]string // by the name the file shows; "" is the admin token, "none" no token
	router routers.Router
	doc    *openapi3.T
	out    bytes.Buffer
	// answered holds "METHOD /path/{param} STATUS" of every answer of a
	// documented operation.
	answered map[string]bool
	// label marks the requests of a phase in the file ("database down").
	label string
	// lease is a job leased to a worker, and its token: valid, so that
	// its heartbeat reaches the database.
	lease leasedJob
	// sessions are the dashboard's login sessions, by the name the file
	// shows ("reader session").
	sessions map[string]*uiSession
}

func newGolden(t *testing.T, dialect string) *golden {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromFile(openAPIFile)
	if err != nil {
		t.Fatalf("load %s: %v", openAPIFile, err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("%s is not valid OpenAPI: %v", openAPIFile, err)
	}
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	st := dbtest.Open(t, dialect)
	g := &golden{t: t, router: router, doc: doc, answered: map[string]bool{},
		tokens:   map[string]string{"": goldenAdmin, "none": "", "bad": "golden-unknown-token"},
		sessions: map[string]*uiSession{}}
	for _, sp := range []tokenSpec{
		{"reader", "read", ""}, {"enqueuer", "enqueue", ""}, {"worker", "work", ""},
		{"confined", "read,enqueue,locks,work,admin", "other-*"},
	} {
		g.tokens[sp.name] = createToken(t, st, sp)
	}
	v := auth.New(auth.Config{Tokens: st, Mode: auth.ModeOn, AdminToken: goldenAdmin})
	if err := v.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Stop(context.Background()) })
	var b *bundle
	b = setup(t, st, func(o *options) {
		goldenOptions(st)(o)
		o.api.Auth = v
		o.api.Pages = append(o.api.Pages, dashboardPages(st, v, func() *httpapi.API { return b.api })...)
	})
	g.b = b
	return g
}

// goldenOptions returns the options of a golden answers' API on st.
func goldenOptions(st store.Store) func(*options) {
	return func(o *options) {
		o.api.Pages = []httpapi.Page{{Pattern: "GET /metrics", Handler: metrics.Handler(metrics.Config{Store: st, Outbox: st, WorkerHosts: st, Version: "v-test"})}}
		o.api.Version = "v-test"
		o.api.Settings = map[string]string{"database-url": "sqlite://rowq.db"}
		o.api.MaxBodyBytes = 1 << 12
		o.api.MaxResult = 64 // a completion's result over it answers 413
		// A fixed key signs the same lease tokens on every run.
		o.disp.LeaseKey = []byte("golden-lease-key")
	}
}

// req sends a request with the admin token and records its answer.
func (g *golden) req(method, path, body string) *response { return g.as("", method, path, body) }

// as sends a request with the named token, records its answer and checks
// it against docs/openapi.yaml.
func (g *golden) as(who, method, path, body string) *response {
	g.t.Helper()
	res := g.b.doAs(g.t, g.tokens[who], method, path, body)
	g.record(who, method, path, body, res)
	contentType := ""
	if body != "" {
		contentType = "application/json"
	}
	g.check(method, path, body, contentType, res)
	return res
}

// record writes the request and its answer in the golden file's form.
func (g *golden) record(who, method, path, body string, res *response) {
	var tags []string
	if who != "" {
		tags = append(tags, "as "+who)
	}
	if g.label != "" {
		tags = append(tags, g.label)
	}
	if len(body) > 200 {
		body = fmt.Sprintf("(%d bytes)", len(body))
	}
	fmt.Fprintf(&g.out, "%s %s %s", method, path, body)
	if len(tags) > 0 {
		fmt.Fprintf(&g.out, " (%s)", strings.Join(tags, ", "))
	}
	fmt.Fprintf(&g.out, "\n  -> %d", res.status)
	for _, h := range recordedHeaders {
		if v := res.header.Get(h); v != "" {
			fmt.Fprintf(&g.out, " %s: %s", h, v)
		}
	}
	if names := cookieNames(res.header); names != "" {
		fmt.Fprintf(&g.out, " Set-Cookie: %s", names)
	}
	s := string(res.body) // JSON ends in a newline
	ct := res.header.Get("Content-Type")
	switch {
	case res.status >= 300 && res.status < 400:
		g.out.WriteString("\n") // a redirect: its Location says it all
		return
	case ct != "application/json":
		fmt.Fprintf(&g.out, " Content-Type: %s", ct)
		s = g.shape(ct, res.body)
	}
	for _, m := range masks {
		s = m.re.ReplaceAllString(s, m.with)
	}
	fmt.Fprintf(&g.out, " %s", s)
}

// shape describes an answer that is not JSON by what holds from run to
// run and from database to database: Prometheus' text by the rowq
// families it declares, each sample line checked to parse; a dashboard
// page by its markers (page); the dashboard's style sheet and script by
// nothing but being there. The API answers no other type.
func (g *golden) shape(contentType string, body []byte) string {
	switch {
	case strings.HasPrefix(contentType, "text/html"):
		return g.page(body)
	case strings.HasPrefix(contentType, "text/css"), strings.HasPrefix(contentType, "text/javascript"):
		if len(body) == 0 {
			g.t.Errorf("an empty answer of type %q", contentType)
		}
		return "(the dashboard's file)\n"
	}
	if !strings.HasPrefix(contentType, "text/plain") {
		g.t.Errorf("an answer of type %q: the golden file has no shape for it", contentType)
		return fmt.Sprintf("(%s)\n", contentType)
	}
	var families []string
	for line := range strings.Lines(string(body)) {
		line = strings.TrimSuffix(line, "\n")
		if name, ok := strings.CutPrefix(line, "# TYPE "); ok {
			if strings.HasPrefix(name, "rowq_") {
				families = append(families, name)
			}
			continue
		}
		if strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 {
			g.t.Errorf("metrics: sample line %q has no value", line)
			continue
		}
		if _, err := strconv.ParseFloat(f[len(f)-1], 64); err != nil {
			g.t.Errorf("metrics: sample line %q: value: %v", line, err)
		}
	}
	slices.Sort(families)
	return "families:\n    " + strings.Join(families, "\n    ") + "\n"
}

// check finds the answer's operation in docs/openapi.yaml, notes its
// status as answered, and validates the answer (and a request that
// succeeded) against the operation.
func (g *golden) check(method, path, body, contentType string, res *response) {
	t := g.t
	t.Helper()
	req, err := http.NewRequest(method, specServer+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	route, params, err := g.router.FindRoute(req)
	if err != nil {
		// No operation: the API's own 404 or 405.
		if res.status != http.StatusNotFound && res.status != http.StatusMethodNotAllowed {
			t.Errorf("%s %s: %d from no documented operation (%v)", method, path, res.status, err)
		}
		return
	}
	g.answered[route.Method+" "+route.Path+" "+strconv.Itoa(res.status)] = true
	opts := &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true,
		AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: opts}
	if res.status < 300 {
		if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
			t.Errorf("%s %s: request does not match docs/openapi.yaml: %v", method, path, err)
		}
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: res.status, Header: res.header,
		Body: io.NopCloser(bytes.NewReader(res.body)), Options: opts}
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		t.Errorf("%s %s: %d answer does not match docs/openapi.yaml: %v\nbody: %s", method, path, res.status, err, res.body)
	}
}

// checkCovered fails for every status of every operation in
// docs/openapi.yaml that no request answered.
func (g *golden) checkCovered() {
	var missing []string
	for path, item := range g.doc.Paths.Map() {
		for method, op := range item.Operations() {
			for status := range op.Responses.Map() {
				if k := method + " " + path + " " + status; !g.answered[k] {
					missing = append(missing, k)
				}
			}
		}
	}
	slices.Sort(missing)
	for _, k := range missing {
		if unreachable[k] != "" {
			continue
		}
		g.t.Errorf("%s: documented, but no golden answer has it: add a case to TestAPI_AnswersByteForByte", k)
	}
}

// unreachable are the documented answers no request can get from a
// database rowq wrote, and why; the API still answers them if a database
// edited by hand holds what they need.
var unreachable = map[string]string{
	"POST /queue/{name}/failed/{id}/retry 409": "two failure log entries of one job id, or an entry whose job id is pending",
	"POST /queue/{name}/failed/retry 409":      "two failure log entries of one job id, or an entry whose job id is pending",
	// The dashboard's buttons answer what the API answers them.
	"POST /ui/queue/{name}/failed/{id}/retry 409": "two failure log entries of one job id, or an entry whose job id is pending",
	"POST /ui/queue/{name}/failed/retry 409":      "two failure log entries of one job id, or an entry whose job id is pending",
}

// run sends every request of the golden file, in the order it holds them.
func (g *golden) run() {
	g.queues()
	g.routings()
	g.enqueue()
	g.batches()
	g.jobs()
	g.failures()
	g.stats()
	g.locks()
	g.schedules()
	g.nodeAndCleanup()

	g.errorAnswers()
	g.outbox()
	g.leases()
	g.finished()
	g.authAnswers()
	g.tooLarge()
	g.databaseDown()
	g.dashboard()
	g.flows()
}

// queues creates, reads, pauses and wakes queues, good and bad.
func (g *golden) queues() {
	req := g.req
	req("PUT", "/queue/q", "")
	req("PUT", "/queue/q2", `{"max_dispatches_per_second":5,"max_burst_size":3,"paused":true,"polling_interval":10,"max_workers":3}`)
	req("PUT", "/queue/q3", `{"max_workers":0}`)
	req("PUT", "/queue/q3", `{"max_workers":"x"}`)
	req("PUT", "/queue/q3", `{"paused":1}`)
	req("PUT", "/queue/q3", `{"max_dispatches_per_second":"x"}`)
	req("PUT", "/queue/q3", `{"bogus":1}`)
	req("PUT", "/queue/q3", `[1]`)
	req("GET", "/queues", "")
	req("GET", "/queue/q", "")
	req("GET", "/queue/q2", "")
	req("GET", "/queue/nope", "")
	req("GET", "/queue/q/node", "")
	req("POST", "/queue/q2/resume", "")
	req("POST", "/queue/q2/pause", "{}")
	req("POST", "/queue/q/wake", `{"settings":true}`)
	req("POST", "/queue/q/wake", `{"settings":1}`)
}

// routings creates and reads routings, good and bad.
func (g *golden) routings() {
	req := g.req
	req("PUT", "/routing/c", `{"queue_name":"q"}`)
	req("PUT", "/routing/c2", `{"queue_name":"q2"}`)
	req("PUT", "/routing/c3", `{}`)
	req("PUT", "/routing/c3", `{"queue_name":5}`)
	req("GET", "/routings", "")
	req("GET", "/routing/c", "")
	req("GET", "/routing/zz", "")
}

// enqueue enqueues single jobs, good and bad.
func (g *golden) enqueue() {
	req := g.req
	req("POST", "/job/c", `{"url":"http://w/x"}`)
	req("POST", "/job/c", `{"url":"http://w/x","payload":"str","run_after":100,"max_retries":3,"retry_delay":4,"timeout":5}`)
	req("POST", "/job/c", `{"url":"http://w/x","payload":{"a":1},"priority":7,"retry_backoff":"exponential","retry_delay":2,"retry_delay_max":60,"retry_jitter":0.5}`)
	req("POST", "/job/c", `{"url":"http://w/x","payload":null,"unique_key":"k1"}`)
	req("POST", "/job/c", `{"url":"http://w/y","unique_key":"k1"}`)
	req("POST", "/job/c", `{"url":"http://w/x","retry_delay":"x"}`)
	req("POST", "/job/c", `{"url":"http://w/x","retry_jitter":"x"}`)
	req("POST", "/job/c", `{"url":"http://w/x","unique_key":5}`)
	req("POST", "/job/c", `{"url":"http://w/x","max_retries":1e30}`)
	req("POST", "/job/c", `{"url":"http://w/x","max_retries":1.5}`)
	req("POST", "/job/c", `{"url":"http://w/x","max_retries":-1}`)
	req("POST", "/job/c", `{"url":"http://w/x","retry_delay_max":5}`)
	req("POST", "/job/c", `{"url":5}`)
	req("POST", "/job/c", `{}`)
	req("POST", "/job/c", ``)
	req("POST", "/job/c", `null`)
	req("POST", "/job/c", `{"url":"http://w/x","x":1}`)
}

// batches enqueues batches of jobs, good and bad.
func (g *golden) batches() {
	req := g.req
	req("POST", "/jobs", `{"jobs":[{"category":"c","url":"http://w/1"},{"category":"c2","url":"http://w/2","run_after":50,"payload":[1]}]}`)
	req("POST", "/jobs", `{"jobs":[{"category":"c","url":"http://w/1","unique_key":"k1"},{"category":"c","url":"http://w/2","unique_key":"k2"}]}`)
	req("POST", "/jobs", `{"jobs":[{"category":"c","url":"http://w/1"},{"category":"c","url":"http://w/1","retry_delay":"x"}]}`)
	req("POST", "/jobs", `{"jobs":[{"category":"c","url":"http://w/1"},{"category":"c","url":"http://w/1","retry_jitter":"x"}]}`)
	req("POST", "/jobs", `{"jobs":[{"category":"c","url":"http://w/1"},{"category":"c","url":"http://w/1","unique_key":[]}]}`)
	req("POST", "/jobs", `{"jobs":[{"category":"c","url":"http://w/1"},{"category":"c","url":"http://w/1","category":5}]}`)
	req("POST", "/jobs", `{"jobs":[{"category":"c"},{"category":"c","url":"http://w/1"}]}`)
	req("POST", "/jobs", `{"jobs":[{"category":"c","url":"http://w/1"},null]}`)
	req("POST", "/jobs", `{"jobs":[{"category":"c","url":"http://w/1"},5]}`)
	req("POST", "/jobs", `{"jobs":[{"category":"c","url":"http://w/1"},{"category":"c","url":"http://w/1","zz":1}]}`)
	req("POST", "/jobs", `{"jobs":[{"category":"c","url":"http://w/1"},{"category":"c","url":"http://w/1"} x]}`)
	req("POST", "/jobs", `{"jobs":[]}`)
	req("POST", "/jobs", `{"jobs":5}`)
	req("POST", "/jobs", `{"jobs":[{"url":"http://w/1"}]}`)
}

// jobs lists, reads and deletes the enqueued jobs.
func (g *golden) jobs() {
	req := g.req
	req("GET", "/queue/q/waiting", "")
	req("GET", "/queue/q/waiting?limit=1", "")
	req("GET", "/queue/q/deferred?order=asc", "")
	req("GET", "/queue/q/grabbed", "")
	req("GET", "/queue/q/job/1", "")
	req("DELETE", "/queue/q/job/2", "")
	req("GET", "/queue/q/job/2", "")
}

// failures lists, reads, retries and deletes failure log entries.
func (g *golden) failures() {
	t, b := g.t, g.b
	req := g.req
	req("GET", "/queue/q/failed", "")
	fs := failEntries(t, b.st, "q", 3)
	req("GET", "/queue/q/failed", "")
	req("GET", "/queue/q/failed?limit=1&order=created", "")
	req("GET", fmt.Sprintf("/queue/q/failed/%d", fs[0].ID), "")
	req("DELETE", fmt.Sprintf("/queue/q/failed/%d", fs[0].ID), "")
	req("POST", fmt.Sprintf("/queue/q/failed/%d/retry", fs[1].ID), "")
	req("POST", "/queue/q/failed/retry", `{"ids":[99999]}`)
	req("POST", "/queue/q/failed/retry", `{"ids":["x"]}`)
	req("DELETE", "/queue/q/failed", "")
}

// stats reads a queue's and every queue's stats.
func (g *golden) stats() {
	req := g.req
	req("GET", "/queue/q/stats", "")
	req("GET", "/queues/stats", "")
}

// locks acquires, renews, reads and releases locks, good and bad.
func (g *golden) locks() {
	req := g.req
	req("PUT", "/lock/l", `{"owner":"a","ttl":10}`)
	req("PUT", "/lock/l", `{"owner":"b","ttl":10}`)
	req("PUT", "/lock/l", `{"owner":"b","ttl":"x"}`)
	req("PUT", "/lock/l", `{"owner":5,"ttl":1}`)
	req("PUT", "/lock/l", `{"owner":"b","ttl":1,"limit":"x"}`)
	req("PUT", "/lock/l", `{"owner":"b","ttl":1,"limit":0}`)
	req("PUT", "/lock/s", `{"owner":"b","ttl":60.5,"wait":0,"limit":3}`)
	req("POST", "/lock/l/renew", `{"owner":"a","token":1,"ttl":20}`)
	req("POST", "/lock/l/renew", `{"owner":"a","token":99,"ttl":20}`)
	req("POST", "/lock/l/renew", `{"owner":"a","token":"x","ttl":20}`)
	req("GET", "/lock/l", "")
	req("GET", "/lock/free", "")
	req("GET", "/locks", "")
	req("GET", "/locks?limit=1", "")
	req("DELETE", "/lock/l?owner=a&token=1", "")
	req("DELETE", "/lock/l?owner=a&token=1", "")
}

// schedules creates, reads, acts on and deletes schedules, good and bad.
func (g *golden) schedules() {
	req := g.req
	req("PUT", "/schedule/s", `{"cron":"0 3 * * *","category":"c","url":"http://w/s"}`)
	req("PUT", "/schedule/s2", `{"cron":"0 3 * * *","timezone":"Europe/Berlin","category":"c","url":"http://w/s","payload":{"k":1},"max_retries":2,"retry_delay":3,"timeout":4,"misfire":"all","max_catchup":5,"overlap":"skip","paused":true}`)
	req("PUT", "/schedule/s3", `{"cron":"0 3 * * *","category":"c","url":"http://w/s","max_catchup":"x"}`)
	req("PUT", "/schedule/s3", `{"cron":"0 3 * * *","category":"c","url":"http://w/s","paused":"x"}`)
	req("PUT", "/schedule/s3", `{"cron":"0 3 * * *","category":"c","url":"http://w/s","max_catchup":0}`)
	req("PUT", "/schedule/s3", `{"cron":5}`)
	req("GET", "/schedule/s", "")
	req("GET", "/schedules", "")
	req("GET", "/schedules?limit=1", "")
	req("POST", "/schedule/s/pause", "")
	req("POST", "/schedule/s/resume", "")
	req("POST", "/schedule/s/trigger", "")
	req("GET", "/schedule/s/runs", "")
	req("DELETE", "/schedule/s2", "")
}

// nodeAndCleanup reads the node's own answers, deletes a routing and a queue, and asks for a path the API does not serve.
func (g *golden) nodeAndCleanup() {
	req := g.req
	req("GET", "/version", "")
	req("GET", "/healthz", "")
	req("GET", "/settings", "")
	req("DELETE", "/routing/c2", "")
	req("DELETE", "/queue/q2", "")
	req("GET", "/nowhere", "")
}

// errorAnswers sends a bad name or id, or a name of nothing, to every
// operation that takes one.
func (g *golden) errorAnswers() {
	req := g.req
	for _, l := range []string{"waiting", "deferred", "grabbed", "failed"} {
		req("GET", "/queue/q/"+l+"?limit=0", "")
		req("GET", "/queue/q/"+l+"?order=up", "")
		req("GET", "/queue/nope/"+l, "")
	}
	for _, p := range []string{"job", "failed"} {
		for _, m := range []string{"GET", "DELETE"} {
			req(m, "/queue/q/"+p+"/x", "")
			req(m, "/queue/q/"+p+"/999999", "")
		}
	}
	req("POST", "/queue/q/failed/x/retry", "")
	req("POST", "/queue/q/failed/999999/retry", "")
	req("DELETE", "/queue/q/failed", `{"ids":"x"}`)
	for _, r := range []struct{ method, path string }{
		{"GET", "/queue/%s"}, {"GET", "/queue/%s/node"}, {"GET", "/queue/%s/stats"},
		{"POST", "/queue/%s/pause"}, {"POST", "/queue/%s/resume"},
	} {
		req(r.method, fmt.Sprintf(r.path, "-%20"), "")
		req(r.method, fmt.Sprintf(r.path, "nope"), "")
	}
	req("DELETE", "/queue/-%20", "")
	req("DELETE", "/queue/nope", "")
	req("GET", "/queues?limit=0", "")
	req("GET", "/queues?limit=1", "")
	req("GET", "/routing/a%20b", "")
	req("DELETE", "/routing/a%20b", "")
	req("DELETE", "/routing/nope", "")
	req("PUT", "/routing/x", `{"queue_name":"nope"}`)
	req("POST", "/job/nope", `{"url":"http://w/x"}`)
	req("POST", "/jobs", `{"jobs":[{"category":"nope","url":"http://w/x"}]}`)
	req("GET", "/lock/bad%20name", "")
	req("DELETE", "/lock/l", "")
	req("DELETE", "/lock/l?owner=a&token=x", "")
	req("GET", "/locks?limit=0", "")
	req("GET", "/schedules?limit=0", "")
	req("GET", "/schedule/nope", "")
	req("GET", "/schedule/bad%20name", "")
	req("DELETE", "/schedule/nope", "")
	req("GET", "/schedule/s/runs?limit=0", "")
	req("GET", "/schedule/nope/runs", "")
	for _, a := range []string{"pause", "resume", "trigger"} {
		req("POST", "/schedule/nope/"+a, "")
		req("POST", "/schedule/bad%20name/"+a, "")
	}
	req("PUT", "/schedule/bad%20name", `{"cron":"0 3 * * *","category":"c","url":"http://w/s"}`)
}

// outbox stores two outbox rows that are not valid jobs as rejects, as
// the outbox's mover does, and lists them.
func (g *golden) outbox() {
	t, st := g.t, g.b.st
	url, bad := "http://w/o", "not json"
	if err := st.OutboxInsert(t.Context(), []*store.OutboxRow{{Category: "c"}, {Category: "c", URL: &url, Payload: &bad}}); err != nil {
		t.Fatal(err)
	}
	rows, err := st.OutboxRead(t.Context(), 10)
	if err != nil {
		t.Fatal(err)
	}
	p := &store.OutboxMoveParams{}
	for _, r := range rows {
		p.Rejects = append(p.Rejects, store.OutboxRejectParams{Row: r, Reason: "not a job"})
	}
	if _, err := st.OutboxMove(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	g.req("GET", "/outbox/rejects", "")
	next := g.req("GET", "/outbox/rejects?limit=1", "")
	g.req("GET", "/outbox/rejects?limit=1&cursor="+nextCursor(t, next.body), "")
	g.req("GET", "/outbox/rejects?cursor=nope", "")
	g.req("GET", "/outbox/rejects?limit=0", "")
}

// leases starts the dispatcher, so that this node leads the queues, and
// leases, renews, completes and cancels jobs of a pull queue. The push
// queue q is paused first: its jobs, which no worker would take, stay as
// they are.
func (g *golden) leases() {
	t, req := g.t, g.req
	req("POST", "/queue/q/pause", "")
	req("PUT", "/queue/pq", `{"delivery":"pull","max_workers":2}`)
	req("PUT", "/routing/pc", `{"queue_name":"pq"}`)
	for i := range 3 {
		req("POST", "/job/pc", fmt.Sprintf(`{"payload":{"n":%d}}`, i))
	}
	if err := g.b.disp.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	testworker.WaitFor(t, 30*time.Second, "this node leads every queue", func() bool {
		var nodes struct {
			Nodes []struct {
				Queues int `json:"queues"`
			} `json:"nodes"`
			Queues int `json:"queues"`
		}
		err := json.Unmarshal(g.b.doAs(t, goldenAdmin, "GET", "/nodes", "").body, &nodes)
		return err == nil && len(nodes.Nodes) == 1 && nodes.Nodes[0].Queues == nodes.Queues
	})
	req("GET", "/nodes", "")
	req("GET", "/queue/pq/node", "")
	req("GET", "/queue/q/node", "")

	first := leased(t, req("POST", "/queue/pq/lease", `{"max":1,"wait":10,"lease":30}`).body)
	g.lease = first
	second := leased(t, req("POST", "/queue/pq/lease", `{"max":1,"wait":10,"lease":30}`).body)
	beat := func(id int64, body string) { req("POST", fmt.Sprintf("/job/%d/heartbeat", id), body) }
	complete := func(id int64, body string) { req("POST", fmt.Sprintf("/job/%d/complete", id), body) }
	beat(first.ID, `{"lease_token":"`+first.LeaseToken+`","lease":120,"progress":0.5,"message":"half"}`)
	req("GET", fmt.Sprintf("/queue/pq/job/%d", first.ID), "")
	req("GET", "/queue/pq/grabbed", "")
	beat(first.ID, `{"lease_token":"`+first.LeaseToken+`","lease":0}`)
	beat(first.ID, `{"lease_token":"`+first.LeaseToken+`"}`)
	beat(first.ID, `{"lease_token":"nope","lease":10}`)
	beat(first.ID, `{"lease":10}`)
	beat(first.ID, `{"lease_token":"`+second.LeaseToken+`","lease":10}`)
	beat(first.ID, `{"lease_token":"`+first.LeaseToken+`","lease":10,"progress":2}`)
	done := `{"lease_token":"` + first.LeaseToken + `","status":"success","message":"ok"}`
	complete(first.ID, done)
	complete(first.ID, done)
	complete(first.ID, `{"lease_token":"`+first.LeaseToken+`","status":"failure"}`)
	beat(first.ID, `{"lease_token":"`+first.LeaseToken+`","lease":10}`)
	complete(second.ID, `{"lease_token":"`+second.LeaseToken+`","status":"done"}`)
	complete(second.ID, `{"lease_token":"`+second.LeaseToken+`","status":"success","retry_after":5}`)
	complete(second.ID, `{"status":"success"}`)
	// A job cancelled while its worker holds it: the worker learns at
	// its next heartbeat.
	req("POST", fmt.Sprintf("/queue/pq/job/%d/cancel", second.ID), "")
	req("POST", fmt.Sprintf("/queue/pq/job/%d/cancel", second.ID), "")
	beat(second.ID, `{"lease_token":"`+second.LeaseToken+`","lease":10}`)
	complete(second.ID, `{"lease_token":"`+second.LeaseToken+`","status":"failure","retry_after":1}`)
	req("POST", "/queue/pq/job/x/cancel", "")
	req("POST", "/queue/pq/job/1/cancel", `{"x":1}`)
	req("POST", "/queue/nope/job/1/cancel", "")
	// The third job is left waiting: a lease request takes it (a wait
	// returns as soon as it has a job), and none is left for the next.
	req("POST", "/queue/pq/lease", `{"wait":10}`)
	req("POST", "/queue/pq/lease", "")
	req("POST", "/queue/pq/lease", `{"max":101}`)
	req("POST", "/queue/pq/lease", `{"wait":-1}`)
	req("POST", "/queue/pq/lease", `{"lease":0}`)
	req("POST", "/queue/pq/lease", `{"max":1,"wait":0}`)
	req("POST", "/queue/q/lease", "")
	req("POST", "/queue/nope/lease", "")
	req("POST", "/queue/-%20/lease", "")
	req("GET", "/queue/pq/stats", "")
	req("GET", "/metrics", "")
}

// finished keeps the history of a pull queue with keep_finished: a
// success with its result, a failure for good, a cancel; reads them one
// by one and pages them, good and bad; a result over --max-result-bytes
// and one on a failure.
func (g *golden) finished() {
	t, req := g.t, g.req
	req("PUT", "/queue/hq", `{"delivery":"pull","keep_finished":-1}`)
	req("PUT", "/queue/hq", `{"delivery":"pull","keep_finished":"1h"}`)
	req("PUT", "/queue/hq", `{"delivery":"pull","keep_finished":3600}`)
	req("PUT", "/routing/hc", `{"queue_name":"hq"}`)
	req("GET", "/queue/hq", "")
	for i := range 2 {
		req("POST", "/job/hc", fmt.Sprintf(`{"payload":{"n":%d}}`, i))
	}
	later := req("POST", "/job/hc", `{"payload":"later","run_after":3600}`)
	var id struct{ ID int64 }
	if err := json.Unmarshal(later.body, &id); err != nil {
		t.Fatal(err)
	}
	testworker.WaitFor(t, 30*time.Second, "this node leads queue hq", func() bool {
		return g.b.doAs(t, goldenAdmin, "GET", "/queue/hq/node", "").status == http.StatusOK
	})
	first := leased(t, req("POST", "/queue/hq/lease", `{"max":1,"wait":10,"lease":30}`).body)
	second := leased(t, req("POST", "/queue/hq/lease", `{"max":1,"wait":10,"lease":30}`).body)
	complete := func(j leasedJob, body string) {
		req("POST", fmt.Sprintf("/job/%d/complete", j.ID), `{"lease_token":"`+j.LeaseToken+`",`+body+`}`)
	}
	complete(first, `"status":"success","result":"`+strings.Repeat("r", 100)+`"`)
	complete(first, `"status":"failure","result":{"a":1}`)
	complete(first, `"status":"success","message":"done","result":{"rows":[1,2]}`)
	complete(second, `"status":"permanent-failure","message":"bad input"`)
	req("POST", fmt.Sprintf("/queue/hq/job/%d/cancel", id.ID), "")
	for _, id := range []int64{first.ID, second.ID, id.ID} {
		req("GET", fmt.Sprintf("/queue/hq/job/%d", id), "")
	}
	page := req("GET", "/queue/hq/finished?limit=2", "")
	// The cursor holds a time: the file shows it masked.
	path := "/queue/hq/finished?limit=2&cursor=" + url.QueryEscape(nextCursor(t, page.body))
	res := g.b.doAs(t, goldenAdmin, "GET", path, "")
	g.record("", "GET", "/queue/hq/finished?limit=2&cursor=CURSOR", "", res)
	g.check("GET", path, "", "", res)
	req("GET", "/queue/hq/finished?status=failed&category=hc", "")
	req("GET", "/queue/hq/finished?since=2000-01-01T00:00:00Z&until=2000-01-02T00:00:00Z", "")
	req("GET", "/queue/hq/finished?status=done", "")
	req("GET", "/queue/hq/finished?category=a%20b", "")
	req("GET", "/queue/hq/finished?since=yesterday", "")
	req("GET", "/queue/hq/finished?until=tomorrow", "")
	req("GET", "/queue/hq/finished?limit=0", "")
	req("GET", "/queue/hq/finished?cursor=abc", "")
	req("GET", "/queue/nope/finished", "")
	req("GET", "/queue/q/finished", "")
}

// leasedJob is the part of a lease request's answer the cases use.
type leasedJob struct {
	ID         int64  `json:"id"`
	LeaseToken string `json:"lease_token"`
}

// leased returns the one job of a lease request's answer.
func leased(t *testing.T, body []byte) leasedJob {
	t.Helper()
	var page struct{ Jobs []leasedJob }
	if err := json.Unmarshal(body, &page); err != nil || len(page.Jobs) != 1 {
		t.Fatalf("leased %s, want one job", body)
	}
	return page.Jobs[0]
}

// nextCursor returns a page's next_cursor.
func nextCursor(t *testing.T, body []byte) string {
	t.Helper()
	var page struct {
		NextCursor string `json:"next_cursor"`
	}
	if err := json.Unmarshal(body, &page); err != nil || page.NextCursor == "" {
		t.Fatalf("no next_cursor in %s", body)
	}
	return page.NextCursor
}

// authAnswers sends every documented operation without a token (401) and
// with a token that lacks its scope or its queue (403).
func (g *golden) authAnswers() {
	ops := g.operations(false)
	for _, op := range ops {
		g.as("none", op.method, op.path, op.body)
	}
	// A token of the read scope lacks every other; one of the enqueue
	// scope lacks read.
	for _, op := range ops {
		if !op.statuses["403"] {
			continue
		}
		who := "reader"
		if op.method == "GET" {
			who = "enqueuer"
		}
		g.as(who, op.method, op.path, op.body)
	}
	// A token confined to other-* queues: refused by the path's queue,
	// by the routed queue, by the job's queue, by a route that shows
	// every queue.
	for _, r := range []struct{ method, path, body string }{
		{"GET", "/queue/q", ""},
		{"POST", "/job/c", `{"url":"http://w/x"}`},
		{"PUT", "/routing/c", `{"queue_name":"q"}`},
		{"GET", "/settings", ""},
		{"GET", "/metrics", ""},
		{"GET", "/lock/l", ""},
		{"GET", "/schedule/s", ""},
		{"GET", "/outbox/rejects", ""},
		{"GET", "/batches", ""},
	} {
		g.as("confined", r.method, r.path, r.body)
	}
	g.as("confined", "GET", "/queues", "")
	g.as("worker", "GET", "/queue/q", "")
}

// tooLarge sends a body over the API's limit to every operation that
// takes one.
func (g *golden) tooLarge() {
	big := `{"url":"http://w/x","payload":"` + strings.Repeat("x", 5000) + `"}`
	for _, op := range g.operations(false) {
		if op.body != "" {
			g.req(op.method, op.path, big)
		}
	}
}

// databaseDown sends a valid request to every operation, on an API whose
// database does not answer (authentication off: the tokens are in the
// database too).
func (g *golden) databaseDown() {
	t := g.t
	up := g.b
	defer func() { g.b, g.label = up, "" }()
	down := unreachableStore(t, up.st.Dialect())
	g.b = setup(t, down, goldenOptions(down))
	g.label = "database down"
	for _, op := range g.operations(false) {
		path, body := op.path, downBodies[op.method+" "+op.pattern]
		if strings.HasPrefix(op.pattern, "/job/{id}/") {
			path = strings.Replace(op.pattern, "{id}", strconv.FormatInt(g.lease.ID, 10), 1)
			body = strings.Replace(body, "TOKEN", g.lease.LeaseToken, 1)
		}
		if op.method == "DELETE" && op.pattern == "/lock/{name}" {
			path += "?owner=a&token=1"
		}
		g.req(op.method, path, body)
	}
}

// unreachableStore opens a store of the dialect on a server that refuses
// connections, or a SQLite file in a directory that does not exist.
func unreachableStore(t *testing.T, dialect string) store.Store {
	t.Helper()
	urls := map[string]string{
		"mysql":    "mysql://root@127.0.0.1:1/x",
		"postgres": "postgres://postgres@127.0.0.1:1/x?sslmode=disable&connect_timeout=2",
		"sqlite":   "sqlite://" + filepath.Join(t.TempDir(), "missing", "rowq.db"),
	}
	st, err := backend.Open(urls[dialect])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// operation is a documented operation with a path to send it to and the
// statuses it documents.
type operation struct {
	method, pattern, path string
	body                  string // for the 401s and 403s: refused before it is read
	statuses              map[string]bool
}

// operations returns docs/openapi.yaml's operations in order, each with a
// path and bodies to send it: the API's, or with dashboard the
// dashboard's (whose pages and forms answers_dashboard_test.go sends).
func (g *golden) operations(dashboard bool) []operation {
	paths := strings.NewReplacer("{name}", "q", "{category}", "c", "{id}", "1")
	var ops []operation
	for _, path := range g.doc.Paths.InMatchingOrder() {
		if strings.HasPrefix(path, "/ui") != dashboard {
			continue
		}
		for method, o := range g.doc.Paths.Value(path).Operations() {
			op := operation{method: method, pattern: path, path: paths.Replace(path), statuses: map[string]bool{}}
			for s := range o.Responses.Map() {
				op.statuses[s] = true
			}
			if method == "POST" || method == "PUT" || o.RequestBody != nil {
				op.body = "{}"
			}
			ops = append(ops, op)
		}
	}
	slices.SortFunc(ops, func(a, b operation) int { return strings.Compare(a.method+" "+a.path, b.method+" "+b.path) })
	return ops
}

// downBodies are valid bodies of the operations that need one, sent when
// the database is down (TOKEN: the lease token of golden.lease).
var downBodies = map[string]string{
	"POST /job/{category}":            `{"url":"http://w/x"}`,
	"POST /job/{id}/heartbeat":        `{"lease_token":"TOKEN","lease":10}`,
	"POST /job/{id}/complete":         `{"lease_token":"TOKEN","status":"success"}`,
	"PUT /routing/{category}":         `{"queue_name":"q"}`,
	"PUT /lock/{name}":                `{"owner":"a","ttl":10}`,
	"POST /lock/{name}/renew":         `{"owner":"a","token":1,"ttl":10}`,
	"POST /jobs":                      `{"jobs":[{"category":"c","url":"http://w/x"}]}`,
	"PUT /schedule/{name}":            `{"cron":"0 3 * * *","category":"c","url":"http://w/s"}`,
	"POST /queue/{name}/failed/retry": `{"ids":[1]}`,
}

package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/rowq/rowq/internal/config"
	"github.com/rowq/rowq/internal/server"
	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/testworker"
)

const openAPIFile = "../../docs/openapi.yaml"

func loadOpenAPI(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromFile(openAPIFile)
	if err != nil {
		t.Fatalf("load %s: %v", openAPIFile, err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("%s is not valid OpenAPI: %v", openAPIFile, err)
	}
	return doc
}

// documentedOperations returns "METHOD /path" for every operation of doc.
func documentedOperations(doc *openapi3.T) []string {
	var ops []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			ops = append(ops, method+" "+path)
		}
	}
	slices.Sort(ops)
	return ops
}

// TestOpenAPI_DocumentsEveryRoute checks that every route httpapi registers
// is in docs/openapi.yaml and that the file documents no other.
func TestOpenAPI_DocumentsEveryRoute(t *testing.T) {
	t.Parallel()
	doc := loadOpenAPI(t)
	routes := startNode(t, dbtest.URL(t, "sqlite"), nil).Routes()
	documented := documentedOperations(doc)
	for _, r := range routes {
		if !slices.Contains(documented, r) {
			t.Errorf("route %q is served but not documented in docs/openapi.yaml: add its path and schemas", r)
		}
	}
	for _, d := range documented {
		if !slices.Contains(routes, d) {
			t.Errorf("docs/openapi.yaml documents %q, which the API does not serve", d)
		}
	}
}

// contract sends requests to a node and checks each answer (and each
// request expected to succeed) against docs/openapi.yaml.
type contract struct {
	t      *testing.T
	node   *server.Server
	router routers.Router
	mu     sync.Mutex
	ok     map[string]bool // operations seen answering 2xx
}

// call sends the request, checks that the status is want and that the
// answer matches the operation's documented answer for that status, and
// returns the body.
func (c *contract) call(method, path, body string, want int) []byte {
	c.t.Helper()
	h := http.Header{}
	if body != "" {
		h.Set("Content-Type", "application/json")
	}
	return c.send(method, path, body, h, want)
}

// send is call with the request's headers; a redirect is an answer, not
// followed.
func (c *contract) send(method, path, body string, header http.Header, want int) []byte {
	t := c.t
	t.Helper()
	url := "http://" + c.node.Addr() + path
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = header
	res, err := noRedirects.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	got, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != want {
		t.Fatalf("%s %s: status %d, want %d; body %s", method, path, res.StatusCode, want, got)
	}

	vreq, _ := http.NewRequest(method, url, strings.NewReader(body))
	vreq.Header = req.Header.Clone()
	route, params, err := c.router.FindRoute(vreq)
	if err != nil {
		t.Fatalf("%s %s: no operation in docs/openapi.yaml: %v", method, path, err)
	}
	ctx := context.Background()
	in := &openapi3filter.RequestValidationInput{
		Request: vreq, PathParams: params, Route: route,
		// The node runs with authentication off (no token exists): the
		// requests carry none. TestAuth_EveryRouteHasADecision checks the
		// documented 401 and 403 answers.
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true,
			AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
	}
	if want < 400 {
		// Only requests meant to succeed (or to redirect, as the
		// dashboard's forms do) must match the documented request.
		if err := openapi3filter.ValidateRequest(ctx, in); err != nil {
			t.Errorf("%s %s: request does not match docs/openapi.yaml: %v", method, path, err)
		}
		c.mu.Lock()
		c.ok[route.Method+" "+route.Path] = true
		c.mu.Unlock()
	}
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: res.StatusCode, Header: res.Header,
		Body: io.NopCloser(bytes.NewReader(got)), Options: in.Options,
	}
	if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
		t.Errorf("%s %s: %d answer does not match docs/openapi.yaml: %v\nbody: %s", method, path, res.StatusCode, err, got)
	}
	return got
}

// TestOpenAPI_RealAnswersMatch calls every endpoint on a running node of
// each dialect, with good and bad input, and validates every answer
// against docs/openapi.yaml.
func init() {
	// The dashboard's pages and style sheet: checked as text against a
	// string schema.
	asText := func(body io.Reader, _ http.Header, _ *openapi3.SchemaRef, _ openapi3filter.EncodingFn) (any, error) {
		b, err := io.ReadAll(body)
		return string(b), err
	}
	openapi3filter.RegisterBodyDecoder("text/html", asText)
	openapi3filter.RegisterBodyDecoder("text/css", asText)
	openapi3filter.RegisterBodyDecoder("text/javascript", asText)
}

func TestOpenAPI_RealAnswersMatch(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		c := setupRealRun(t, dialect)
		c.nodeInfo()
		c.queuesAndRoutings()
		deferredID := c.enqueue()
		c.failures(c.listings(deferredID))
		c.moreJobs()
		c.acceptedLease()
		c.cancellation()
		c.pauseAndWake()
		c.pullQueue()
		c.dashboardPages()
		c.dashboardActions()
		c.locks()
		c.schedules()
		c.outboxRejects()
		c.errorAnswers()
		c.flows()

		c.call("DELETE", "/routing/gone", "", 200)
		c.call("DELETE", "/queue/q2", "", 200)

		for _, op := range documentedOperations(c.doc) {
			if !c.ok[op] {
				t.Errorf("%s: no 2xx (or 3xx) answer was checked; add a call to this test", op)
			}
		}
	})
}

// realRun is one database's run of TestOpenAPI_RealAnswersMatch: the
// contract of a node, the worker its jobs are delivered to, and the file
// every operation of which must answer. Its steps run in order, each
// finding the node as the ones before left it.
type realRun struct {
	*contract
	w   *testworker.Worker
	doc *openapi3.T
}

// setupRealRun starts a node on a database of the dialect, and a worker
// that answers by the job's payload.
func setupRealRun(t *testing.T, dialect string) *realRun {
	t.Helper()
	doc := loadOpenAPI(t)
	w := testworker.New(t, func(body string, _ int) (int, string, time.Duration) {
		switch body {
		case "fail":
			return 500, `{"status":"permanent-failure","message":"no"}`, 0
		case "slow":
			return 200, `{"status":"success"}`, 4 * time.Second
		case "accept":
			return 202, `{"status":"accepted","lease":60}`, 0
		}
		return 200, `{"status":"success"}`, 0
	})
	node := startNode(t, dbtest.URL(t, dialect), func(cfg *config.Config) { cfg.MaxBodyBytes = 1 << 12 })
	doc.Servers = openapi3.Servers{{URL: "http://" + node.Addr()}}
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	c := &contract{t: t, node: node, router: router, ok: map[string]bool{}}
	return &realRun{contract: c, w: w, doc: doc}
}

// jobBody is a job's body for the worker, with the payload and the extra
// fields (each after a comma).
func (c *realRun) jobBody(payload string, extra string) string {
	return fmt.Sprintf(`{"url":%q,"payload":%q%s}`, c.w.URL, payload, extra)
}

// nextCursor returns the next_cursor of a page, failing without one.
func (c *realRun) nextCursor(body []byte) string {
	t := c.t
	t.Helper()
	var page struct {
		NextCursor string `json:"next_cursor"`
	}
	json.Unmarshal(body, &page)
	if page.NextCursor == "" {
		t.Fatalf("no next_cursor in %s", body)
	}
	return page.NextCursor
}

// dashboardForm is the header of a dashboard form, with the CSRF cookie
// its csrf field matches.
func dashboardForm() http.Header {
	return http.Header{"Content-Type": {"application/x-www-form-urlencoded"}, "Cookie": {"rowq_csrf=0123456789abcdef0123"}}
}

// queuePage is a page of a queue's jobs or of its failure log.
type queuePage struct {
	Jobs       []json.RawMessage    `json:"jobs"`
	FailedJobs []struct{ ID int64 } `json:"failed_jobs"`
}

// nodeInfo reads what the node tells of itself.
func (c *realRun) nodeInfo() {
	c.call("GET", "/healthz", "", 200)
	c.call("GET", "/metrics", "", 200)
	c.call("GET", "/version", "", 200)
	c.call("GET", "/settings", "", 200)
	c.call("GET", "/nodes", "", 200)
}

// queuesAndRoutings creates the queues q, q2 and slowq (throttled) and the
// routings c, s and gone, and reads them.
func (c *realRun) queuesAndRoutings() {
	c.call("PUT", "/queue/q", `{"max_workers":5,"polling_interval":100,"max_dispatches_per_second":100,"max_burst_size":10}`, 200)
	c.call("PUT", "/queue/q2", "", 200)
	// At most one dispatch per 1000 s: after the first job, the rest wait.
	c.call("PUT", "/queue/slowq", `{"max_dispatches_per_second":0.001,"max_burst_size":1}`, 200)
	c.call("GET", "/queues", "", 200)
	c.call("GET", "/queue/q", "", 200)
	c.call("PUT", "/routing/c", `{"queue_name":"q"}`, 200)
	c.call("PUT", "/routing/s", `{"queue_name":"slowq"}`, 200)
	c.call("PUT", "/routing/gone", `{"queue_name":"q2"}`, 200)
	c.call("GET", "/routings", "", 200)
	c.call("GET", "/routing/c", "", 200)
}

// enqueue enqueues jobs to q (a slow one, one that fails, a deferred one)
// and to slowq; it returns the deferred job's id.
func (c *realRun) enqueue() int64 {
	w := c.w
	c.call("POST", "/job/c", c.jobBody("slow", `,"timeout":30`), 200)
	c.call("POST", "/job/c", c.jobBody("fail", `,"max_retries":3,"retry_delay":1`), 200)
	var deferred struct{ ID int64 }
	json.Unmarshal(c.call("POST", "/job/c", c.jobBody("later", `,"run_after":3600`), 200), &deferred)
	c.call("POST", "/job/s", c.jobBody("first", ""), 200)
	c.call("POST", "/job/s", `{"url":"`+w.URL+`","payload":{"n":[1,2]}}`, 200)
	c.call("POST", "/job/s", `{"url":"`+w.URL+`"}`, 200)
	return deferred.ID
}

// listings waits for a job in delivery, a failure log entry and jobs held
// back by the throttle, reads them a page at a time, and reads and
// deletes the deferred job; it returns the page that read the failure
// log.
func (c *realRun) listings(deferredID int64) *queuePage {
	t := c.t
	var page queuePage
	testworker.WaitFor(t, 30*time.Second, "a grabbed job", func() bool {
		json.Unmarshal(c.call("GET", "/queue/q/grabbed", "", 200), &page)
		return len(page.Jobs) > 0
	})
	testworker.WaitFor(t, 30*time.Second, "a failure log entry", func() bool {
		json.Unmarshal(c.call("GET", "/queue/q/failed?order=created&limit=5", "", 200), &page)
		return len(page.FailedJobs) > 0
	})
	testworker.WaitFor(t, 30*time.Second, "waiting jobs held back by the throttle", func() bool {
		json.Unmarshal(c.call("GET", "/queue/slowq/waiting?limit=1&order=asc", "", 200), &page)
		return len(page.Jobs) == 1
	})
	var next struct {
		NextCursor string `json:"next_cursor"`
	}
	json.Unmarshal(c.call("GET", "/queue/slowq/waiting?limit=1", "", 200), &next)
	if next.NextCursor == "" {
		t.Fatal("a full page has no next_cursor")
	}
	c.call("GET", "/queue/slowq/waiting?limit=1&cursor="+next.NextCursor, "", 200)
	c.call("GET", "/queue/q/deferred?order=asc", "", 200)
	c.call("GET", fmt.Sprintf("/queue/q/job/%d", deferredID), "", 200)
	c.call("DELETE", fmt.Sprintf("/queue/q/job/%d", deferredID), "", 200)
	c.call("GET", "/queue/q/failed", "", 200)
	c.call("GET", "/queue/q/finished?status=succeeded&limit=10", "", 200)
	return &page
}

// failures reads the first failure log entry of page, retries it, deletes
// its new entry, and retries and deletes entries that are not there.
func (c *realRun) failures(page *queuePage) {
	t := c.t
	failed := page.FailedJobs[0].ID
	c.call("GET", fmt.Sprintf("/queue/q/failed/%d", failed), "", 200)
	// rowq's additions: the entry goes back to its queue, fails again
	// (the worker answers permanent-failure) and leaves a new entry.
	c.call("POST", fmt.Sprintf("/queue/q/failed/%d/retry", failed), "", 200)
	testworker.WaitFor(t, 30*time.Second, "the retried job's new failure log entry", func() bool {
		json.Unmarshal(c.call("GET", "/queue/q/failed", "", 200), page)
		return len(page.FailedJobs) > 0
	})
	failed = page.FailedJobs[0].ID
	c.call("DELETE", fmt.Sprintf("/queue/q/failed/%d", failed), "", 200)
	c.call("POST", "/queue/q/failed/retry", `{"ids":[999999]}`, 200)
	c.call("DELETE", "/queue/q/failed", `{"ids":[999999]}`, 200)
}

// moreJobs enqueues a batch (one job with a unique key) and a job with a
// unique key and an exponential backoff.
func (c *realRun) moreJobs() {
	w := c.w
	c.call("POST", "/jobs", `{"jobs":[{"category":"c","url":"`+w.URL+`","payload":"batch","priority":5},{"category":"c","url":"`+w.URL+`","unique_key":"k1"}]}`, 200)
	c.call("POST", "/job/c", c.jobBody("keyed", `,"unique_key":"k2","retry_backoff":"exponential","retry_delay":1,"retry_delay_max":10,"max_retries":2`), 200)
}

// acceptedLease enqueues a job the worker accepts, then heartbeats and
// completes its lease, good and bad.
func (c *realRun) acceptedLease() {
	t, w := c.t, c.w
	c.call("POST", "/job/c", c.jobBody("accept", ""), 200)
	testworker.WaitFor(t, 30*time.Second, "the accepted job's delivery", func() bool { return w.Count("accept") > 0 })
	h := w.Of("accept")[0].Header
	id, tok := h.Get("Rowq-Job-Id"), h.Get("Rowq-Lease-Token")
	testworker.WaitFor(t, 30*time.Second, "the accepted job leased", func() bool {
		return strings.Contains(string(c.call("GET", "/queue/q/job/"+id, "", 200)), `"status":"leased"`)
	})
	c.call("POST", "/job/"+id+"/heartbeat", `{"lease_token":"`+tok+`","lease":120,"progress":0.5,"message":"half"}`, 200)
	c.call("POST", "/job/"+id+"/heartbeat", `{"lease_token":"`+tok+`","lease":0}`, 400)
	c.call("POST", "/job/"+id+"/heartbeat", `{"lease_token":"nope","lease":10}`, 400)
	c.call("GET", "/queue/q/job/"+id, "", 200)
	done := `{"lease_token":"` + tok + `","status":"success","message":"ok"}`
	c.call("POST", "/job/"+id+"/complete", done, 200)
	c.call("POST", "/job/"+id+"/complete", done, 200)
	c.call("POST", "/job/"+id+"/complete", `{"lease_token":"`+tok+`","status":"failure"}`, 409)
	c.call("POST", "/job/"+id+"/heartbeat", `{"lease_token":"`+tok+`","lease":10}`, 409)
	c.call("POST", "/job/"+id+"/complete", `{"lease_token":"`+tok+`","status":"done"}`, 400)
}

// cancellation cancels a deferred job, then again, and a bad id.
func (c *realRun) cancellation() {
	var later struct{ ID int64 }
	json.Unmarshal(c.call("POST", "/job/c", c.jobBody("cancel-me", `,"run_after":3600`), 200), &later)
	c.call("POST", fmt.Sprintf("/queue/q/job/%d/cancel", later.ID), "", 200)
	c.call("POST", fmt.Sprintf("/queue/q/job/%d/cancel", later.ID), "", 404)
	c.call("POST", "/queue/q/job/x/cancel", "", 400)
}

// pauseAndWake pauses and resumes q2, waits for q's leader, and wakes q
// with good and bad bodies.
func (c *realRun) pauseAndWake() {
	t, node := c.t, c.node
	c.call("POST", "/queue/q2/pause", "", 200)
	c.call("POST", "/queue/q2/resume", "", 200)
	testworker.WaitFor(t, 30*time.Second, "a leader", func() bool {
		res, err := http.Get("http://" + node.Addr() + "/queue/q/node")
		if err == nil {
			res.Body.Close()
		}
		return err == nil && res.StatusCode == 200
	})
	c.call("GET", "/queue/q/node", "", 200)
	c.call("POST", "/queue/q/wake", "", 200)
	c.call("POST", "/queue/q/wake", `{"settings":true}`, 200)
	c.call("POST", "/queue/q/wake", `{"settings":"yes"}`, 400)
	c.call("POST", "/queue/-%20/wake", "", 400)
	c.call("POST", "/queue/q/wake", `{"now":true}`, 400)
	c.call("POST", "/queue/q/wake", `{"cancel":123456}`, 200)
	c.call("POST", "/queue/q/wake", `{"cancel":-1}`, 400)
	c.call("POST", "/queue/q/wake", `{"finished":[{"id":123456,"grabs":1}]}`, 200)
	c.call("POST", "/queue/q/wake", `{"finished":[{"id":0,"grabs":1}]}`, 400)
}

// pullQueue leases and completes a job without url on a pull queue, asks
// for leases good and bad, and deletes the queue.
func (c *realRun) pullQueue() {
	t := c.t
	c.call("PUT", "/queue/pq", `{"delivery":"pull","max_workers":2}`, 200)
	c.call("PUT", "/routing/pc", `{"queue_name":"pq"}`, 200)
	c.call("POST", "/job/pc", `{"payload":{"n":1}}`, 200)
	var leased struct {
		Jobs []struct {
			ID         int64  `json:"id"`
			LeaseToken string `json:"lease_token"`
		} `json:"jobs"`
	}
	json.Unmarshal(c.call("POST", "/queue/pq/lease", `{"max":10,"wait":10,"lease":30}`, 200), &leased)
	if len(leased.Jobs) != 1 {
		t.Fatalf("leased %+v, want the one job", leased)
	}
	c.call("POST", fmt.Sprintf("/job/%d/complete", leased.Jobs[0].ID), `{"lease_token":"`+leased.Jobs[0].LeaseToken+`","status":"success"}`, 200)
	c.call("POST", "/queue/pq/lease", "", 200)
	c.call("POST", "/queue/pq/lease", `{"max":101}`, 400)
	c.call("POST", "/queue/q/lease", "", 409)
	c.call("POST", "/queue/nope/lease", "", 404)
	c.call("DELETE", "/routing/pc", "", 200)
	c.call("DELETE", "/queue/pq", "", 200)
}

// dashboardPages reads q's stats, then the dashboard's pages (with a job
// of q deferred an hour in a batch, stored for its pages), and logs in
// and out.
func (c *realRun) dashboardPages() {
	form := dashboardForm()
	c.call("GET", "/queue/q/stats", "", 200)
	c.call("GET", "/ui", "", 200)
	c.call("GET", "/ui/outbox", "", 200)
	c.call("GET", "/ui/queue/q", "", 200)
	fi, err := c.node.Store().JobsInsertFlow(c.t.Context(), &store.FlowInsertParams{
		Jobs:  []*store.FlowJobParams{{Job: &store.JobInsertParams{Queue: "q", Category: "c", URL: c.w.URL, RunAfter: time.Hour}}},
		Batch: &store.BatchParams{},
	})
	if err != nil {
		c.t.Fatalf("store a job in a batch: %v", err)
	}
	c.call("GET", fmt.Sprintf("/ui/queue/q/job/%d", fi.IDs[0]), "", 200)
	c.call("GET", "/ui/batches", "", 200)
	c.call("GET", fmt.Sprintf("/ui/batch/%d", fi.BatchID), "", 200)
	c.call("GET", "/ui/queue/nope", "", 404)
	c.call("GET", "/ui/queue/-%20", "", 400)
	c.call("GET", "/ui/style.css", "", 200)
	c.call("GET", "/ui/login", "", 303) // authentication is off: on to /ui
	c.send("POST", "/ui/login", "csrf=0123456789abcdef0123&token=x", form, 303)
	c.send("POST", "/ui/logout", "csrf=0123456789abcdef0123", form, 303)
	c.send("POST", "/ui/logout", "csrf=wrong", form, 403)
	c.call("GET", "/ui/dashboard.js", "", 200)
}

// dashboardActions sends every dashboard action: unconfirmed, it answers
// the confirmation (200); confirmed, it is done (303) or refused as the
// API refuses. Then it reads every queue's stats.
func (c *realRun) dashboardActions() {
	form := dashboardForm()
	act := func(path, fields string, want int) {
		c.send("POST", path, "csrf=0123456789abcdef0123&back=/ui&"+fields, form, want)
	}
	for _, path := range []string{"/ui/queue/q2/pause", "/ui/queue/q2/resume", "/ui/queue/q/failed/1/retry", "/ui/queue/q/failed/1/delete",
		"/ui/queue/q/job/1/delete", "/ui/queue/q/job/1/cancel", "/ui/schedule/s1/pause", "/ui/schedule/s1/resume", "/ui/schedule/s1/trigger"} {
		act(path, "", 200)
	}
	act("/ui/queue/q/failed/retry", "id=1&id=2", 200)
	act("/ui/queue/q/failed/delete", "all=yes", 200)
	act("/ui/lock/l1/release", "owner=o1&token=1", 200)
	act("/ui/queue/q2/pause", "confirm=yes", 303)
	act("/ui/queue/q2/resume", "confirm=yes", 303)
	act("/ui/queue/nope/pause", "confirm=yes", 404)
	act("/ui/queue/q/failed/999999/retry", "confirm=yes", 404)
	act("/ui/queue/q/failed/x/delete", "confirm=yes", 400)
	act("/ui/queue/q/failed/retry", "confirm=yes&id=999999", 303)
	act("/ui/queue/q/failed/delete", "confirm=yes&id=999999", 303)
	act("/ui/queue/q/failed/delete", "confirm=yes", 400)
	act("/ui/queue/q/job/999999/delete", "confirm=yes", 404)
	act("/ui/queue/q/job/999999/cancel", "confirm=yes", 404)
	act("/ui/schedule/nope/trigger", "confirm=yes", 404)
	act("/ui/lock/l9/release", "confirm=yes&owner=o1&token=1", 409)
	c.call("GET", "/queues/stats", "", 200)
}

// locks acquires, renews, lists a page at a time and releases locks, good
// and bad.
func (c *realRun) locks() {
	var lease struct{ Token int64 }
	json.Unmarshal(c.call("PUT", "/lock/l1", `{"owner":"o1","ttl":30}`, 200), &lease)
	c.call("PUT", "/lock/l1", `{"owner":"o2","ttl":30}`, 409)
	c.call("POST", "/lock/l1/renew", fmt.Sprintf(`{"owner":"o1","token":%d,"ttl":60}`, lease.Token), 200)
	c.call("GET", "/lock/l1", "", 200)
	c.call("GET", "/locks?limit=10", "", 200)
	c.call("PUT", "/lock/l2", `{"owner":"o1","ttl":30}`, 200)
	c.call("GET", "/locks?limit=1&cursor="+c.nextCursor(c.call("GET", "/locks?limit=1", "", 200)), "", 200)
	c.call("GET", "/locks?cursor=nope", "", 400)
	c.call("DELETE", fmt.Sprintf("/lock/l1?owner=o1&token=%d", lease.Token), "", 200)
	c.call("DELETE", fmt.Sprintf("/lock/l1?owner=o1&token=%d", lease.Token), "", 409)
	c.call("POST", "/lock/l1/renew", fmt.Sprintf(`{"owner":"o1","token":%d,"ttl":60}`, lease.Token), 409)
	c.call("PUT", "/lock/l1", `{"ttl":30}`, 400)
	c.call("PUT", "/lock/bad%20name", `{"owner":"o","ttl":30}`, 400)
}

// schedules creates, lists a page at a time, acts on and deletes
// schedules, good and bad.
func (c *realRun) schedules() {
	w := c.w
	c.call("PUT", "/schedule/s1", `{"cron":"0 9 * * 1-5","timezone":"Europe/Berlin","category":"c","url":"`+w.URL+`","payload":{"n":1}}`, 200)
	c.call("GET", "/schedule/s1", "", 200)
	c.call("GET", "/schedules?limit=10", "", 200)
	c.call("PUT", "/schedule/s2", `{"cron":"@daily","category":"c","url":"`+w.URL+`","paused":true}`, 200)
	c.call("GET", "/schedules?limit=1&cursor="+c.nextCursor(c.call("GET", "/schedules?limit=1", "", 200)), "", 200)
	c.call("GET", "/schedules?limit=0", "", 400)
	c.call("POST", "/schedule/s1/pause", "", 200)
	c.call("POST", "/schedule/s1/resume", "", 200)
	c.call("POST", "/schedule/s1/trigger", "", 200)
	c.call("GET", "/schedule/s1/runs", "", 200)
	c.call("POST", "/schedule/s1/trigger", "", 200)
	c.call("GET", "/schedule/s1/runs?limit=1&cursor="+c.nextCursor(c.call("GET", "/schedule/s1/runs?limit=1", "", 200)), "", 200)
	c.call("GET", "/schedule/s1/runs?cursor=nope", "", 400)
	c.call("DELETE", "/schedule/s1", "", 200)
	c.call("PUT", "/schedule/s1", `{"cron":"61 * * * *","category":"c","url":"`+w.URL+`"}`, 400)
	c.call("PUT", "/schedule/s1", `{"cron":"@daily","timezone":"Mars/Base","category":"c","url":"`+w.URL+`"}`, 400)
	c.call("GET", "/schedule/nope", "", 404)
}

// outboxRejects lists the outbox's rejects a page at a time: two rows
// that are not valid jobs.
func (c *realRun) outboxRejects() {
	t, w, node := c.t, c.w, c.node
	bad := "not json"
	if err := node.Store().OutboxInsert(t.Context(), []*store.OutboxRow{{Category: "c"}, {Category: "c", URL: &w.URL, Payload: &bad}}); err != nil {
		t.Fatal(err)
	}
	testworker.WaitFor(t, 10*time.Second, "two outbox rejects", func() bool {
		n, err := node.Store().OutboxRejectsCount(t.Context())
		return err == nil && n == 2
	})
	c.call("GET", "/outbox/rejects?limit=1&cursor="+c.nextCursor(c.call("GET", "/outbox/rejects?limit=1", "", 200)), "", 200)
	c.call("GET", "/outbox/rejects?cursor=nope", "", 400)
}

// errorAnswers sends bad names, ids, bodies and pages to every kind of
// operation.
func (c *realRun) errorAnswers() {
	c.call("GET", "/queue/no%20pe", "", 400)
	c.call("GET", "/queue/nope", "", 404)
	c.call("PUT", "/queue/q", `{"max_workers":0}`, 400)
	c.call("PUT", "/queue/q", `{"max_workers":"x"}`, 400)
	c.call("PUT", "/queue/q", `{"max_burst_size":1}`+strings.Repeat(" ", 1<<12), 413)
	c.call("DELETE", "/queue/nope", "", 404)
	c.call("GET", "/queue/nope/node", "", 404)
	c.call("GET", "/routing/nope", "", 404)
	c.call("GET", "/routing/a%2Fb", "", 400)
	c.call("PUT", "/routing/x", `{}`, 400)
	c.call("PUT", "/routing/x", `{"queue_name":"nope"}`, 404)
	c.call("DELETE", "/routing/nope", "", 404)
	c.call("POST", "/job/c", `{"url":"ftp://x"}`, 400)
	c.call("POST", "/job/c", `{"url":"http://x","timeout":-1}`, 400)
	c.call("POST", "/job/nope", c.jobBody("x", ""), 404)
	c.call("POST", "/job/c", c.jobBody(strings.Repeat("x", 1<<12), ""), 413)
	for _, l := range []string{"grabbed", "waiting", "deferred", "failed"} {
		c.call("GET", "/queue/q/"+l+"?limit=0", "", 400)
		c.call("GET", "/queue/q/"+l+"?cursor=zzz", "", 400)
		c.call("GET", "/queue/q/"+l+"?order=up", "", 400)
		c.call("GET", "/queue/nope/"+l, "", 404)
	}
	for _, p := range []string{"job", "failed"} {
		for _, m := range []string{"GET", "DELETE"} {
			c.call(m, "/queue/q/"+p+"/x", "", 400)
			c.call(m, "/queue/q/"+p+"/999999", "", 404)
		}
	}
	c.call("GET", "/queue/nope/stats", "", 404)
	c.call("POST", "/jobs", `{"jobs":[]}`, 400)
	c.call("POST", "/jobs", `{"jobs":[{"category":"c"}]}`, 400)
	c.call("POST", "/queue/nope/pause", "", 404)
	c.call("POST", "/queue/q/failed/999999/retry", "", 404)
	c.call("POST", "/queue/q/failed/retry", `{"ids":"x"}`, 400)
	c.call("GET", "/queue/-%20/stats", "", 400)
}

package server_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/rowq/rowq/internal/auth"
	"github.com/rowq/rowq/internal/cli"
	"github.com/rowq/rowq/internal/config"
	"github.com/rowq/rowq/internal/server"
	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/testworker"
)

// routeAuth is what a route must demand: the scopes of which a token needs
// one ("" for an open route), and whether a token confined to some queues
// is refused because the route shows every queue.
type routeAuth struct {
	scopes    string // such as "read" or "read|locks" (one of them), "read&locks" (both); "" is open
	allQueues bool
	// login: a dashboard page, which sends a request without a token to
	// the login page (303) and shows a confined token its queues only
	// (or, with allQueues, refuses it).
	login bool
	// form: a dashboard form (open), refused with 403 without its CSRF
	// token. A form that is also login (a dashboard action) needs the
	// scopes and a login first: without its CSRF token, a token of the
	// right scope is refused with 403 too.
	form bool
}

// routeDecisions is the auth decision every route must have. A route the
// API registers and this table lacks fails TestAuth_EveryRouteHasADecision:
// add it here with the decision it needs, and docs/security.md's table.
var routeDecisions = map[string]routeAuth{
	"GET /version": {}, "GET /healthz": {},

	"POST /job/{category}": {scopes: "enqueue"}, "POST /jobs": {scopes: "enqueue"},
	"POST /job/{id}/heartbeat": {scopes: "work"}, "POST /job/{id}/complete": {scopes: "work"},
	"POST /queue/{name}/job/{id}/cancel": {scopes: "admin"},

	"GET /queues": {scopes: "read"}, "GET /queue/{name}": {scopes: "read"}, "GET /queue/{name}/node": {scopes: "read"},
	"GET /routings": {scopes: "read"}, "GET /routing/{category}": {scopes: "read"},
	"GET /queue/{name}/grabbed": {scopes: "read"}, "GET /queue/{name}/waiting": {scopes: "read"},
	"GET /queue/{name}/deferred": {scopes: "read"}, "GET /queue/{name}/job/{id}": {scopes: "read"},
	"GET /queue/{name}/failed": {scopes: "read"}, "GET /queue/{name}/failed/{id}": {scopes: "read"},
	"GET /queue/{name}/finished": {scopes: "read"}, "GET /queue/{name}/blocked": {scopes: "read"},
	"GET /queue/{name}/stats": {scopes: "read"}, "GET /queues/stats": {scopes: "read"},
	"GET /schedules": {scopes: "read"}, "GET /schedule/{name}": {scopes: "read"}, "GET /schedule/{name}/runs": {scopes: "read"},
	"GET /settings": {scopes: "read", allQueues: true}, "GET /metrics": {scopes: "read", allQueues: true}, "GET /nodes": {scopes: "read", allQueues: true},
	"GET /outbox/rejects": {scopes: "read", allQueues: true},
	"GET /batch/{id}":     {scopes: "read", allQueues: true}, "GET /batches": {scopes: "read", allQueues: true},
	"GET /ui": {scopes: "read", login: true}, "GET /ui/queue/{name}": {scopes: "read", login: true},
	"GET /ui/outbox": {scopes: "read", login: true, allQueues: true},
	"GET /ui/login":  {}, "GET /ui/style.css": {}, "GET /ui/dashboard.js": {}, "POST /ui/login": {form: true}, "POST /ui/logout": {form: true},
	"POST /ui/queue/{name}/pause": dashAction, "POST /ui/queue/{name}/resume": dashAction,
	"POST /ui/queue/{name}/failed/{id}/retry": dashAction, "POST /ui/queue/{name}/failed/{id}/delete": dashAction,
	"POST /ui/queue/{name}/failed/retry": dashAction, "POST /ui/queue/{name}/failed/delete": dashAction,
	"POST /ui/queue/{name}/job/{id}/delete": dashAction, "POST /ui/queue/{name}/job/{id}/cancel": dashAction,
	"POST /ui/schedule/{name}/pause": dashAction, "POST /ui/schedule/{name}/resume": dashAction, "POST /ui/schedule/{name}/trigger": dashAction,
	"POST /ui/lock/{name}/release": {scopes: "read&locks", login: true, form: true},

	// A job's page is its queue's; batches span queues (as GET /batches).
	"GET /ui/queue/{name}/job/{id}": {scopes: "read", login: true},
	"GET /ui/batches":               {scopes: "read", login: true, allQueues: true},
	"GET /ui/batch/{id}":            {scopes: "read", login: true, allQueues: true},

	"PUT /lock/{name}": {scopes: "locks"}, "POST /lock/{name}/renew": {scopes: "locks"}, "DELETE /lock/{name}": {scopes: "locks"},
	"GET /lock/{name}": {scopes: "read|locks"}, "GET /locks": {scopes: "read|locks"},

	"POST /queue/{name}/wake": {scopes: "node"},
	// A pull worker's, or forwarded by a node to the queue's leader.
	"POST /queue/{name}/lease": {scopes: "work|node"},

	"PUT /queue/{name}": {scopes: "admin"}, "DELETE /queue/{name}": {scopes: "admin"},
	"PUT /routing/{category}": {scopes: "admin"}, "DELETE /routing/{category}": {scopes: "admin"},
	"DELETE /queue/{name}/job/{id}": {scopes: "admin"}, "DELETE /queue/{name}/failed/{id}": {scopes: "admin"},
	"POST /queue/{name}/pause": {scopes: "admin"}, "POST /queue/{name}/resume": {scopes: "admin"},
	"POST /queue/{name}/failed/{id}/retry": {scopes: "admin"}, "POST /queue/{name}/failed/retry": {scopes: "admin"},
	"DELETE /queue/{name}/failed": {scopes: "admin"},
	"PUT /schedule/{name}":        {scopes: "admin"}, "DELETE /schedule/{name}": {scopes: "admin"},
	"POST /schedule/{name}/pause": {scopes: "admin"}, "POST /schedule/{name}/resume": {scopes: "admin"},
	"POST /schedule/{name}/trigger": {scopes: "admin"},
}

// dashAction is the decision of the dashboard's admin actions.
var dashAction = routeAuth{scopes: "admin", login: true, form: true}

// makeToken stores a token in st and returns it.
func makeToken(t *testing.T, st store.Store, name string, scopes []string, queues ...string) string {
	t.Helper()
	tok, hash := auth.NewToken()
	if _, err := st.TokenCreate(t.Context(), &store.TokenCreateParams{Name: name, Hash: hash, Scopes: scopes, Queues: queues}); err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestAuth_EveryRouteHasADecision walks every route the node registers
// with no token, a token of every scope but the ones the route takes, and
// a token of the right scope, and checks 401, 403 and neither; the 401s
// and 403s must match docs/openapi.yaml.
func TestAuth_EveryRouteHasADecision(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		url := dbtest.URL(t, dialect)
		st := dbtest.OpenURL(t, url)
		tokens := scopeTokens(t, st)
		node := startNode(t, url, func(c *config.Config) { c.Auth = "on" })
		addNodeTokens(t, st, tokens)
		p := newRouteProbe(t, node, tokens)

		routes := node.Routes()
		for _, pattern := range routes {
			want, ok := routeDecisions[pattern]
			if !ok {
				t.Errorf("route %q has no entry in routeDecisions: decide which scope it needs", pattern)
				continue
			}
			p.check(pattern, want)
		}
		for pattern := range routeDecisions {
			if !slices.Contains(routes, pattern) {
				t.Errorf("routeDecisions lists %q, which the node does not serve", pattern)
			}
		}
	})
}

// scopeTokens stores a token of each scope, one of every scope but each
// one (and admin), a token confined to queues q*, and those a decision of
// two scopes needs; it returns them by the name a decision gives them.
func scopeTokens(t *testing.T, st store.Store) map[string]string {
	t.Helper()
	all := []string{"read", "enqueue", "locks", "work", "admin"}
	tokens := map[string]string{"confined": makeToken(t, st, "confined", []string{"read"}, "q*")}
	for _, s := range all {
		tokens[s] = makeToken(t, st, s, []string{s})
		// "no-read" holds every scope but admin and read, and so on.
		tokens["no-"+s] = makeToken(t, st, "no-"+s, slices.DeleteFunc(slices.Clone(all), func(x string) bool { return x == s || x == "admin" }))
	}
	tokens["no-read|locks"] = makeToken(t, st, "no-read-locks", []string{"enqueue"})
	// The dashboard's lock release needs both.
	tokens["read&locks"] = makeToken(t, st, "read-and-locks", []string{"read", "locks"})
	tokens["no-read&locks"] = makeToken(t, st, "read-no-locks", []string{"read", "enqueue"})
	tokens["no-node"] = tokens["no-admin"]
	return tokens
}

// addNodeTokens adds to tokens the node key a started node ensured, and
// the tokens of the decisions "read|locks" and "work|node" (one scope of
// two).
func addNodeTokens(t *testing.T, st store.Store, tokens map[string]string) {
	t.Helper()
	key, err := st.SecretEnsure(t.Context(), auth.NodeKeySecret, "unused")
	if err != nil {
		t.Fatal(err)
	}
	tokens["node"] = key
	tokens["read|locks"] = tokens["locks"]
	tokens["work|node"] = tokens["work"]
	tokens["no-work|node"] = tokens["no-work"]
}

// routeProbe sends a route's requests to a node with the tokens by name,
// and checks its 401 and 403 answers against docs/openapi.yaml.
type routeProbe struct {
	t      *testing.T
	node   *server.Server
	router routers.Router
	tokens map[string]string
}

func newRouteProbe(t *testing.T, node *server.Server, tokens map[string]string) *routeProbe {
	t.Helper()
	doc := loadOpenAPI(t)
	doc.Servers = openapi3.Servers{{URL: "http://" + node.Addr()}}
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	return &routeProbe{t: t, node: node, router: router, tokens: tokens}
}

// send sends pattern's request with token ("" for none) and returns the
// answer's status and body.
func (p *routeProbe) send(pattern, token string) (int, string) {
	t := p.t
	method, path, _ := strings.Cut(pattern, " ")
	path = strings.NewReplacer("{name}", "q1", "{category}", "c1", "{id}", "1").Replace(path)
	body := ""
	if method == "POST" || method == "PUT" {
		body = "{}"
	}
	req, res, got := request(t, p.node, token, method, path, strings.NewReader(body))
	if res.StatusCode == 401 || res.StatusCode == 403 {
		checkDocumented(t, p.router, req, res, got)
	}
	return res.StatusCode, string(got)
}

// check checks the route's answer without a token, then, if it takes
// scopes, with tokens lacking and holding them.
func (p *routeProbe) check(pattern string, want routeAuth) {
	if !p.checkWithoutToken(pattern, want) || want.scopes == "" {
		return
	}
	p.checkWithTokens(pattern, want)
}

// checkWithoutToken checks the route's answer to a request without a
// token; it reports false for a form that needs no login, refused for its
// missing CSRF token before any scope counts.
func (p *routeProbe) checkWithoutToken(pattern string, want routeAuth) bool {
	t := p.t
	code, body := p.send(pattern, "")
	switch {
	case want.form && want.login:
		if code != 303 {
			t.Errorf("%s without a token: %d, want 303 to the login page: %s", pattern, code, body)
		}
	case want.form:
		if code != 403 || !strings.Contains(body, "CSRF") {
			t.Errorf("%s without a CSRF token: %d, want 403: %s", pattern, code, body)
		}
		return false
	case want.login:
		if code != 303 {
			t.Errorf("%s without a token: %d, want 303 to the login page: %s", pattern, code, body)
		}
	case want.scopes == "" && (code == 401 || code == 403):
		t.Errorf("%s is open, but answered %d without a token: %s", pattern, code, body)
	case want.scopes != "" && code != 401:
		t.Errorf("%s without a token: %d, want 401: %s", pattern, code, body)
	}
	return true
}

// checkWithTokens checks the answers of a route that takes scopes to a
// token lacking them, tokens holding them, and a token confined to q*.
func (p *routeProbe) checkWithTokens(pattern string, want routeAuth) {
	t, tokens := p.t, p.tokens
	if code, body := p.send(pattern, tokens["no-"+want.scopes]); code != 403 || !strings.Contains(body, "lacks scope") {
		t.Errorf("%s with a token lacking %s: %d, want 403 naming the scope: %s", pattern, want.scopes, code, body)
	}
	if want.form { // allowed, then refused without its CSRF token
		for _, tok := range []string{want.scopes, "admin"} {
			if code, body := p.send(pattern, tokens[tok]); code != 403 || !strings.Contains(body, "CSRF") {
				t.Errorf("%s with a %s token, without a CSRF token: %d, want 403 naming CSRF: %s", pattern, tok, code, body)
			}
		}
		return
	}
	if code, body := p.send(pattern, tokens[want.scopes]); code == 401 || code == 403 {
		t.Errorf("%s with a %s token: %d: %s", pattern, want.scopes, code, body)
	}
	if code, body := p.send(pattern, tokens["admin"]); code == 401 || code == 403 {
		t.Errorf("%s with an admin token: %d: %s", pattern, code, body)
	}
	code, body := p.send(pattern, tokens["confined"])
	if want.allQueues && code != 403 {
		t.Errorf("%s shows every queue, yet a token confined to q* got %d: %s", pattern, code, body)
	}
	if want.login && !want.allQueues && (code == 401 || code == 403) {
		t.Errorf("%s shows a token confined to q* its queues, yet answered %d: %s", pattern, code, body)
	}
}

// checkDocumented validates a 401 or 403 answer against docs/openapi.yaml.
func checkDocumented(t *testing.T, router routers.Router, req *http.Request, res *http.Response, body []byte) {
	t.Helper()
	vreq, _ := http.NewRequest(req.Method, req.URL.String(), nil)
	route, params, err := router.FindRoute(vreq)
	if err != nil {
		t.Errorf("%s %s: no operation in docs/openapi.yaml: %v", req.Method, req.URL.Path, err)
		return
	}
	in := &openapi3filter.RequestValidationInput{Request: vreq, PathParams: params, Route: route,
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true}}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: res.StatusCode, Header: res.Header,
		Body: io.NopCloser(bytes.NewReader(body)), Options: in.Options}
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		t.Errorf("%s %s: %d answer is not documented in docs/openapi.yaml: %v", req.Method, req.URL.Path, res.StatusCode, err)
	}
}

// TestAuth_RevokeReachesEveryNodeWithin2s revokes a token in the database
// (as `rowq token revoke` does) while two nodes on it serve requests with
// it, and measures when each refuses it.
func TestAuth_RevokeReachesEveryNodeWithin2s(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		url := dbtest.URL(t, dialect)
		st := dbtest.OpenURL(t, url)
		tok := makeToken(t, st, "ci", []string{"read"})
		nodes := []*server.Server{startNode(t, url, nil), startNode(t, url, nil)}
		for _, n := range nodes {
			if code, out := callAs(t, n, tok, "GET", "/version", nil); code != 200 {
				t.Fatalf("GET /version = %d %v", code, out)
			}
			if code, out := callAs(t, n, tok, "GET", "/queue/none", nil); code != 404 {
				t.Fatalf("before the revoke: %d %v, want 404", code, out)
			}
		}
		if _, err := st.TokenRevoke(t.Context(), "ci"); err != nil {
			t.Fatal(err)
		}
		revoked := time.Now()
		for i, n := range nodes {
			for {
				code, _ := callAs(t, n, tok, "GET", "/queue/none", nil)
				took := time.Since(revoked)
				if code == 401 {
					t.Logf("node %d refuses the revoked token %v after the revoke", i, took.Round(time.Millisecond))
					break
				}
				if took > 2*time.Second {
					t.Fatalf("node %d still takes the revoked token %v after the revoke (answer %d)", i, took, code)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
	})
}

// TestAuth_NewTokenWorksAtOnceOnEveryNode: a token made by `rowq token
// create` while nodes run works on its very first request to each node,
// long before their next read of every token: a node looks up a token it
// does not know before it refuses it. (Before, a script that made a token
// and used it at once got 401 for up to about a second.)
func TestAuth_NewTokenWorksAtOnceOnEveryNode(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		url := dbtest.URL(t, dialect)
		st := dbtest.OpenURL(t, url)
		old := makeToken(t, st, "old", []string{"read"})
		nodes := []*server.Server{startNode(t, url, nil), startNode(t, url, nil)}
		for i := range 3 {
			// Each node holds the tokens in memory, read within the last
			// second or so, when the new one is made.
			for _, n := range nodes {
				if code, out := callAs(t, n, old, "GET", "/queue/none", nil); code != 404 {
					t.Fatalf("GET /queue/none with an old token = %d %v, want 404", code, out)
				}
			}
			name := "new" + strconv.Itoa(i)
			var stdout, stderr bytes.Buffer
			if code := cli.Main([]string{"token", "create", name, "--scope", "read", "--database-url", url}, &stdout, &stderr); code != 0 {
				t.Fatalf("rowq token create: exit %d: %s", code, stderr.String())
			}
			tok := strings.TrimSpace(stdout.String())
			for j, n := range nodes {
				if code, out := callAs(t, n, tok, "GET", "/queue/none", nil); code != 404 {
					t.Fatalf("node %d: first request with token %s, made a moment ago = %d %v, want 404", j, name, code, out)
				}
			}
		}
	})
}

// TestAuth_NudgesCarryTheNodeKey: with authentication on, a job enqueued
// on the node that does not lead its queue is delivered long before the
// leader's next look: the nudge got through with the nodes' shared key.
func TestAuth_NudgesCarryTheNodeKey(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		w := testworker.New(t, nil)
		url := dbtest.URL(t, dialect)
		admin := strings.Repeat("k", 40)
		on := func(c *config.Config) { c.AdminToken = admin }
		a := startNode(t, url, on)
		if code, _ := call(t, a, "PUT", "/queue/q", map[string]any{"polling_interval": 60_000}); code != 401 {
			t.Fatalf("PUT /queue/q without a token: %d, want 401", code)
		}
		for _, path := range []string{"/queue/q", "/routing/cat"} {
			body := map[string]any{"polling_interval": 60_000}
			if path == "/routing/cat" {
				body = map[string]any{"queue_name": "q"}
			}
			if code, out := callAs(t, a, admin, "PUT", path, body); code != 200 {
				t.Fatalf("PUT %s: %d %v", path, code, out)
			}
		}
		testworker.WaitFor(t, 10*time.Second, "a leader", func() bool {
			code, out := callAs(t, a, admin, "GET", "/queue/q/node", nil)
			return code == 200 && out["id"] == a.NodeID()
		})
		b := startNode(t, url, on)
		time.Sleep(500 * time.Millisecond) // the new runner's first grab found nothing and parked
		begin := time.Now()
		if code, out := callAs(t, b, admin, "POST", "/job/cat", map[string]any{"url": w.URL, "payload": "x"}); code != 200 {
			t.Fatalf("POST /job/cat: %d %v", code, out)
		}
		testworker.WaitFor(t, 10*time.Second, "the job enqueued on the other node", func() bool { return w.Distinct() == 1 })
		if took := time.Since(begin); took > 3*time.Second {
			t.Fatalf("the job took %v, want well under the 60 s polling interval: the nudge was refused", took)
		}
	})
}

// TestServe_RefusesToExposeWithoutAuth: auth auto with no token and no
// admin token refuses an address other hosts reach, and says what to do;
// a token row, an admin token or an explicit --auth=off lets it start.
func TestServe_RefusesToExposeWithoutAuth(t *testing.T) {
	url := dbtest.URL(t, "sqlite")
	start := func(tweak func(*config.Config)) error {
		s, err := tryNode(t, url, func(c *config.Config) { c.Bind = "0.0.0.0:0"; tweak(c) })
		if err != nil {
			return err
		}
		return s.Stop(nil)
	}
	err := start(func(*config.Config) {})
	if err == nil {
		t.Fatal("serve on 0.0.0.0 with auth auto and no token started")
	}
	for _, want := range []string{"without authentication", "rowq token create", "ROWQ_ADMIN_TOKEN", "--auth=off"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not say %q", err, want)
		}
	}
	if err := start(func(c *config.Config) { c.Auth = "off" }); err != nil {
		t.Errorf("--auth=off on 0.0.0.0: %v", err)
	}
	if err := start(func(c *config.Config) { c.AdminToken = strings.Repeat("a", 32) }); err != nil {
		t.Errorf("admin token on 0.0.0.0: %v", err)
	}
	makeToken(t, dbtest.OpenURL(t, url), "first", []string{"admin"})
	if err := start(func(*config.Config) {}); err != nil {
		t.Errorf("a token row on 0.0.0.0: %v", err)
	}
}

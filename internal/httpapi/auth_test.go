package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/auth"
	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
)

// syncBuffer is a log sink tests read while the API writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// authBundle is an API with authentication on and the tokens a test made.
type authBundle struct {
	*bundle
	tokens map[string]string // name -> token
	log    *syncBuffer
}

// tokenSpec is a token to create: name, scopes, queue patterns.
type tokenSpec struct {
	name, scopes, queues string
}

// setupAuth creates the tokens in st, then serves an API whose verifier
// reads them, in mode.
func setupAuth(t *testing.T, st store.Store, mode string, specs ...tokenSpec) *authBundle {
	t.Helper()
	ab := &authBundle{tokens: map[string]string{}, log: &syncBuffer{}}
	for _, sp := range specs {
		ab.tokens[sp.name] = createToken(t, st, sp)
	}
	v := auth.New(auth.Config{Tokens: st, Mode: mode, Interval: 50 * time.Millisecond})
	if err := v.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Stop(context.Background()) })
	ab.bundle = setup(t, st, func(o *options) {
		o.api.Auth = v
		o.api.Logger = slog.New(slog.NewTextHandler(ab.log, nil))
	})
	return ab
}

func createToken(t *testing.T, st store.Store, sp tokenSpec) string {
	t.Helper()
	scopes, err := auth.ParseScopes(sp.scopes)
	if err != nil {
		t.Fatal(err)
	}
	patterns, err := auth.ParsePatterns(sp.queues)
	if err != nil {
		t.Fatal(err)
	}
	tok, hash := auth.NewToken()
	p := &store.TokenCreateParams{Name: sp.name, Hash: hash, Queues: patterns}
	for _, s := range scopes {
		p.Scopes = append(p.Scopes, string(s))
	}
	if _, err := st.TokenCreate(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	return tok
}

// as sends a request with the named token and checks the status.
func (ab *authBundle) as(t *testing.T, name, method, path, body string, status int) *response {
	t.Helper()
	res := ab.doAs(t, ab.tokens[name], method, path, body)
	if res.status != status {
		t.Fatalf("%s %s as %q: status %d, want %d; body %s", method, path, name, res.status, status, res.body)
	}
	return res
}

// forbidden checks a 403 whose message contains each of want.
func (ab *authBundle) forbidden(t *testing.T, name, method, path, body string, want ...string) {
	t.Helper()
	msg := errorMessage(t, ab.doAs(t, ab.tokens[name], method, path, body), http.StatusForbidden)
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("%s %s as %q: 403 %q does not say %q", method, path, name, msg, w)
		}
	}
}

// names decodes a JSON list of objects and returns the values of field.
func names(t *testing.T, body []byte, field string) []string {
	t.Helper()
	var list []map[string]any
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	var out []string
	for _, e := range list {
		out = append(out, e[field].(string))
	}
	slices.Sort(out)
	return out
}

func TestAuth_UnauthenticatedAndWrongScope(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		ab := setupAuth(t, dbtest.Open(t, dialect), auth.ModeAuto,
			tokenSpec{"reader", "read", ""}, tokenSpec{"ops", "admin", ""})
		const path = "/queue/q"
		for _, tc := range []struct{ name, header string }{
			{"no token", ""},
			{"unknown token", "Bearer rowq_nope"},
			{"unknown basic", "Basic eDpyb3dxX25vcGU="}, // x:rowq_nope
		} {
			req, _ := http.NewRequest("PUT", ab.server.URL+path, strings.NewReader(`{}`))
			if tc.header != "" {
				req.Header.Set("Authorization", tc.header)
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusUnauthorized {
				t.Fatalf("%s: status %d, want 401", tc.name, res.StatusCode)
			}
			if ch := res.Header.Values("WWW-Authenticate"); len(ch) != 2 || !strings.HasPrefix(ch[0], "Bearer") || !strings.HasPrefix(ch[1], "Basic") {
				t.Errorf("%s: WWW-Authenticate = %q, want Bearer and Basic", tc.name, ch)
			}
		}
		msg := errorMessage(t, ab.doAs(t, "", "GET", path, ""), http.StatusUnauthorized)
		if !strings.Contains(msg, "Bearer") {
			t.Errorf("401 %q does not say how to authenticate", msg)
		}
		ab.forbidden(t, "reader", "PUT", path, `{}`, `token "reader" lacks scope admin`, "it has read")
		ab.as(t, "ops", "PUT", path, `{}`, 200)
		ab.as(t, "reader", "GET", path, ``, 200)
		// Open routes stay open.
		ab.as(t, "", "GET", "/version", "", 200)
		ab.as(t, "", "GET", "/healthz", "", 200)
		// HTTP Basic with the token as the password, as a Fireworq client
		// sends it from its URL.
		req, _ := http.NewRequest("GET", ab.server.URL+path, nil)
		req.SetBasicAuth("x", ab.tokens["reader"])
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Fatalf("Basic with the token as password: status %d, want 200", res.StatusCode)
		}
		// The admin change is logged once, with the token's name only.
		logs := ab.log.String()
		if n := strings.Count(logs, "admin change"); n != 1 {
			t.Errorf("%d admin change lines, want 1 (the PUT as ops):\n%s", n, logs)
		}
		if !strings.Contains(logs, "token=ops") || !strings.Contains(logs, "method=PUT") || !strings.Contains(logs, "status=200") {
			t.Errorf("admin change line lacks the token's name, method or status:\n%s", logs)
		}
		for name, tok := range ab.tokens {
			if strings.Contains(logs, tok) {
				t.Errorf("the log shows the secret of token %s", name)
			}
		}
	})
}

// TestAuth_QueuesConfineATenant checks --queues on every kind of route: a
// tenant confined to billing-* works within it and sees nothing else.
func TestAuth_QueuesConfineATenant(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		st := dbtest.Open(t, dialect)
		ab := setupAuth(t, st, auth.ModeOn,
			tokenSpec{"ops", "admin", ""},
			tokenSpec{"billing", "admin", "billing-*"},
			tokenSpec{"billing-ro", "read", "billing-*"},
			tokenSpec{"billing-locks", "locks", "billing-*"})
		const url = `"url":"http://127.0.0.1:1/work"`
		for _, q := range []string{"billing-a", "acme-a"} {
			ab.as(t, "ops", "PUT", "/queue/"+q, "", 200)
		}
		ab.as(t, "ops", "PUT", "/routing/cat-b", `{"queue_name":"billing-a"}`, 200)
		ab.as(t, "ops", "PUT", "/routing/cat-a", `{"queue_name":"acme-a"}`, 200)

		// Enqueue: by the queue the category routes to; the 403 does not
		// name another tenant's queue.
		ab.as(t, "billing", "POST", "/job/cat-b", `{`+url+`}`, 200)
		ab.forbidden(t, "billing", "POST", "/job/cat-a", `{`+url+`}`, `category "cat-a"`, "billing-*")
		if msg := errorMessage(t, ab.doAs(t, ab.tokens["billing"], "POST", "/job/cat-a", `{`+url+`}`), 403); strings.Contains(msg, "acme-a") {
			t.Errorf("403 %q names the other tenant's queue", msg)
		}
		ab.forbidden(t, "billing", "POST", "/jobs", `{"jobs":[{"category":"cat-b",`+url+`},{"category":"cat-a",`+url+`}]}`, "jobs[1]")
		if n := waiting(t, st, "acme-a"); n != 0 {
			t.Fatalf("%d jobs in acme-a after refused enqueues", n)
		}

		// By name: 403 whether or not the queue exists; 404 for a missing
		// queue of the tenant's own.
		ab.forbidden(t, "billing-ro", "GET", "/queue/acme-a", "", `queue "acme-a"`, "billing-*")
		ab.forbidden(t, "billing-ro", "GET", "/queue/acme-missing/waiting", "", `queue "acme-missing"`)
		ab.forbidden(t, "billing", "DELETE", "/queue/acme-a", "", `queue "acme-a"`)
		ab.as(t, "billing-ro", "GET", "/queue/billing-missing", "", 404)
		ab.as(t, "billing-ro", "GET", "/queue/billing-a/waiting", "", 200)

		// Listings show the tenant's own.
		if got := names(t, ab.as(t, "billing-ro", "GET", "/queues", "", 200).body, "name"); !slices.Equal(got, []string{"billing-a"}) {
			t.Errorf("GET /queues as billing-ro = %v, want [billing-a]", got)
		}
		if got := names(t, ab.as(t, "ops", "GET", "/queues", "", 200).body, "name"); len(got) != 2 {
			t.Errorf("GET /queues as ops = %v, want both", got)
		}
		if got := names(t, ab.as(t, "billing-ro", "GET", "/routings", "", 200).body, "job_category"); !slices.Equal(got, []string{"cat-b"}) {
			t.Errorf("GET /routings as billing-ro = %v, want [cat-b]", got)
		}
		var stats map[string]any
		json.Unmarshal(ab.as(t, "billing-ro", "GET", "/queues/stats", "", 200).body, &stats)
		if _, ok := stats["billing-a"]; !ok || len(stats) != 1 {
			t.Errorf("GET /queues/stats as billing-ro = %v, want billing-a only", stats)
		}

		// Routings: neither re-route nor read another tenant's category,
		// nor route one to another tenant's queue.
		ab.forbidden(t, "billing-ro", "GET", "/routing/cat-a", "", `category "cat-a"`)
		ab.forbidden(t, "billing", "PUT", "/routing/cat-a", `{"queue_name":"billing-a"}`, `category "cat-a"`)
		ab.forbidden(t, "billing", "DELETE", "/routing/cat-a", "", `category "cat-a"`)
		ab.forbidden(t, "billing", "PUT", "/routing/cat-new", `{"queue_name":"acme-a"}`, `queue_name: queue "acme-a"`)
		ab.as(t, "billing", "PUT", "/routing/cat-new", `{"queue_name":"billing-a"}`, 200)

		// Locks: names share the patterns.
		ab.as(t, "billing-locks", "PUT", "/lock/billing-l", `{"owner":"o","ttl":30}`, 200)
		ab.forbidden(t, "billing-locks", "PUT", "/lock/acme-l", `{"owner":"o","ttl":30}`, `lock "acme-l"`)
		ab.as(t, "ops", "PUT", "/lock/acme-l", `{"owner":"o","ttl":30}`, 200)
		var locks struct{ Locks []struct{ Name string } }
		json.Unmarshal(ab.as(t, "billing-ro", "GET", "/locks", "", 200).body, &locks)
		if len(locks.Locks) != 1 || locks.Locks[0].Name != "billing-l" {
			t.Errorf("GET /locks as billing-ro = %+v, want billing-l only", locks)
		}

		// Schedules: names share the patterns, and their category must
		// route to the tenant's queues.
		sched := `{"cron":"@daily","category":"%s",` + url + `}`
		ab.as(t, "billing", "PUT", "/schedule/billing-s", strings.Replace(sched, "%s", "cat-b", 1), 200)
		ab.forbidden(t, "billing", "PUT", "/schedule/billing-s2", strings.Replace(sched, "%s", "cat-a", 1), `category "cat-a"`)
		ab.forbidden(t, "billing", "PUT", "/schedule/billing-s3", strings.Replace(sched, "%s", "cat-unrouted", 1), `category "cat-unrouted"`)
		ab.forbidden(t, "billing", "PUT", "/schedule/acme-s", strings.Replace(sched, "%s", "cat-b", 1), `schedule "acme-s"`)
		ab.as(t, "ops", "PUT", "/schedule/acme-s", strings.Replace(sched, "%s", "cat-a", 1), 200)
		ab.forbidden(t, "billing", "POST", "/schedule/acme-s/trigger", "", `schedule "acme-s"`)
		ab.as(t, "billing", "POST", "/schedule/billing-s/trigger", "", 200)
		// A schedule in the tenant's names that an operator pointed at
		// another queue cannot be triggered by the tenant.
		ab.as(t, "ops", "PUT", "/schedule/billing-x", strings.Replace(sched, "%s", "cat-a", 1), 200)
		ab.forbidden(t, "billing", "POST", "/schedule/billing-x/trigger", "", `category "cat-a"`)
		var scheds struct{ Schedules []struct{ Name string } }
		json.Unmarshal(ab.as(t, "billing-ro", "GET", "/schedules", "", 200).body, &scheds)
		if len(scheds.Schedules) != 2 || scheds.Schedules[0].Name != "billing-s" || scheds.Schedules[1].Name != "billing-x" {
			t.Errorf("GET /schedules as billing-ro = %+v, want billing-s and billing-x", scheds)
		}

		// Views of every queue are for unconfined tokens.
		ab.forbidden(t, "billing-ro", "GET", "/settings", "", "every queue", "--queues")
		ab.as(t, "ops", "GET", "/settings", "", 200)
	})
}

// waiting counts the waiting jobs of a queue.
func waiting(t *testing.T, st store.Store, queue string) int {
	t.Helper()
	jobs, err := st.JobsList(t.Context(), &store.JobsListParams{Queue: queue, Kind: store.JobsWaiting, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	return len(jobs)
}

// TestAuth_AutoTurnsOnWithTheFirstToken: with no token row the API is
// open; a token created meanwhile (as by the CLI) closes it within 2 s.
func TestAuth_AutoTurnsOnWithTheFirstToken(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		st := dbtest.Open(t, dialect)
		v := auth.New(auth.Config{Tokens: st}) // auto, re-read every second
		if err := v.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { v.Stop(context.Background()) })
		b := setup(t, st, func(o *options) { o.api.Auth = v })
		b.ok(t, "GET", "/queues", "", nil)
		tok := createToken(t, st, tokenSpec{"first", "read", ""})
		created := time.Now()
		for b.do(t, "GET", "/queues", "").status != http.StatusUnauthorized {
			if time.Since(created) > 2*time.Second {
				t.Fatal("auto: still open 2s after the first token was created")
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Logf("auto turned on %v after the first token", time.Since(created).Round(time.Millisecond))
		if res := b.doAs(t, tok, "GET", "/queues", ""); res.status != 200 {
			t.Fatalf("with the token: status %d", res.status)
		}
	})
}

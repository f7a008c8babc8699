package httpapi_test

import (
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"

	"github.com/rowq/rowq/internal/auth"
	"github.com/rowq/rowq/internal/httpapi"
	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/web"
)

// The golden answers of the dashboard (internal/web), served beside the
// API as a node serves it. Its pages are HTML, rendered with times and
// random CSRF tokens, so the file shows each by its markers (page): its
// title, headings, flash, login error, confirmation question, Back and
// Cancel links, the elements a page marks (data-mark: what the pages of
// lifecycles say of a job or a batch, their links), and the forms the
// user sees with their hidden fields and buttons; a redirect by its
// Location; cookies by name.

const (
	// goldenCSRF is the browser's CSRF cookie (rowq_csrf), which a form
	// without a login session carries in its csrf field.
	goldenCSRF = "golden-csrf-0123456789abcdef"
	formType   = "application/x-www-form-urlencoded"
)

func init() {
	// The dashboard's answers are checked as text against a string
	// schema.
	asText := func(body io.Reader, _ http.Header, _ *openapi3.SchemaRef, _ openapi3filter.EncodingFn) (any, error) {
		b, err := io.ReadAll(body)
		return string(b), err
	}
	for _, ct := range []string{"text/html", "text/css", "text/javascript"} {
		openapi3filter.RegisterBodyDecoder(ct, asText)
	}
}

// dashboardPages returns the dashboard's routes on st as a node serves
// them, its logins checked by v, its actions served by the API api
// returns (built after its pages).
func dashboardPages(st store.Store, v *auth.Verifier, api func() *httpapi.API) []httpapi.Page {
	dash := web.Handler(web.Config{
		Store: st, Version: "v-test", Auth: v, SessionKey: []byte("golden-session-key"),
		CheckName: httpapi.CheckName,
		Act:       func(r *http.Request, g *auth.Grant) (int, []byte) { return api().Act(r, g) },
	})
	var pages []httpapi.Page
	for _, p := range web.Routes {
		pages = append(pages, httpapi.Page{Pattern: p, Handler: dash, GuardsItself: true})
	}
	return pages
}

// uiSession is a login session of the dashboard: its cookie and the
// CSRF token of its forms.
type uiSession struct {
	cookie *http.Cookie
	csrf   string
}

// noRedirects is a client that shows a redirect instead of following it.
var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// ui sends a request of the dashboard as a browser does, records its
// answer and checks it against docs/openapi.yaml. who is a token's name
// (sent as a bearer token, "bad" an unknown one), a session's name
// (g.sessions), "none", or "new browser" (no cookie either). form is the
// body, sent as a form; in it {csrf} is the CSRF token of who's forms and
// {NAME} the token NAME, so that the file shows neither. Every browser
// but a new one carries the CSRF cookie, and the cookies given.
func (g *golden) ui(who, method, path, form string, cookies ...*http.Cookie) *response {
	t := g.t
	t.Helper()
	s := g.sessions[who]
	csrf := goldenCSRF
	if s != nil {
		csrf = s.csrf
	}
	subst := []string{"{csrf}", csrf, "{admin}", goldenAdmin}
	for name, tok := range g.tokens {
		if name != "" {
			subst = append(subst, "{"+name+"}", tok)
		}
	}
	body := strings.NewReplacer(subst...).Replace(form)
	req, err := http.NewRequestWithContext(t.Context(), method, g.b.server.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	contentType := ""
	if form != "" {
		contentType = formType
		req.Header.Set("Content-Type", contentType)
	}
	if tok := g.tokens[who]; s == nil && tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if who != "new browser" {
		req.AddCookie(&http.Cookie{Name: "rowq_csrf", Value: goldenCSRF})
	}
	if s != nil {
		req.AddCookie(s.cookie)
	}
	tag := who
	for _, c := range cookies {
		req.AddCookie(c)
		tag += ", cookie " + c.Name
	}
	res, err := noRedirects.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	got, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s %s: read answer: %v", method, path, err)
	}
	r := &response{status: res.StatusCode, header: res.Header, body: got}
	if tag == "" {
		tag = "admin"
	}
	g.record(tag, method, path, form, r)
	g.check(method, path, body, contentType, r)
	return r
}

// cookieNames lists the names of the cookies an answer sets, "(deleted)"
// after a deleted one's; "" if none.
func cookieNames(h http.Header) string {
	var names []string
	for _, c := range (&http.Response{Header: h}).Cookies() {
		n := c.Name
		if c.MaxAge < 0 {
			n += " (deleted)"
		}
		names = append(names, n)
	}
	return strings.Join(names, ", ")
}

// cookie returns the cookie an answer sets, or fails.
func (g *golden) cookie(res *response, name string) *http.Cookie {
	g.t.Helper()
	for _, c := range (&http.Response{Header: res.header}).Cookies() {
		if c.Name == name && c.MaxAge >= 0 {
			return &http.Cookie{Name: c.Name, Value: c.Value}
		}
	}
	g.t.Fatalf("no cookie %s set by the answer (%d): %v", name, res.status, res.header["Set-Cookie"])
	return nil
}

var (
	titleRE  = regexp.MustCompile(`(?s)<title>(.*?)</title>`)
	h1RE     = regexp.MustCompile(`(?s)<h1[^>]*>(.*?)</h1>`)
	textRE   = regexp.MustCompile(`(?s)<p [^>]*id="(flash|error|question)"[^>]*>(.*?)</p>`)
	linkRE   = regexp.MustCompile(`<a href="([^"]*)" id="(back|cancel)">`)
	formRE   = regexp.MustCompile(`(?s)<form method="post" action="([^"]*)"[^>]*>(.*?)</form>`)
	hiddenRE = regexp.MustCompile(`<input type="hidden" name="([^"]*)" value="([^"]*)">`)
	buttonRE = regexp.MustCompile(`(?s)<button type="submit"([^>]*)>(.*?)</button>`)
	faRE     = regexp.MustCompile(`formaction="([^"]*)"`)
	tagRE    = regexp.MustCompile(`<[^>]*>`)
	markRE   = regexp.MustCompile(`<(a|p|td|span|code) ([^>]*)data-mark="([^"]*)"([^>]*)>`)
	hrefRE   = regexp.MustCompile(`href="([^"]*)"`)
	// pageMask hides a driver's words, which differ by database.
	pageMask = regexp.MustCompile(`((?:the database could not be read|retry later): ).*`)
)

// page describes a dashboard page by its markers, one a line. A form
// without its CSRF token fails.
func (g *golden) page(body []byte) string {
	b := string(body)
	text := func(s string) string {
		s = html.UnescapeString(tagRE.ReplaceAllString(s, ""))
		return pageMask.ReplaceAllString(strings.Join(strings.Fields(s), " "), "${1}DRIVER ERROR")
	}
	var out []string
	if m := titleRE.FindStringSubmatch(b); m != nil {
		out = append(out, "title: "+text(m[1]))
	}
	for _, m := range h1RE.FindAllStringSubmatch(b, -1) {
		out = append(out, "h1: "+text(m[1]))
	}
	for _, m := range textRE.FindAllStringSubmatch(b, -1) {
		out = append(out, m[1]+": "+text(m[2]))
	}
	for _, m := range linkRE.FindAllStringSubmatch(b, -1) {
		out = append(out, m[2]+": "+html.UnescapeString(m[1]))
	}
	for _, m := range markRE.FindAllStringSubmatchIndex(b, -1) {
		// A marked element holds no element of its own kind.
		tag, attrs := b[m[2]:m[3]], b[m[4]:m[5]]+b[m[8]:m[9]]
		inner, _, _ := strings.Cut(b[m[1]:], "</"+tag+">")
		mark := "mark " + b[m[6]:m[7]] + ": " + text(inner)
		if h := hrefRE.FindStringSubmatch(attrs); h != nil {
			mark += " -> " + html.UnescapeString(h[1])
		}
		out = append(out, mark)
	}
	for _, m := range formRE.FindAllStringSubmatch(b, -1) {
		f := "form " + html.UnescapeString(m[1])
		csrf := false
		for _, h := range hiddenRE.FindAllStringSubmatch(m[2], -1) {
			if h[1] == "csrf" {
				csrf = h[2] != ""
				continue
			}
			f += " " + h[1] + "=" + html.UnescapeString(h[2])
		}
		if !csrf {
			g.t.Errorf("form %s has no CSRF token", m[1])
		}
		for _, bt := range buttonRE.FindAllStringSubmatch(m[2], -1) {
			f += " [" + text(bt[2])
			if fa := faRE.FindStringSubmatch(bt[1]); fa != nil {
				f += " -> " + html.UnescapeString(fa[1])
			}
			f += "]"
		}
		out = append(out, f)
	}
	if len(out) == 0 {
		return "page: (no marker)\n"
	}
	return "page:\n    " + strings.Join(out, "\n    ") + "\n"
}

// csrfOf returns the CSRF token of the page's logout form.
func (g *golden) csrfOf(res *response) string {
	g.t.Helper()
	for _, m := range formRE.FindAllStringSubmatch(string(res.body), -1) {
		for _, h := range hiddenRE.FindAllStringSubmatch(m[2], -1) {
			if h[1] == "csrf" && h[2] != "" {
				return h[2]
			}
		}
	}
	g.t.Fatalf("no CSRF token on the page (%d): %s", res.status, res.body)
	return ""
}

// uiAction is a dashboard action's case: its form's path and the fields
// it needs beyond csrf and back, for the fixture dashboard() makes.
type uiAction struct {
	pattern, path, fields string
}

// dashboard sends the dashboard's pages, its login and every action, good
// and bad, on a queue ui of its own (paused, two jobs deferred an hour,
// four failure log entries, a flow: a job with callbacks and a dependent,
// in a batch), a schedule ui-s and a lock ui-l, and on the history of
// queue hq (finished()); then with the database down. It comes last, with the dispatcher stopped, so that
// no delivery changes a page while it runs.
func (g *golden) dashboard() {
	t, req := g.t, g.req
	g.b.disp.Stop(t.Context())
	// locks() holds lock s for a minute: it is released (unrecorded),
	// so that the overview shows the same locks however long the run.
	g.b.doAs(t, goldenAdmin, "DELETE", "/lock/s?owner=b&token=1", "")
	req("PUT", "/queue/ui", `{"paused":true}`)
	req("PUT", "/routing/uic", `{"queue_name":"ui"}`)
	fs := failEntries(t, g.b.st, "ui", 4)
	deferred := func() int64 {
		var j struct{ ID int64 }
		if err := json.Unmarshal(req("POST", "/job/uic", `{"url":"http://w/x","run_after":3600}`).body, &j); err != nil || j.ID == 0 {
			t.Fatalf("enqueue a job to ui: %v", err)
		}
		return j.ID
	}
	del, cancel := deferred(), deferred()
	flow := g.dashboardFlow()
	req("PUT", "/schedule/ui-s", `{"cron":"0 3 * * *","category":"uic","url":"http://w/s"}`)
	req("PUT", "/lock/ui-l", `{"owner":"o","ttl":3600}`)

	g.dashboardViews()
	g.dashboardLifecycle(flow)
	g.dashboardLogin()
	cases := []uiAction{
		{"/ui/queue/{name}/pause", "/ui/queue/ui/pause", ""},
		{"/ui/queue/{name}/resume", "/ui/queue/ui/resume", ""},
		{"/ui/queue/{name}/failed/{id}/retry", fmt.Sprintf("/ui/queue/ui/failed/%d/retry", fs[0].ID), ""},
		{"/ui/queue/{name}/failed/{id}/delete", fmt.Sprintf("/ui/queue/ui/failed/%d/delete", fs[1].ID), ""},
		{"/ui/queue/{name}/failed/retry", "/ui/queue/ui/failed/retry", "&all=yes"},
		{"/ui/queue/{name}/failed/delete", "/ui/queue/ui/failed/delete", fmt.Sprintf("&id=%d", fs[2].ID)},
		{"/ui/queue/{name}/job/{id}/delete", fmt.Sprintf("/ui/queue/ui/job/%d/delete", del), ""},
		{"/ui/queue/{name}/job/{id}/cancel", fmt.Sprintf("/ui/queue/ui/job/%d/cancel", cancel), ""},
		{"/ui/schedule/{name}/pause", "/ui/schedule/ui-s/pause", ""},
		{"/ui/schedule/{name}/resume", "/ui/schedule/ui-s/resume", ""},
		{"/ui/schedule/{name}/trigger", "/ui/schedule/ui-s/trigger", ""},
		{"/ui/lock/{name}/release", "/ui/lock/ui-l/release", "&owner=o&token=1"},
	}
	g.dashboardActions(cases)
	g.dashboardRefusals()
	g.dashboardDown()
}

// dashboardViews reads the pages of the dashboard as each kind of
// requester.
func (g *golden) dashboardViews() {
	ui := g.ui
	for _, p := range []string{"/ui", "/ui/queue/ui", "/ui/outbox"} {
		ui("", "GET", p, "")
		ui("reader", "GET", p, "")
		ui("confined", "GET", p, "")
		ui("enqueuer", "GET", p, "") // lacks read
		ui("none", "GET", p, "")
		ui("bad", "GET", p, "")
	}
	ui("", "GET", "/ui?after=q", "")
	ui("", "GET", "/ui?after=a%20b", "")
	ui("", "GET", "/ui/queue/nope", "")
	ui("", "GET", "/ui/queue/a%20b", "")
	ui("confined", "GET", "/ui/queue/nope", "") // refused before the read
	ui("none", "GET", "/ui/queue/ui", "", &http.Cookie{Name: "rowq_session", Value: "not-a-session"})
	ui("new browser", "GET", "/ui/style.css", "")
	ui("new browser", "GET", "/ui/dashboard.js", "")
}

// dashboardFlow stores, in queue ui, a job A with callbacks and a job B
// that waits for it, in a batch.
func (g *golden) dashboardFlow() *store.FlowInserted {
	t := g.t
	job := func(payload string) *store.JobInsertParams {
		return &store.JobInsertParams{Queue: "ui", Category: "uic", URL: "http://w/x", Payload: json.RawMessage(payload)}
	}
	fi, err := g.b.st.JobsInsertFlow(t.Context(), &store.FlowInsertParams{
		Jobs: []*store.FlowJobParams{
			{Job: job(`{"step":"a"}`), OnSuccess: job(""), OnFinish: job("")},
			{Job: job(`{"step":"b"}`), DependsOn: []store.FlowParent{{Index: 0}}, OnParentFailure: store.ParentFailureRun},
		},
		Batch: &store.BatchParams{Meta: json.RawMessage(`{"who":"<b>ada</b>"}`), OnSuccess: job("")},
	})
	if err != nil {
		t.Fatalf("store a flow in queue ui: %v", err)
	}
	return fi
}

// dashboardLifecycle reads the pages of lifecycles: a live job with its
// flow, a blocked one, the batches, queue hq's history and its finished
// jobs, as each kind of requester, and with bad and unknown ids.
func (g *golden) dashboardLifecycle(flow *store.FlowInserted) {
	ui := g.ui
	a, b := fmt.Sprintf("/ui/queue/ui/job/%d", flow.IDs[0]), fmt.Sprintf("/ui/queue/ui/job/%d", flow.IDs[1])
	batch := fmt.Sprintf("/ui/batch/%d", flow.BatchID)
	for _, p := range []string{a, "/ui/batches", batch} {
		for _, who := range []string{"", "reader", "confined", "enqueuer", "none", "bad"} {
			ui(who, "GET", p, "")
		}
	}
	ui("", "GET", b, "")
	ui("", "GET", "/ui/queue/hq", "")
	ui("", "GET", "/ui/queue/hq?status=failed", "")
	fs, err := g.b.st.FinishedList(g.t.Context(), &store.FinishedListParams{Queue: "hq", Limit: 10})
	if err != nil || len(fs) != 3 {
		g.t.Fatalf("queue hq's history: %d rows, %v; want the 3 of finished()", len(fs), err)
	}
	for _, f := range fs {
		ui("", "GET", fmt.Sprintf("/ui/queue/hq/job/%d", f.ID), "")
	}
	ui("", "GET", "/ui/queue/hq?before=x", "")
	ui("", "GET", "/ui/queue/hq?status=done", "")
	ui("", "GET", "/ui/queue/hq/job/999999", "")
	ui("", "GET", "/ui/queue/ui/job/999999", "") // keeps no history
	ui("", "GET", "/ui/queue/ui/job/x", "")
	ui("", "GET", "/ui/queue/a%20b/job/1", "")
	ui("", "GET", "/ui/queue/nope/job/1", "")
	ui("confined", "GET", "/ui/queue/nope/job/1", "") // refused before the read
	ui("", "GET", "/ui/batch/999999", "")
	ui("", "GET", "/ui/batch/x", "")
	ui("", "GET", "/ui/batches?before=x", "")
	ui("", "GET", "/ui/batches?before=999999", "")
}

// dashboardLogin logs in and out, good and bad; it leaves the sessions
// "admin session" and "reader session" in g.sessions.
func (g *golden) dashboardLogin() {
	ui := g.ui
	ui("new browser", "GET", "/ui/login", "")
	ui("none", "GET", "/ui/login?next=/ui/outbox", "")
	ui("", "GET", "/ui/login?next=/ui/outbox", "") // a token that may read
	ui("none", "POST", "/ui/login", "csrf={csrf}&token={bad}")
	ui("none", "POST", "/ui/login", "csrf={csrf}&token=")
	ui("none", "POST", "/ui/login", "csrf={csrf}&token={enqueuer}")
	ui("none", "POST", "/ui/login", "csrf=wrong&token={reader}")
	ui("new browser", "POST", "/ui/login", "csrf={csrf}&token={reader}")
	ui("none", "POST", "/ui/login", "csrf={csrf}&token=%zz")
	ui("none", "POST", "/ui/login", "csrf={csrf}&token="+strings.Repeat("x", 9000))
	for _, who := range []string{"reader", "admin"} {
		res := ui("none", "POST", "/ui/login", "csrf={csrf}&token={"+who+"}&next=/ui/queue/ui")
		s := &uiSession{cookie: g.cookie(res, "rowq_session")}
		name := who + " session"
		g.sessions[name] = s
		s.csrf = g.csrfOf(ui(name, "GET", "/ui/queue/ui", ""))
	}
	ui("none", "POST", "/ui/login", "csrf={csrf}&token={admin}&next=https://example.com/")
	ui("reader session", "GET", "/ui/login", "")
	// A session's page and forms.
	ui("reader session", "GET", "/ui", "")
	ui("reader session", "POST", "/ui/queue/ui/pause", "csrf={csrf}&back=/ui")
	ui("admin session", "POST", "/ui/queue/ui/pause", "csrf={csrf}&back=/ui/queue/ui")
	ui("admin session", "POST", "/ui/queue/ui/pause", "csrf="+goldenCSRF+"&back=/ui/queue/ui") // the cookie's, not the session's
	// Logout: refused forms, then a good one; the session's cookie is
	// deleted.
	ui("reader session", "POST", "/ui/logout", "csrf=wrong")
	ui("reader session", "POST", "/ui/logout", "csrf=%zz")
	ui("reader session", "POST", "/ui/logout", "csrf={csrf}&x="+strings.Repeat("x", 9000))
	ui("reader session", "POST", "/ui/logout", "csrf={csrf}")
	ui("none", "POST", "/ui/logout", "csrf={csrf}")
}

// dashboardActions sends every action of docs/openapi.yaml: without a
// login, with a bad token, without the scope, outside a confined token's
// queues, with a bad CSRF token, as a malformed and an oversized form,
// unconfirmed, and done, following the redirect to the page that shows
// what was done.
func (g *golden) dashboardActions(cases []uiAction) {
	ui := g.ui
	for _, op := range g.dashboardOperations() {
		i := slices.IndexFunc(cases, func(c uiAction) bool { return c.pattern == op.pattern })
		if i < 0 {
			g.t.Errorf("POST %s: a dashboard action without a case: add it to dashboard()", op.pattern)
			continue
		}
		c := cases[i]
		form := "csrf={csrf}&back=/ui/queue/ui" + c.fields
		ui("none", "POST", c.path, form)
		ui("bad", "POST", c.path, form)
		ui("reader", "POST", c.path, form)
		ui("confined", "POST", c.path, form) // other-* only
		ui("", "POST", c.path, "csrf=wrong&back=/ui/queue/ui"+c.fields)
		ui("", "POST", c.path, "csrf={csrf}&back=%zz")
		ui("", "POST", c.path, form+"&x="+strings.Repeat("x", 9000))
		ui("", "POST", c.path, form)
		done := ui("admin session", "POST", c.path, form+"&confirm=yes")
		if done.status == http.StatusSeeOther {
			ui("admin session", "GET", done.header.Get("Location"), "", g.cookie(done, "rowq_flash"))
		}
	}
}

// dashboardOperations returns the dashboard's actions in
// docs/openapi.yaml: its POST routes but the login's and logout's.
func (g *golden) dashboardOperations() []operation {
	return slices.DeleteFunc(g.operations(true), func(op operation) bool {
		return op.method != "POST" || op.pattern == "/ui/login" || op.pattern == "/ui/logout"
	})
}

// dashboardRefusals sends actions that the API refuses, or whose form
// lacks a field, and forms whose back field is not a dashboard page.
func (g *golden) dashboardRefusals() {
	ui := g.ui
	const yes = "csrf={csrf}&confirm=yes&back=/ui/queue/ui"
	for _, a := range []string{"pause", "resume"} {
		ui("", "POST", "/ui/queue/nope/"+a, yes)
		ui("", "POST", "/ui/queue/a%20b/"+a, yes)
	}
	ui("", "POST", "/ui/queue/ui/failed/999999/retry", yes)
	ui("", "POST", "/ui/queue/ui/failed/x/retry", yes)
	ui("", "POST", "/ui/queue/ui/failed/999999/delete", yes)
	ui("", "POST", "/ui/queue/ui/failed/retry", yes)
	ui("", "POST", "/ui/queue/ui/failed/delete", yes+"&id=x")
	ui("", "POST", "/ui/queue/ui/job/999999/delete", yes)
	ui("", "POST", "/ui/queue/ui/job/999999/cancel", yes)
	for _, a := range []string{"pause", "resume", "trigger"} {
		ui("", "POST", "/ui/schedule/nope/"+a, yes)
	}
	ui("", "POST", "/ui/lock/ui-l/release", yes+"&owner=o&token=1")
	ui("", "POST", "/ui/lock/ui-l/release", yes+"&token=1")
	ui("", "POST", "/ui/lock/a%20b/release", yes+"&owner=o&token=1")
	// back: a dashboard page, or else /ui.
	ui("", "POST", "/ui/queue/ui/pause", "csrf={csrf}&confirm=yes&back=https://example.com/")
	ui("", "POST", "/ui/queue/ui/pause", "csrf={csrf}&confirm=yes&back=/ui/login")
}

// dashboardDown sends the dashboard's pages, a login and every action
// confirmed, with the database down: as the admin token, whose check
// needs no database, and as a token the database holds.
func (g *golden) dashboardDown() {
	t := g.t
	up := g.b
	defer func() { g.b, g.label = up, "" }()
	down := unreachableStore(t, up.st.Dialect())
	// Authentication is on, with the admin token: a page or a login that
	// needs the tokens in the database finds them unreadable.
	v := auth.New(auth.Config{Tokens: down, Mode: auth.ModeOn, AdminToken: goldenAdmin})
	var b *bundle
	b = setup(t, down, func(o *options) {
		goldenOptions(down)(o)
		o.api.Pages = append(o.api.Pages, dashboardPages(down, v, func() *httpapi.API { return b.api })...)
	})
	g.b = b
	g.label = "database down"
	ui := g.ui
	for _, p := range []string{"/ui", "/ui/queue/q", "/ui/outbox", "/ui/queue/q/job/1", "/ui/batches", "/ui/batch/1"} {
		ui("", "GET", p, "")
	}
	ui("reader", "GET", "/ui", "")
	ui("none", "POST", "/ui/login", "csrf={csrf}&token={reader}")
	ui("none", "GET", "/ui/login", "")
	for _, op := range g.dashboardOperations() {
		fields := ""
		switch {
		case strings.HasSuffix(op.pattern, "/failed/retry"), strings.HasSuffix(op.pattern, "/failed/delete"):
			fields = "&all=yes"
		case strings.HasPrefix(op.pattern, "/ui/lock/"):
			fields = "&owner=o&token=1"
		}
		ui("", "POST", op.path, "csrf={csrf}&confirm=yes&back=/ui"+fields)
	}
}

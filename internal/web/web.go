// Package web serves rowq's dashboard: HTML pages, rendered on the server
// from the store, that show the queues with their statistics, charts of
// their last hour (chart.go) and dispatching node, one queue's jobs and
// failure log, blocked jobs and history, a job's page with its flow, the
// batches (flows.go), the schedules, the locks and the outbox's rejects
// (outbox.go), with buttons that act on them (actions.go). It is for a
// human looking after a cluster; everything it shows and does is also in
// the JSON API (docs/api.md), which is what scripts use, and each action is
// a request of that API. A page reads the database on every view; its
// script (templates/dashboard.js) fetches it again every 5 s and swaps its
// tables in place, and confirms actions in a dialog. Every page works
// without the script.
//
// With authentication on, a browser logs in with a token on /ui/login
// (login.go, with the guard of every page) and keeps a signed session
// cookie (session.go); every form is checked against cross-site request
// forgery (csrf.go).
package web

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rowq/rowq/internal/auth"
	"github.com/rowq/rowq/internal/stats"
	"github.com/rowq/rowq/internal/store"
)

//go:embed templates/*.html templates/style.css templates/dashboard.js
var files embed.FS

var pages = template.Must(template.New("").Funcs(template.FuncMap{
	"when": func(t time.Time) string {
		if t.IsZero() {
			return "–"
		}
		return t.UTC().Format("2006-01-02 15:04:05 UTC")
	},
	"rate":    func(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) },
	"short":   func(b []byte) string { return shorten(string(b), 120) },
	"pretty":  pretty,
	"bar":     progressOf,
	"add":     func(a, b int) int { return a + b },
	"first":   firstIDs,
	"percent": func(f *float64) float64 { return *f * 100 },
	"list":    func(v ...any) []any { return v },
	"act":     newActForm,
}).ParseFS(files, "templates/*.html"))

// actForm is the form of an action's button on a page.
type actForm struct {
	Action, Label, Back, CSRF string
	Hidden                    []field
}

// newActForm returns the form of a button that posts to action, from the
// page back, with the CSRF token and the hidden fields given as name,
// value pairs.
func newActForm(action, label, back, csrf string, hidden ...any) actForm {
	f := actForm{Action: action, Label: label, Back: back, CSRF: csrf}
	for i := 0; i+1 < len(hidden); i += 2 {
		f.Hidden = append(f.Hidden, field{fmt.Sprint(hidden[i]), fmt.Sprint(hidden[i+1])})
	}
	return f
}

// Store is what the dashboard reads: queues with their statistics and
// leaders, their jobs, failure logs and histories, flows and batches, the
// worker hosts their leaders slow down or hold back, schedules and locks.
type Store interface {
	store.QueueStore
	store.StatsStore
	store.InspectStore
	store.JobStore
	store.FinishedStore
	store.FlowStore
	store.ScheduleStore
	store.LockStore
	store.NodeStore
	store.OutboxStore
	store.WorkerHostStore
}

// Config configures the dashboard.
type Config struct {
	Store   Store
	Logger  *slog.Logger
	Version string
	// CheckName validates a queue name from the URL, as the JSON API
	// does, with an error that names field; nil accepts any.
	CheckName func(field, value string) error
	// Auth verifies tokens and says whether they are needed; nil serves
	// every page without a login.
	Auth *auth.Verifier
	// SessionKey signs the login sessions; every node of a database must
	// have the same.
	SessionKey []byte
	// Now is the clock of the sessions' expiry (time.Now if nil).
	Now func() time.Time
	// Act serves the API requests of the dashboard's actions; nil
	// refuses every action (501).
	Act ActFunc
	// History is the statistics of the last hour the charts draw; nil
	// draws none.
	History History
}

// Routes are the patterns the dashboard serves, for the API's route
// list. The dashboard makes their auth decisions itself (guard): the
// pages need a login or a token, the login page and the style sheet are
// open, and every POST checks its CSRF token.
var Routes = func() []string {
	r := []string{"GET /ui", "GET /ui/queue/{name}", "GET /ui/login", "POST /ui/login", "POST /ui/logout", "GET /ui/style.css", "GET /ui/dashboard.js", "GET /ui/outbox",
		"GET /ui/queue/{name}/job/{id}", "GET /ui/batches", "GET /ui/batch/{id}"}
	for _, a := range actions {
		r = append(r, a.pattern)
	}
	return r
}()

// Handler returns the dashboard; mount it on Routes.
func Handler(cfg Config) http.Handler {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	d := &dashboard{cfg: cfg}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ui", d.guard(d.overview))
	mux.HandleFunc("GET /ui/queue/{name}", d.guard(d.queue))
	mux.HandleFunc("GET /ui/login", d.loginPage)
	mux.HandleFunc("POST /ui/login", d.login)
	mux.HandleFunc("POST /ui/logout", d.logout)
	mux.HandleFunc("GET /ui/style.css", asset("style.css", "text/css; charset=utf-8"))
	mux.HandleFunc("GET /ui/dashboard.js", asset("dashboard.js", "text/javascript; charset=utf-8"))
	for _, a := range actions {
		mux.HandleFunc(a.pattern, d.act(a))
	}
	mux.HandleFunc("GET /ui/outbox", d.guard(d.outbox))
	mux.HandleFunc("GET /ui/queue/{name}/job/{id}", d.guard(d.job))
	mux.HandleFunc("GET /ui/batches", d.guard(d.batches))
	mux.HandleFunc("GET /ui/batch/{id}", d.guard(d.batch))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		// The only script is this dashboard's own file, which fetches
		// this dashboard's pages only; no other site frames a page or
		// receives a form, and the style sheet is this dashboard's own.
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		mux.ServeHTTP(w, r)
	})
}

type dashboard struct{ cfg Config }

func (d *dashboard) now() time.Time {
	if d.cfg.Now != nil {
		return d.cfg.Now()
	}
	return time.Now()
}

// asset serves a file of the dashboard: its style sheet or its script.
func asset(name, contentType string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		b, _ := files.ReadFile("templates/" + name)
		w.Header().Set("Content-Type", contentType)
		w.Header().Set("Cache-Control", "max-age=3600")
		w.Write(b)
	}
}

// listLimit bounds each table of a page: the JSON API pages further.
const listLimit = 100

// queuePage bounds the queues of the overview; ?after=NAME shows the next
// ones (a deployment with a queue per tenant may have 100,000).
const queuePage = 500

// queueRow is one queue of the overview.
type queueRow struct {
	*store.Queue
	Stats *store.QueueStats
}

func (d *dashboard) overview(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	after := r.URL.Query().Get("after")
	if after != "" && d.cfg.CheckName != nil {
		if err := d.cfg.CheckName("after", after); err != nil {
			d.message(w, r, http.StatusBadRequest, err.Error())
			return
		}
	}
	qs, err := d.cfg.Store.QueueList(ctx, &store.QueueListParams{After: after, Limit: queuePage + 1})
	if err != nil {
		d.fail(w, r, err)
		return
	}
	next := ""
	if len(qs) > queuePage {
		qs = qs[:queuePage]
		next = qs[queuePage-1].Name
	}
	// A token confined to some queues sees those only.
	g := auth.FromContext(ctx)
	qs = slices.DeleteFunc(qs, func(q *store.Queue) bool { return !g.Queue(q.Name) })
	// Only the page's queues' statistics are read: a deployment may have
	// 100,000 queues. Naming no queue would read every queue's, so an
	// empty page reads none.
	st := map[string]*store.QueueStats{}
	if len(qs) > 0 {
		names := make([]string, len(qs))
		for i, q := range qs {
			names[i] = q.Name
		}
		if st, err = d.cfg.Store.StatsGet(ctx, &store.StatsGetParams{Queues: names, Fresh: stats.Fresh}); err != nil {
			d.fail(w, r, err)
			return
		}
	}
	rows := make([]queueRow, 0, len(qs))
	for _, q := range qs {
		s := st[q.Name]
		if s == nil {
			s = &store.QueueStats{Queue: q.Name}
		}
		rows = append(rows, queueRow{Queue: q, Stats: s})
	}
	slices.SortFunc(rows, func(a, b queueRow) int { return strings.Compare(a.Name, b.Name) })
	scheds, err := d.cfg.Store.ScheduleList(ctx, &store.ScheduleListParams{Limit: listLimit})
	if err != nil {
		d.fail(w, r, err)
		return
	}
	locks, err := d.cfg.Store.LockList(ctx, &store.LockListParams{Limit: listLimit})
	if err != nil {
		d.fail(w, r, err)
		return
	}
	// As the API's listings: a confined token sees the schedules and
	// locks its patterns match, and a table may be short.
	scheds = slices.DeleteFunc(scheds, func(sc *store.Schedule) bool { return !g.Queue(sc.Name) })
	locks = slices.DeleteFunc(locks, func(l *store.LockLease) bool { return !g.Queue(l.Name) })
	// The nodes and how many queues each leads, as GET /nodes shows them:
	// not to a token confined to some queues (they would tell it how many
	// queues there are, and where).
	var nodes *store.Cluster
	if !g.Confined() {
		if nodes, err = d.cfg.Store.NodesLive(ctx); err != nil {
			d.fail(w, r, err)
			return
		}
	}
	d.render(w, r, http.StatusOK, "overview.html", map[string]any{
		"Title": "rowq", "Queues": rows, "Live": true, "Refresh": true,
		"Schedules": scheds, "Locks": locks, "Limit": listLimit, "Nodes": nodes,
		"After": after, "NextAfter": next, "QueuePage": queuePage,
	})
}

func (d *dashboard) queue(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	name, ok := d.queueName(w, r)
	if !ok {
		return
	}
	hp, err := historyParams(r, name)
	if err != nil {
		d.message(w, r, http.StatusBadRequest, err.Error())
		return
	}
	q, ok := d.queueOf(w, r, name)
	if !ok {
		return
	}
	st, err := d.cfg.Store.StatsGet(ctx, &store.StatsGetParams{Queue: name, Fresh: stats.Fresh})
	if err != nil {
		d.fail(w, r, err)
		return
	}
	s := st[name]
	if s == nil {
		s = &store.QueueStats{Queue: name}
	}
	leader, err := d.cfg.Store.QueueLeader(ctx, name)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		d.fail(w, r, err)
		return
	}
	jobs := map[string][]*store.Job{}
	for _, kind := range []string{store.JobsGrabbed, store.JobsWaiting, store.JobsDeferred} {
		if jobs[kind], err = d.cfg.Store.JobsList(ctx, &store.JobsListParams{Queue: name, Kind: kind, Limit: listLimit}); err != nil {
			d.fail(w, r, err)
			return
		}
	}
	failed, err := d.cfg.Store.FailedJobsList(ctx, &store.FailedJobsListParams{Queue: name, Desc: true, Limit: listLimit})
	if err != nil {
		d.fail(w, r, err)
		return
	}
	hosts, err := d.cfg.Store.WorkerHostsList(ctx, name)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	data := map[string]any{
		"Title": "rowq: " + name, "Queue": q, "Stats": s, "Leader": leader, "WorkerHosts": hosts,
		"Grabbed": jobs[store.JobsGrabbed], "Waiting": jobs[store.JobsWaiting], "Deferred": jobs[store.JobsDeferred],
		"Failed": failed, "Limit": listLimit, "Live": true, "Charts": d.charts(name, s.StatsCounters),
	}
	if err := d.queueFlows(ctx, q, hp, data); err != nil {
		d.fail(w, r, err)
		return
	}
	d.render(w, r, http.StatusOK, "queue.html", data)
}

// queueName returns the queue name of the request's path, or answers
// 400 for a bad one and 403 for one outside a confined token's queues.
func (d *dashboard) queueName(w http.ResponseWriter, r *http.Request) (string, bool) {
	name := r.PathValue("name")
	if d.cfg.CheckName != nil {
		if err := d.cfg.CheckName("name", name); err != nil {
			d.message(w, r, http.StatusBadRequest, err.Error())
			return "", false
		}
	}
	// Refused before the read, so that the answer says nothing of
	// whether another tenant's queue exists.
	if g := auth.FromContext(r.Context()); !g.Queue(name) {
		d.message(w, r, http.StatusForbidden, g.QueueError("queue "+strconv.Quote(name)).Error())
		return "", false
	}
	return name, true
}

// queueOf returns queue name, or answers 404 when it does not exist and
// 503 when the database cannot say.
func (d *dashboard) queueOf(w http.ResponseWriter, r *http.Request, name string) (*store.Queue, bool) {
	q, err := d.cfg.Store.QueueGet(r.Context(), name)
	if errors.Is(err, store.ErrNotFound) {
		d.message(w, r, http.StatusNotFound, "queue "+name+" does not exist")
		return nil, false
	}
	if err != nil {
		d.fail(w, r, err)
		return nil, false
	}
	return q, true
}

// chartWindow is the span the charts of a queue's page show.
const chartWindow = time.Hour

// charts returns the charts of the queue's last hour, or nil.
func (d *dashboard) charts(queue string, current store.StatsCounters) []chart {
	if d.cfg.History == nil {
		return nil
	}
	now := time.Now()
	return charts(d.cfg.History.Points(queue, now, current), now, chartWindow)
}

// fail answers a page that says the database could not be read.
func (d *dashboard) fail(w http.ResponseWriter, r *http.Request, err error) {
	d.cfg.Logger.Warn("dashboard: read the database", "path", r.URL.Path, "err", err)
	d.message(w, r, http.StatusServiceUnavailable, "the database could not be read: "+err.Error())
}

// message answers a page that says msg.
func (d *dashboard) message(w http.ResponseWriter, r *http.Request, status int, msg string) {
	d.render(w, r, status, "error.html", map[string]any{"Title": "rowq", "Message": msg})
}

// render executes a page into a buffer first, so that a template error
// answers 500 instead of half a page. Every page gets the version, the
// CSRF token of its forms, and the name of the session's token (whose
// pages show a logout button).
func (d *dashboard) render(w http.ResponseWriter, r *http.Request, status int, page string, data map[string]any) {
	data["Version"] = d.cfg.Version
	data["CSRF"] = csrfToken(w, r)
	data["Path"] = r.URL.Path
	data["Flash"] = takeFlash(w, r)
	if s := sessionFrom(r.Context()); s != nil {
		data["User"] = s.Name
	}
	// The buttons of the actions the grant may take; the action checks
	// again.
	g := auth.FromContext(r.Context())
	data["CanAdmin"], data["CanLocks"] = g.Has(auth.Admin), g.Has(auth.Locks)
	var b bytes.Buffer
	if err := pages.ExecuteTemplate(&b, page, data); err != nil {
		d.cfg.Logger.Error("dashboard: render", "page", page, "err", err)
		http.Error(w, "render "+page+": "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(b.Bytes())
}

// pretty returns JSON indented for a page, or as it is when it is not
// JSON.
func pretty(b []byte) string {
	var out bytes.Buffer
	if json.Indent(&out, b, "", "  ") != nil {
		return string(b)
	}
	return out.String()
}

// shorten cuts s to at most n runes, marking the cut.
func shorten(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

// Package web serves rowq's dashboard: read-only HTML pages, rendered on
// the server from the store, that show the queues with their statistics
// and dispatching node, one queue's jobs and failure log, the schedules
// and the locks. It is for a human glancing at a cluster; everything it
// shows is also in the JSON API (docs/api.md), which is what scripts use.
// A page reads the database on every view and refreshes itself every 5 s.
package web

import (
	"bytes"
	"embed"
	"errors"
	"html/template"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rowq/rowq/internal/stats"
	"github.com/rowq/rowq/internal/store"
)

//go:embed templates/*.html
var files embed.FS

var pages = template.Must(template.New("").Funcs(template.FuncMap{
	"when": func(t time.Time) string {
		if t.IsZero() {
			return "–"
		}
		return t.UTC().Format("2006-01-02 15:04:05 UTC")
	},
	"rate":  func(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) },
	"short": func(b []byte) string { return shorten(string(b), 120) },
	"list":  func(v ...any) []any { return v },
}).ParseFS(files, "templates/*.html"))

// Store is what the dashboard reads: queues with their statistics and
// leaders, their jobs and failure logs, schedules and locks.
type Store interface {
	store.QueueStore
	store.StatsStore
	store.InspectStore
	store.ScheduleStore
	store.LockStore
}

// Config configures the dashboard.
type Config struct {
	Store   Store
	Logger  *slog.Logger
	Version string
	// CheckName validates a queue name from the URL, as the JSON API
	// does; nil accepts any.
	CheckName func(string) error
}

// Routes are the patterns the dashboard serves, for the API's route list.
var Routes = []string{"GET /ui", "GET /ui/queue/{name}"}

// Handler returns the dashboard; mount it on Routes.
func Handler(cfg Config) http.Handler {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	d := &dashboard{cfg: cfg}
	mux := http.NewServeMux()
	mux.HandleFunc(Routes[0], d.overview)
	mux.HandleFunc(Routes[1], d.queue)
	return mux
}

type dashboard struct{ cfg Config }

// listLimit bounds each table of a page: the JSON API pages further.
const listLimit = 100

// queueRow is one queue of the overview.
type queueRow struct {
	*store.Queue
	Stats *store.QueueStats
}

func (d *dashboard) overview(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	qs, err := d.cfg.Store.QueueList(ctx)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	st, err := d.cfg.Store.StatsGet(ctx, &store.StatsGetParams{Fresh: stats.Fresh})
	if err != nil {
		d.fail(w, r, err)
		return
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
	d.render(w, r, http.StatusOK, "overview.html", map[string]any{
		"Title": "rowq", "Version": d.cfg.Version, "Queues": rows,
		"Schedules": scheds, "Locks": locks, "Limit": listLimit,
	})
}

func (d *dashboard) queue(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	name := r.PathValue("name")
	if d.cfg.CheckName != nil {
		if err := d.cfg.CheckName(name); err != nil {
			d.render(w, r, http.StatusBadRequest, "error.html", map[string]any{"Title": "rowq", "Version": d.cfg.Version, "Message": err.Error()})
			return
		}
	}
	q, err := d.cfg.Store.QueueGet(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		d.render(w, r, http.StatusNotFound, "error.html", map[string]any{"Title": "rowq", "Version": d.cfg.Version, "Message": "queue " + name + " does not exist"})
		return
	}
	if err != nil {
		d.fail(w, r, err)
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
	d.render(w, r, http.StatusOK, "queue.html", map[string]any{
		"Title": "rowq: " + name, "Version": d.cfg.Version, "Queue": q, "Stats": s, "Leader": leader,
		"Grabbed": jobs[store.JobsGrabbed], "Waiting": jobs[store.JobsWaiting], "Deferred": jobs[store.JobsDeferred],
		"Failed": failed, "Limit": listLimit,
	})
}

// fail answers a page that says the database could not be read.
func (d *dashboard) fail(w http.ResponseWriter, r *http.Request, err error) {
	d.cfg.Logger.Warn("dashboard: read the database", "path", r.URL.Path, "err", err)
	d.render(w, r, http.StatusServiceUnavailable, "error.html", map[string]any{
		"Title": "rowq", "Version": d.cfg.Version, "Message": "the database could not be read: " + err.Error(),
	})
}

// render executes a page into a buffer first, so that a template error
// answers 500 instead of half a page.
func (d *dashboard) render(w http.ResponseWriter, r *http.Request, status int, page string, data map[string]any) {
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

// shorten cuts s to at most n runes, marking the cut.
func shorten(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

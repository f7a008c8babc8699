// Package httpapi serves rowq's HTTP API: the Fireworq-compatible surface
// (jobs, queues, routings) and rowq's own resources. It validates every
// input and answers errors as JSON {"error": "..."} naming the field; it
// holds no SQL and talks to the database only through the store.
package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/rowq/rowq/internal/auth"
	"github.com/rowq/rowq/internal/dispatch"
	"github.com/rowq/rowq/internal/egress"
	"github.com/rowq/rowq/internal/enqueue"
	"github.com/rowq/rowq/internal/lock"
	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/rowqtype"
)

// Dispatcher is this node's dispatcher as the API sees it
// (*dispatch.Dispatcher).
type Dispatcher interface {
	// SetPaused applies a committed pause or resume of the queue to this
	// node's runner at once.
	SetPaused(queue string, paused bool)
	// Changed tells that the queue was created or its settings changed
	// (committed): this node and the queue's leader re-read it now.
	Changed(queue string)
	// Nudged handles a nudge from another node and reports whether this
	// node leads the queue.
	Nudged(queue string, settings bool) bool
	// Heartbeat renews the lease of an accepted job (a *dispatch.LeaseError
	// when it is no longer held).
	Heartbeat(ctx context.Context, b *dispatch.Beat) (time.Time, error)
	// Complete records the result of an accepted job.
	Complete(ctx context.Context, c *dispatch.Completion) error
	// LeaseQueue returns the queue of the job a lease token holds, "" if
	// none.
	LeaseQueue(ctx context.Context, id int64, token string) (string, error)
	// JobCancelled tells that a job was cancelled (committed; the job as
	// it was): it is counted, its delivery, if one runs, aborted, and a
	// pulled job's worker slot freed.
	JobCancelled(j *store.Job)
	// Pull leases jobs of a pull queue this node leads
	// (dispatch.ErrNotLeader when it does not).
	Pull(ctx context.Context, p *dispatch.PullRequest) ([]dispatch.Pulled, error)
	// LeasesEnded handles a nudge from another node: leases of the
	// queue's jobs ended there.
	LeasesEnded(queue string, gs []store.JobGrab)
	// Abort aborts the delivery of a cancelled job of queue if it runs on
	// this node, or drops it from the jobs held back by their key (a nudge
	// from the node that cancelled it).
	Abort(queue string, id int64) bool
}

// Scheduler is the node's schedule loop as the API sees it
// (*schedule.Scheduler).
type Scheduler interface {
	// Wake tells the loop that a schedule was put or resumed.
	Wake()
	// Trigger enqueues one run of the schedule now.
	Trigger(ctx context.Context, sc *store.Schedule) (*store.ScheduleRun, error)
}

// Page is a route whose answers are not JSON, such as the dashboard's
// HTML or Prometheus' text, served beside the API.
type Page struct {
	Pattern string // as for http.ServeMux, e.g. "GET /metrics"
	Handler http.Handler
	// GuardsItself means the handler makes the route's auth decision:
	// the dashboard, which takes a login session as well as a token,
	// sends a browser without either to its login page, and confines a
	// token to its queues. Other pages need the read scope and show
	// every queue.
	GuardsItself bool
}

// Config configures the API. Every service it names is required.
type Config struct {
	Store  store.Store
	Logger *slog.Logger
	// Enqueue stores new jobs.
	Enqueue *enqueue.Service
	// Dispatcher is this node's dispatcher.
	Dispatcher Dispatcher
	// Locks serves the lock API.
	Locks *lock.Service
	// Scheduler is the node's schedule loop.
	Scheduler Scheduler
	// Pages are served beside the API (the dashboard, /metrics).
	Pages []Page
	// QueueDefaults fills the fields a PUT /queue/{name} leaves out.
	QueueDefaults store.Queue
	// WorkerURLs decides which worker URLs jobs and schedules may name;
	// nil allows any http(s) URL but link-local and metadata addresses.
	WorkerURLs *egress.Policy
	// MaxBodyBytes bounds request bodies; larger ones get 413.
	MaxBodyBytes int64
	// MaxResult bounds the result of a completion (--max-result-bytes);
	// a larger one gets 413 (dispatch.DefaultMaxResultBytes when 0).
	MaxResult int
	// Version is reported by GET /version.
	Version string
	// Settings is reported by GET /settings (secrets already masked).
	Settings any
	// Auth verifies the tokens of requests; nil serves every request
	// without one (tests of other concerns).
	Auth *auth.Verifier
	// Peers forwards lease requests to the leaders of pull queues on
	// other nodes; nil serves only the queues this node leads.
	Peers Peers
}

// API is the HTTP API.
type API struct {
	cfg      Config
	log      *slog.Logger
	mux      *http.ServeMux
	patterns []string // route patterns, in registration order
}

// New builds the API.
func New(cfg Config) *API {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 1 << 20
	}
	if cfg.MaxResult <= 0 {
		cfg.MaxResult = dispatch.DefaultMaxResultBytes
	}
	a := &API{cfg: cfg, log: cfg.Logger, mux: http.NewServeMux()}
	a.routes()
	return a
}

// routes registers every route with its auth decision: the scopes that
// may call it and how a token confined to some queues is confined on it
// (see access).
func (a *API) routes() {
	const (
		read    = auth.Read
		enq     = auth.Enqueue
		locks   = auth.Locks
		work    = auth.Work
		admin   = auth.Admin
		byQueue = queuePath
		byLock  = lockPath
		bySched = schedulePath
	)
	a.handle("POST /job/{category}", need(inHandler, enq), a.pushJob)
	// A worker's lease of an accepted job (the token names its job's
	// queue: confined in the handler).
	a.handle("POST /job/{id}/heartbeat", need(inHandler, work), a.heartbeatJob)
	a.handle("POST /job/{id}/complete", need(inHandler, work), a.completeJob)
	// A pull worker's lease request; a node forwards it to the queue's
	// leader with the nodes' key.
	a.handle("POST /queue/{name}/lease", need(byQueue, work, auth.Node), a.leaseJobs)

	a.handle("GET /queues", need(inHandler, read), a.listQueues)
	a.handle("GET /queue/{name}", need(byQueue, read), a.getQueue)
	a.handle("PUT /queue/{name}", need(byQueue, admin), a.putQueue)
	a.handle("DELETE /queue/{name}", need(byQueue, admin), a.deleteQueue)
	a.handle("GET /queue/{name}/node", need(byQueue, read), a.queueNode)
	// Nodes nudge each other with the key they share (auth.Node).
	a.handle("POST /queue/{name}/wake", need(byQueue, auth.Node), a.wakeQueue)

	a.handle("GET /routings", need(inHandler, read), a.listRoutings)
	a.handle("GET /routing/{category}", need(inHandler, read), a.getRouting)
	a.handle("PUT /routing/{category}", need(inHandler, admin), a.putRouting)
	a.handle("DELETE /routing/{category}", need(inHandler, admin), a.deleteRouting)

	a.handle("GET /queue/{name}/grabbed", need(byQueue, read), a.listJobs(store.JobsGrabbed))
	a.handle("GET /queue/{name}/waiting", need(byQueue, read), a.listJobs(store.JobsWaiting))
	a.handle("GET /queue/{name}/deferred", need(byQueue, read), a.listJobs(store.JobsDeferred))
	a.handle("GET /queue/{name}/job/{id}", need(byQueue, read), a.getJob)
	a.handle("DELETE /queue/{name}/job/{id}", need(byQueue, admin), a.deleteJob)
	a.handle("POST /queue/{name}/job/{id}/cancel", need(byQueue, admin), a.cancelJob)
	a.handle("GET /queue/{name}/failed", need(byQueue, read), a.listFailed)
	a.handle("GET /queue/{name}/finished", need(byQueue, read), a.listFinished)
	a.handle("GET /queue/{name}/blocked", need(byQueue, read), a.listBlocked)
	a.handle("GET /queue/{name}/failed/{id}", need(byQueue, read), a.getFailed)
	a.handle("DELETE /queue/{name}/failed/{id}", need(byQueue, admin), a.deleteFailed)

	a.handle("GET /queue/{name}/stats", need(byQueue, read), a.queueStats)
	a.handle("GET /queues/stats", need(inHandler, read), a.allQueueStats)
	// rowq's additions to the queue API.
	a.handle("POST /jobs", need(inHandler, enq), a.pushJobs)
	a.handle("POST /queue/{name}/pause", need(byQueue, admin), a.pauseQueue(true))
	a.handle("POST /queue/{name}/resume", need(byQueue, admin), a.pauseQueue(false))
	a.handle("POST /queue/{name}/failed/{id}/retry", need(byQueue, admin), a.retryFailedJob)
	a.handle("POST /queue/{name}/failed/retry", need(byQueue, admin), a.retryFailedJobs)
	a.handle("DELETE /queue/{name}/failed", need(byQueue, admin), a.deleteFailedJobs)
	a.handle("PUT /lock/{name}", need(byLock, locks), a.acquireLock)
	a.handle("POST /lock/{name}/renew", need(byLock, locks), a.renewLock)
	a.handle("DELETE /lock/{name}", need(byLock, locks), a.releaseLock)
	a.handle("GET /lock/{name}", need(byLock, read, locks), a.getLock)
	a.handle("GET /locks", need(inHandler, read, locks), a.listLocks)
	a.handle("GET /schedules", need(inHandler, read), a.listSchedules)
	a.handle("GET /schedule/{name}", need(bySched, read), a.getSchedule)
	a.handle("PUT /schedule/{name}", need(bySched, admin), a.putSchedule)
	a.handle("DELETE /schedule/{name}", need(bySched, admin), a.deleteSchedule)
	a.handle("POST /schedule/{name}/pause", need(bySched, admin), a.pauseSchedule)
	a.handle("POST /schedule/{name}/resume", need(bySched, admin), a.resumeSchedule)
	a.handle("POST /schedule/{name}/trigger", need(bySched, admin), a.triggerSchedule)
	a.handle("GET /schedule/{name}/runs", need(bySched, read), a.scheduleRuns)
	// The outbox's rejects belong to no queue (a category may have none):
	// a token confined to some queues does not see them.
	a.handle("GET /outbox/rejects", need(allQueues, read), a.listOutboxRejects)
	// A batch's jobs may span queues, and its callbacks others: a token
	// confined to some queues does not see batches.
	a.handle("GET /batch/{id}", need(allQueues, read), a.getBatch)
	a.handle("GET /batches", need(allQueues, read), a.listBatches)

	a.handle("GET /version", open, func(*http.Request) (any, error) { return &rowqtype.Version{Version: a.cfg.Version}, nil })
	a.handle("GET /settings", need(allQueues, read), func(*http.Request) (any, error) { return a.cfg.Settings, nil })
	a.handle("GET /nodes", need(allQueues, read), a.nodes)
	a.handle("GET /healthz", open, a.health)
	for _, p := range a.cfg.Pages {
		ac := need(allQueues, read) // metrics shows every queue
		if p.GuardsItself {
			ac = open
		}
		a.handleHTTP(p.Pattern, ac, p.Handler)
	}
}

// ServeHTTP serves the API. Requests that match no route get a JSON 404 or
// 405 (with Allow) instead of the mux's plain text.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if _, pattern := a.mux.Handler(r); pattern == "" {
		rec := httptest.NewRecorder()
		a.mux.ServeHTTP(rec, r)
		if allow := rec.Header().Get("Allow"); allow != "" {
			w.Header().Set("Allow", allow)
		}
		msg := fmt.Sprintf("no such resource: %s %s", r.Method, r.URL.Path)
		if rec.Code == http.StatusMethodNotAllowed {
			msg = fmt.Sprintf("method %s not allowed on %s; allowed: %s", r.Method, r.URL.Path, rec.Header().Get("Allow"))
		}
		writeJSON(w, rec.Code, rowqtype.ErrorBody{Error: msg})
		return
	}
	a.mux.ServeHTTP(w, r)
}

// handlerFunc returns the value to answer with, or an error.
type handlerFunc func(r *http.Request) (any, error)

// Routes returns the patterns of every route the API serves, such as
// "GET /queue/{name}", in registration order.
func (a *API) Routes() []string { return append([]string(nil), a.patterns...) }

// handleHTTP serves pattern with h behind ac: for answers that are not
// JSON.
func (a *API) handleHTTP(pattern string, ac access, h http.Handler) {
	a.patterns = append(a.patterns, pattern)
	a.mux.Handle(pattern, a.guard(ac, h))
}

// handle serves pattern with h behind ac, answering JSON.
func (a *API) handle(pattern string, ac access, h handlerFunc) {
	a.handleHTTP(pattern, ac, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, a.cfg.MaxBodyBytes)
		v, err := h(r)
		if err != nil {
			a.writeError(w, r, err)
			return
		}
		if l, ok := v.(*linked); ok {
			w.Header().Set("Link", "<"+l.next+`>; rel="next"`)
			v = l.body
		}
		writeJSON(w, http.StatusOK, v)
	}))
}

// linked is an answer whose next page is named by a Link header (RFC
// 8288), for a listing whose body is a bare array (Fireworq's GET /queues)
// and so has no room for a next_cursor.
type linked struct {
	body any
	next string // the next page's path and query
}

// apiError is an error with its HTTP status; its message goes to the client.
type apiError struct {
	status    int
	msg       string
	body      any  // the answer's body when it says more than {"error": msg}
	challenge bool // a 401: say which authentication schemes rowq takes
}

func (e *apiError) Error() string { return e.msg }

func errorf(status int, format string, args ...any) error {
	return &apiError{status: status, msg: fmt.Sprintf(format, args...)}
}

func (a *API) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var ae *apiError
	var tooBig *http.MaxBytesError
	if errors.As(err, &ae) && ae.challenge {
		auth.Challenge(w.Header())
	}
	switch {
	case errors.As(err, &ae) && ae.body != nil:
		writeJSON(w, ae.status, ae.body)
	case errors.As(err, &ae):
		writeJSON(w, ae.status, rowqtype.ErrorBody{Error: ae.msg})
	case errors.As(err, &tooBig):
		writeJSON(w, http.StatusRequestEntityTooLarge, rowqtype.ErrorBody{Error: fmt.Sprintf("request body larger than %d bytes", tooBig.Limit)})
	case errors.Is(err, store.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		a.log.Warn("database unavailable", "method", r.Method, "path", r.URL.Path, "err", err)
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, rowqtype.ErrorBody{Error: "database unavailable, retry later: " + err.Error()})
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		// The client went away; nobody reads the answer.
	default:
		a.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		writeJSON(w, http.StatusInternalServerError, rowqtype.ErrorBody{Error: "internal error: " + err.Error()})
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// decode reads a JSON object into dst, refusing unknown fields, values of
// the wrong type, trailing data and bodies over the size limit.
func decode(r *http.Request, dst any) error { return decodeBody(r, dst, false) }

// decodeOptional is decode for bodies that may be empty (all fields optional).
func decodeOptional(r *http.Request, dst any) error { return decodeBody(r, dst, true) }

func decodeBody(r *http.Request, dst any, emptyOK bool) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		if emptyOK && err == io.EOF {
			return nil
		}
		return decodeError(err)
	}
	// Read to the end: dec.More misses a stray '}' or ']', and a body that
	// goes over the size limit after the object must still get 413.
	if _, err := dec.Token(); err != io.EOF {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return err
		}
		return errorf(http.StatusBadRequest, "body: want one JSON object, found more after it")
	}
	return nil
}

func decodeError(err error) error {
	var (
		typeErr   *json.UnmarshalTypeError
		syntaxErr *json.SyntaxError
		tooBig    *http.MaxBytesError
	)
	switch {
	case errors.As(err, &tooBig):
		return err
	case errors.As(err, &typeErr):
		if typeErr.Field == "" {
			return errorf(http.StatusBadRequest, "body: want a JSON object, got %s", typeErr.Value)
		}
		// The path names embedded Go structs first ("JobRequest.url").
		return errorf(http.StatusBadRequest, "%s: want %s, got %s", trimGoPath(typeErr.Field), typeName(typeErr.Type.String()), typeErr.Value)
	case errors.As(err, &syntaxErr):
		return errorf(http.StatusBadRequest, "body: invalid JSON at byte %d: %v", syntaxErr.Offset, err)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		field := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return errorf(http.StatusBadRequest, "%s: unknown field", field)
	case err == io.EOF:
		return errorf(http.StatusBadRequest, "body: empty, want a JSON object")
	default:
		return errorf(http.StatusBadRequest, "body: %v", err)
	}
}

func typeName(goType string) string {
	switch strings.TrimPrefix(goType, "*") {
	case "int", "int64", "uint", "uint64":
		return "an integer"
	case "float64":
		return "a number"
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	}
	switch {
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	case strings.Contains(goType, "."):
		return "a JSON object" // a struct of rowqtype
	default:
		return goType
	}
}

func (a *API) health(r *http.Request) (any, error) {
	if err := a.cfg.Store.Ping(r.Context()); err != nil {
		return nil, fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	return &rowqtype.Health{Status: "ok"}, nil
}

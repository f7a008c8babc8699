package httpapi

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"

	"github.com/rowq/rowq/internal/auth"
	"github.com/rowq/rowq/internal/enqueue"
)

// access is a route's auth decision, made where the route is registered:
// the scopes that may call it and how a token confined to some queues is
// confined on it.
type access struct {
	scopes  []auth.Scope // one of these (admin holds all); none: open to anyone
	confine confine
}

// confine says how a route keeps a token with queue patterns to its
// queues.
type confine int

const (
	// noQueue: the route touches no queue (open routes).
	noQueue confine = iota
	// queuePath: the path's {name} is a queue; a name outside the
	// token's patterns is refused with 403 before the handler runs, so
	// the answer tells nothing of whether the queue exists.
	queuePath
	// lockPath and schedulePath: the path's {name} is a lock or a
	// schedule, whose names share the queues' patterns (a tenant's
	// prefix covers its locks and schedules); refused as for queuePath.
	lockPath
	schedulePath
	// inHandler: the handler confines (enqueue by the routed queue,
	// listings filtered, routings and schedules by their queue).
	inHandler
	// allQueues: the route shows every queue (metrics, dashboard,
	// settings); a confined token is refused.
	allQueues
)

// open is the decision of the routes anyone may call.
var open = access{}

// need is the decision of a route that needs one of scopes.
func need(c confine, scopes ...auth.Scope) access { return access{scopes: scopes, confine: c} }

// guard puts h behind the route's auth decision: a request without a
// valid token gets 401, a token without the scope or the queue 403, and
// the handler finds the token's grant in the request's context. A
// request that changes something with the admin scope is logged with the
// token's name.
func (a *API) guard(ac access, h http.Handler) http.Handler {
	if len(ac.scopes) == 0 {
		return h
	}
	adminChange := slices.Equal(ac.scopes, []auth.Scope{auth.Admin})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g, err := a.authenticate(r)
		if err == nil {
			err = allowed(g, ac, r)
		}
		if err != nil {
			a.writeError(w, r, err)
			return
		}
		r = r.WithContext(auth.NewContext(r.Context(), g))
		if !adminChange {
			h.ServeHTTP(w, r)
			return
		}
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(sw, r)
		a.log.Info("admin change", "token", g.Name, "method", r.Method, "path", r.URL.Path, "status", sw.status)
	})
}

// actingKey is the context key of the grant a request is served for by
// Act: set in this process only, never from a request.
type actingKey struct{}

// Act serves r as the API serves a request that carries the token of g,
// which the caller authenticated otherwise (the dashboard, from its login
// session): the route's auth decision is made for g (its scopes, its
// queues), then the route's own handler validates and acts. It returns
// the answer's status and JSON body. The dashboard's actions go through
// here, so that they follow the API's rules by running its code.
func (a *API) Act(r *http.Request, g *auth.Grant) (int, []byte) {
	rec := httptest.NewRecorder()
	a.ServeHTTP(rec, r.WithContext(context.WithValue(r.Context(), actingKey{}, g)))
	return rec.Code, rec.Body.Bytes()
}

// authenticate returns the request's grant, or the 401 or 503 error.
func (a *API) authenticate(r *http.Request) (*auth.Grant, error) {
	if g, ok := r.Context().Value(actingKey{}).(*auth.Grant); ok && g != nil {
		return g, nil
	}
	if a.cfg.Auth == nil {
		return auth.Unrestricted, nil
	}
	g, err := a.cfg.Auth.Authenticate(r)
	if errors.Is(err, auth.ErrNoToken) || errors.Is(err, auth.ErrBadToken) {
		return nil, &apiError{status: http.StatusUnauthorized, msg: err.Error(), challenge: true}
	}
	return g, err
}

// allowed checks the scope and the queue of the path.
func allowed(g *auth.Grant, ac access, r *http.Request) error {
	if err := g.Need(ac.scopes...); err != nil {
		return errorf(http.StatusForbidden, "%v", err)
	}
	switch ac.confine {
	case allQueues:
		if g.Confined() {
			return errorf(http.StatusForbidden, "token %q is confined to some queues, and %s shows every queue: use a token without --queues", g.Name, r.URL.Path)
		}
	case queuePath:
		return allowQueue(g, "queue", r.PathValue("name"))
	case lockPath:
		return allowQueue(g, "lock", r.PathValue("name"))
	case schedulePath:
		return allowQueue(g, "schedule", r.PathValue("name"))
	}
	return nil
}

// allowQueue answers 403 unless g may use the queue (or lock) name, named
// what in the message. A name that is not valid is left to the handler,
// which answers 400.
func allowQueue(g *auth.Grant, what, name string) error {
	if checkName("name", name) != nil || g.Queue(name) {
		return nil
	}
	return errorf(http.StatusForbidden, "%v", g.QueueError(what+" "+strconv.Quote(name)))
}

// allowRouted answers 403 unless the grant of ctx may use queue, the
// queue category routes to: the message names the category, not the
// queue, which may be another tenant's.
func allowRouted(ctx context.Context, category, queue string) error {
	if g := auth.FromContext(ctx); !g.Queue(queue) {
		return errorf(http.StatusForbidden, "%v", g.QueueError("category "+strconv.Quote(category)+"'s queue"))
	}
	return nil
}

// visible keeps the elements of xs whose queue (or lock) the grant of ctx
// may use.
func visible[T any](ctx context.Context, xs []T, name func(T) string) []T {
	g := auth.FromContext(ctx)
	if !g.Confined() {
		return xs
	}
	return slices.DeleteFunc(xs, func(x T) bool { return !g.Queue(name(x)) })
}

// statusWriter records the status a handler answered with.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(status int) {
	w.status = status
	w.ResponseWriter.WriteHeader(status)
}

// allowCategory answers 403 unless the grant of ctx may use the queue
// category routes to now; a category that routes nowhere is for
// unconfined tokens only.
func (a *API) allowCategory(ctx context.Context, category string) error {
	if !auth.FromContext(ctx).Confined() {
		return nil
	}
	d, err := a.cfg.Enqueue.Route(ctx, category)
	var ue *enqueue.UnroutableError
	if err != nil && !errors.As(err, &ue) {
		return err
	}
	return allowRouted(ctx, category, d.Queue)
}

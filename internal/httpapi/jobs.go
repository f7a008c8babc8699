package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/rowqtype"
)

// validateJob checks the body of POST /job/{category} (an element of
// POST /jobs). Durations are seconds.
func validateJob(req *rowqtype.JobRequest) error {
	if err := checkURL("url", req.URL); err != nil {
		return err
	}
	// The decoder keeps a payload's bytes as sent; MySQL and PostgreSQL
	// refuse text that is not UTF-8, so refuse it here with a 400.
	if !utf8.Valid(req.Payload) {
		return errorf(http.StatusBadRequest, "payload: must be valid UTF-8")
	}
	for _, c := range []struct {
		field  string
		v      *int
		lo, hi int
	}{
		{"run_after", req.RunAfter, 0, maxRunAfter},
		{"max_retries", req.MaxRetries, 0, maxRetries},
		{"retry_delay", req.RetryDelay, 0, maxRetryDelay},
		{"timeout", req.Timeout, 0, maxTimeout},
	} {
		if err := checkRange(c.field, c.v, c.lo, c.hi); err != nil {
			return err
		}
	}
	return validateJobExtra(req)
}

func (a *API) pushJob(r *http.Request) (any, error) {
	category := r.PathValue("category")
	if err := checkName("category", category); err != nil {
		return nil, err
	}
	var req rowqtype.JobRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	p, err := a.jobParams(r.Context(), category, &req, nil)
	if err != nil {
		return nil, err
	}
	if p.UniqueKey != "" {
		// Not through the group commit: a key's holder is found by a
		// statement of its own (see Store.JobsPush).
		return a.pushUnique(r.Context(), p)
	}
	// The answer goes out only after the commit: 2xx means durable.
	id, err := a.enqueue(r.Context(), p)
	if err != nil {
		return nil, fmt.Errorf("enqueue job: %w", err)
	}
	a.cfg.Stats.Pushed(p.Queue, 1)
	return toJobPushed(p, store.JobPushed{ID: id}), nil
}

// jobParams validates a job request and routes its category (through
// routes, a cache for one request, when not nil).
func (a *API) jobParams(ctx context.Context, category string, req *rowqtype.JobRequest, routes map[string]string) (*store.JobInsertParams, error) {
	if err := validateJob(req); err != nil {
		return nil, err
	}
	if string(req.Payload) == "null" {
		req.Payload = nil // null means no payload, as when the field is absent
	}
	queue, ok := routes[category]
	if !ok {
		var err error
		if queue, err = a.route(ctx, category); err != nil {
			return nil, err
		}
		if routes != nil {
			routes[category] = queue
		}
	}
	return &store.JobInsertParams{
		Queue:      queue,
		Category:   category,
		URL:        req.URL,
		Payload:    req.Payload,
		RunAfter:   time.Duration(valueOr(req.RunAfter, 0)) * time.Second,
		Timeout:    valueOr(req.Timeout, 0),
		MaxRetries: valueOr(req.MaxRetries, 0),
		RetryDelay: valueOr(req.RetryDelay, 0),
		JobExtra:   jobExtra(req),
	}, nil
}

// route finds the queue for a category: its routing, else the default
// queue. The routing's queue must exist.
// Answers that lead to an insert are cached (see routeCache).
func (a *API) route(ctx context.Context, category string) (string, error) {
	if q, ok := a.routeCache.get(category); ok {
		return q, nil
	}
	started := time.Now()
	rt, err := a.cfg.Store.RoutingGet(ctx, category)
	switch {
	case err == nil:
		if _, err := a.cfg.Store.QueueGet(ctx, rt.QueueName); errors.Is(err, store.ErrNotFound) {
			return "", errorf(http.StatusNotFound, "category: %q is routed to queue %q, which does not exist", category, rt.QueueName)
		} else if err != nil {
			return "", err
		}
		a.routeCache.put(category, rt.QueueName, started)
		return rt.QueueName, nil
	case !errors.Is(err, store.ErrNotFound):
		return "", err
	case a.cfg.DefaultQueue != "":
		a.routeCache.put(category, a.cfg.DefaultQueue, started)
		return a.cfg.DefaultQueue, nil
	default:
		return "", errorf(http.StatusNotFound, "category: no routing for %q and no default queue; PUT /routing/%s first", category, category)
	}
}

// inserted is one job's outcome in a group commit.
type inserted struct {
	id  int64
	err error
}

// insertJobs is the group commit behind POST /job: one transaction for
// every enqueue that arrived while the previous one ran. If the batch fails
// for a reason other than the database being away, each job is tried alone
// so that one bad job fails only its own request.
func (a *API) insertJobs(ctx context.Context, jobs []*store.JobInsertParams) ([]inserted, error) {
	ids, err := a.cfg.Store.JobsInsert(ctx, jobs)
	if err != nil && (len(jobs) == 1 || errors.Is(err, store.ErrUnavailable)) {
		return nil, err
	}
	res := make([]inserted, len(jobs))
	if err == nil {
		for i, id := range ids {
			res[i].id = id
		}
		return res, nil
	}
	a.log.Warn("batched enqueue failed; inserting one by one", "jobs", len(jobs), "err", err)
	for i, j := range jobs {
		one, err := a.cfg.Store.JobsInsert(ctx, []*store.JobInsertParams{j})
		if err != nil {
			res[i].err = err
			continue
		}
		res[i].id = one[0]
	}
	return res, nil
}

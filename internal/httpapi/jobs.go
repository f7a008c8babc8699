package httpapi

import (
	"context"
	"errors"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/rowq/rowq/internal/enqueue"
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
	// The answer goes out only after the commit: 2xx means durable.
	res, err := a.cfg.Enqueue.Push(r.Context(), p)
	if err != nil {
		return nil, err
	}
	return toJobPushed(p, res), nil
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
		JobOptions: jobOptions(req),
	}, nil
}

// route finds the queue for a category (enqueue.Service.Route), and
// answers 404 naming the category when it has none.
func (a *API) route(ctx context.Context, category string) (string, error) {
	q, err := a.cfg.Enqueue.Route(ctx, category)
	var ue *enqueue.UnroutableError
	switch {
	case errors.As(err, &ue) && ue.Queue != "":
		return "", errorf(http.StatusNotFound, "category: %q is routed to queue %q, which does not exist", category, ue.Queue)
	case errors.As(err, &ue):
		return "", errorf(http.StatusNotFound, "category: no routing for %q and no default queue; PUT /routing/%s first", category, category)
	}
	return q, err
}

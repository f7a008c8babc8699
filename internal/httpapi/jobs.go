package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/rowq/rowq/internal/enqueue"
	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/tracing"
	"github.com/rowq/rowq/internal/validate"
	"github.com/rowq/rowq/rowqtype"
)

// maxPushJobs bounds the jobs of one POST /jobs.
const maxPushJobs = 1000

// maxBatchJobs bounds the jobs of one POST /jobs that makes a batch: a
// batch is closed when it is created, so every job of it comes in that
// one request (and within --max-body-bytes).
const maxBatchJobs = 10000

// validateJob checks the body of POST /job/{category} (an element of
// POST /jobs), as the outbox checks its rows (validate.Job).
func (a *API) validateJob(req *rowqtype.JobRequest) error {
	return badRequest(validate.Job(req, a.cfg.WorkerURLs))
}

func (a *API) pushJob(r *http.Request) (any, error) {
	category := r.PathValue("category")
	if err := checkName("category", category); err != nil {
		return nil, err
	}
	var req jobBody
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	if err := refs(&req.JobRequest, req.DependsOn); err != nil {
		return nil, err
	}
	if hasFlow(&req.JobRequest, req.callbacks()) || req.UniqueKey != nil {
		// unique_key alone is checked here too (flowOf says whether it
		// goes with the rest), then takes the usual path.
		f, err := a.flowOf(r.Context(), -1, &req.JobRequest, req.callbacks(), false, nil)
		if err != nil {
			return nil, err
		}
		if f != nil {
			return a.pushJobFlow(r, category, &req.JobRequest, f)
		}
	}
	p, err := a.jobParams(r.Context(), category, &req.JobRequest, nil)
	if err != nil {
		return nil, err
	}
	headerTrace(r, p)
	// The answer goes out only after the commit: 2xx means durable.
	res, err := a.cfg.Enqueue.Push(r.Context(), p)
	if err != nil {
		return nil, err
	}
	return toJobPushed(p, res), nil
}

// pushJobFlow is POST /job/{category} of a job with a flow f.
func (a *API) pushJobFlow(r *http.Request, category string, req *rowqtype.JobRequest, f *store.FlowJobParams) (any, error) {
	p, err := a.jobParams(r.Context(), category, req, nil)
	if err != nil {
		return nil, err
	}
	flows := []*store.FlowJobParams{f}
	headerTrace(r, append(callbackParams(flows, nil), p)...)
	out, err := a.pushFlows(r.Context(), []*store.JobInsertParams{p}, flows, nil, func(int) string { return "" })
	if err != nil {
		return nil, err
	}
	return out.Jobs[0], nil
}

// jobParams validates a job request and routes its category (through
// routes, a cache for one request, when not nil).
func (a *API) jobParams(ctx context.Context, category string, req *rowqtype.JobRequest, routes map[string]enqueue.Destination) (*store.JobInsertParams, error) {
	if err := a.validateJob(req); err != nil {
		return nil, err
	}
	dest, ok := routes[category]
	if !ok {
		var err error
		if dest, err = a.route(ctx, category); err != nil {
			return nil, err
		}
		if routes != nil {
			routes[category] = dest
		}
	}
	if err := allowRouted(ctx, category, dest.Queue); err != nil {
		return nil, err
	}
	if err := badRequest(validate.JobQueue(req.URL, valueOr(req.ConcurrencyKey, ""), dest.Queue, dest.Pull)); err != nil {
		return nil, err
	}
	return validate.JobParams(dest.Queue, category, req), nil
}

// headerTrace gives the jobs that have no trace context of their own
// (the traceparent field) the request's traceparent and tracestate
// headers. Invalid headers are ignored, as W3C Trace Context tells a
// receiver (tracing.FromHeader): they may come from a proxy or a library
// rather than the client, and must not cost it its job.
func headerTrace(r *http.Request, ps ...*store.JobInsertParams) {
	parent, state := tracing.FromHeader(r.Header)
	if parent == "" {
		return
	}
	for _, p := range ps {
		if p.Trace.Parent == "" {
			p.Trace = store.Trace{Parent: parent, State: state}
		}
	}
}

// route finds the queue for a category (enqueue.Service.Route), and
// answers 404 naming the category when it has none.
func (a *API) route(ctx context.Context, category string) (enqueue.Destination, error) {
	d, err := a.cfg.Enqueue.Route(ctx, category)
	var ue *enqueue.UnroutableError
	switch {
	case errors.As(err, &ue) && ue.Queue != "":
		return d, errorf(http.StatusNotFound, "category: %q is routed to queue %q, which does not exist", category, ue.Queue)
	case errors.As(err, &ue):
		return d, errorf(http.StatusNotFound, "category: no routing for %q and no default queue; PUT /routing/%s first", category, category)
	}
	return d, err
}

// toJobPushed answers an enqueue of p with outcome res: the new job, or the
// pending job that holds p's unique key.
func toJobPushed(p *store.JobInsertParams, res store.JobPushed) *rowqtype.PushedJob {
	out := &rowqtype.PushedJob{
		ID: res.ID, QueueName: p.Queue, Category: p.Category, URL: p.URL, Payload: p.Payload,
		RunAfter: int(p.RunAfter / time.Second), MaxRetries: p.MaxRetries, RetryDelay: p.RetryDelay, Timeout: p.Timeout,
		Priority: p.Priority, RetryBackoff: p.RetryBackoff, RetryDelayMax: p.RetryDelayMax, RetryJitter: p.RetryJitter,
		ConcurrencyKey: p.ConcurrencyKey, ConcurrencyLimit: p.ConcurrencyLimit, Ordered: p.Ordered,
	}
	if res.Existing && res.Job != nil {
		out = storedJobPushed(res.Job)
	}
	if p.UniqueKey != "" {
		out.UniqueKey = p.UniqueKey
		out.Existing = &res.Existing
	}
	return out
}

// storedJobPushed shows a stored job as an enqueue answer. Its run_after is the
// time from its creation to its next try.
func storedJobPushed(j *store.Job) *rowqtype.PushedJob {
	return &rowqtype.PushedJob{
		ID: j.ID, QueueName: j.Queue, Category: j.Category, URL: j.URL, Payload: j.Payload,
		RunAfter:   max(int(j.NextTry.Sub(j.CreatedAt)/time.Second), 0),
		MaxRetries: j.MaxRetries, RetryDelay: j.RetryDelay, Timeout: j.Timeout,
		Priority: j.Priority, RetryBackoff: j.RetryBackoff, RetryDelayMax: j.RetryDelayMax,
		RetryJitter: j.RetryJitter, UniqueKey: j.UniqueKey,
		ConcurrencyKey: j.ConcurrencyKey, ConcurrencyLimit: j.ConcurrencyLimit, Ordered: j.Ordered,
	}
}

// pushJobsRequest is how POST /jobs is decoded: rowqtype.JobsRequest with
// each element (a rowqtype.BatchJob) and the batch left raw, so that each
// is decoded on its own and an error names its element ("jobs[3].url:
// required").
type pushJobsRequest struct {
	Jobs  []json.RawMessage `json:"jobs"`
	Batch json.RawMessage   `json:"batch"`
}

// pushJobs is POST /jobs: up to maxPushJobs jobs (maxBatchJobs with a
// batch) in one transaction. Jobs
// without a flow, and no batch, take the path they always took
// (PushMany); else pushFlows.
func (a *API) pushJobs(r *http.Request) (any, error) {
	var req pushJobsRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	limit, with := maxPushJobs, ""
	if len(req.Batch) > 0 && string(req.Batch) != "null" {
		limit, with = maxBatchJobs, " with a batch"
	}
	if n := len(req.Jobs); n < 1 || n > limit {
		return nil, errorf(http.StatusBadRequest, "jobs: must hold 1..%d jobs%s, got %d", limit, with, n)
	}
	routes := map[string]enqueue.Destination{}
	batch, err := a.batchOf(r.Context(), req.Batch, routes)
	if err != nil {
		return nil, err
	}
	ps := make([]*store.JobInsertParams, len(req.Jobs))
	var flows []*store.FlowJobParams // nil while no job has a flow
	for i, raw := range req.Jobs {
		p, f, err := a.pushJobsElement(r.Context(), i, raw, batch != nil, routes)
		if err != nil {
			return nil, elementError(fmt.Sprintf("jobs[%d]", i), err)
		}
		ps[i] = p
		if f != nil {
			if flows == nil {
				flows = make([]*store.FlowJobParams, len(req.Jobs))
			}
			flows[i] = f
		}
	}
	if flows != nil || batch != nil {
		headerTrace(r, append(callbackParams(flows, batch), ps...)...)
		return a.pushFlows(r.Context(), ps, flows, batch, func(i int) string { return fmt.Sprintf("jobs[%d].", i) })
	}
	headerTrace(r, ps...)
	res, err := a.cfg.Enqueue.PushMany(r.Context(), ps)
	if err != nil {
		return nil, err
	}
	out := make([]*rowqtype.PushedJob, len(ps))
	for i, p := range ps {
		out[i] = toJobPushed(p, res[i])
	}
	return &rowqtype.PushedJobs{Jobs: out}, nil
}

// pushJobsElement decodes and checks element i of POST /jobs, whose jobs
// make a batch when inBatch: the job, and its flow (nil for none).
func (a *API) pushJobsElement(ctx context.Context, i int, raw json.RawMessage, inBatch bool, routes map[string]enqueue.Destination) (*store.JobInsertParams, *store.FlowJobParams, error) {
	var el jobElement
	if err := decodeStrict(raw, &el); err != nil {
		return nil, nil, err
	}
	if err := refs(&el.JobRequest, el.DependsOn); err != nil {
		return nil, nil, err
	}
	if err := checkName("category", el.Category); err != nil {
		return nil, nil, err
	}
	var f *store.FlowJobParams
	if inBatch || el.UniqueKey != nil || hasFlow(&el.JobRequest, el.callbacks()) {
		var err error
		if f, err = a.flowOf(ctx, i, &el.JobRequest, el.callbacks(), inBatch, routes); err != nil {
			return nil, nil, err
		}
	}
	p, err := a.jobParams(ctx, el.Category, &el.JobRequest, routes)
	return p, f, err
}

// elementError names the element of a list in a client error:
// "url: required" becomes "jobs[3].url: required".
func elementError(name string, err error) error {
	var ae *apiError
	if !errors.As(err, &ae) {
		return err
	}
	if rest, ok := strings.CutPrefix(ae.msg, "body: "); ok {
		return errorf(ae.status, "%s: %s", name, rest)
	}
	return errorf(ae.status, "%s.%s", name, ae.msg)
}

// toJobJSON shows a stored job as the Fireworq job object of the
// inspection endpoints.
func toJobJSON(j *store.Job) *rowqtype.Job {
	status := rowqtype.JobStatusClaimed
	switch j.State {
	case store.StateGrabbed:
		status = rowqtype.JobStatusGrabbed
	case store.StateLeased:
		status = rowqtype.JobStatusLeased
	case store.StateBlocked:
		status = rowqtype.JobStatusBlocked
	}
	return &rowqtype.Job{
		ID: j.ID, QueueName: j.Queue, Category: j.Category, URL: j.URL, Payload: j.Payload, Status: status,
		CreatedAt: j.CreatedAt, NextTry: j.NextTry, Timeout: j.Timeout, FailCount: j.FailCount,
		MaxRetries: j.MaxRetries, RetryDelay: j.RetryDelay, GrabbedBy: j.GrabbedBy, GrabbedUntil: j.GrabbedTil,
		Progress: j.Progress, Message: j.ProgressMessage, TraceParent: j.Trace.Parent, TraceState: j.Trace.State, Deferrals: j.Deferrals,
		ConcurrencyKey: j.ConcurrencyKey, ConcurrencyLimit: j.ConcurrencyLimit, Ordered: j.Ordered,
	}
}

// listJobs answers GET /queue/{name}/grabbed|waiting|deferred.
func (a *API) listJobs(kind string) handlerFunc {
	return func(r *http.Request) (any, error) {
		pq, err := parsePageQuery(r, "desc", "asc")
		if err != nil {
			return nil, err
		}
		p := &store.JobsListParams{Kind: kind, Desc: pq.order == "desc", Limit: pq.limit + 1}
		if pq.cursor != "" {
			k, err := decodeCursor(pq.cursor, cursorJob, 2)
			if err != nil {
				return nil, err
			}
			at, ok := cursorTime(k[0])
			if !ok {
				return nil, errorf(http.StatusBadRequest, "cursor: not a cursor of this listing (time out of range), got %q", pq.cursor)
			}
			p.After = &store.JobKey{NextTry: at, ID: k[1]}
		}
		if p.Queue, err = a.existingQueue(r.Context(), r); err != nil {
			return nil, err
		}
		jobs, err := a.cfg.Store.JobsList(r.Context(), p)
		if err != nil {
			return nil, err
		}
		page := &rowqtype.JobPage{Jobs: make([]*rowqtype.Job, 0, len(jobs))}
		if len(jobs) > pq.limit {
			jobs = jobs[:pq.limit]
			last := jobs[len(jobs)-1]
			page.NextCursor = encodeCursor(cursorJob, last.NextTry.UnixMicro(), last.ID)
		}
		for _, j := range jobs {
			page.Jobs = append(page.Jobs, toJobJSON(j))
		}
		return page, nil
	}
}

// pathID reads the positive integer id of the path.
func pathID(r *http.Request) (int64, error) {
	v := r.PathValue("id")
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil || id < 1 {
		return 0, errorf(http.StatusBadRequest, "id: must be a positive integer, got %q", v)
	}
	return id, nil
}

// getJob answers GET /queue/{name}/job/{id}: the live job, or, once it
// finished, its history when its queue keeps finished jobs (finished.go).
func (a *API) getJob(r *http.Request) (any, error) {
	return one(a, r, "job", a.jobOrFinished, func(v any) any { return v })
}

func (a *API) deleteJob(r *http.Request) (any, error) {
	return one(a, r, "job", a.cfg.Store.JobDelete, toJobJSON)
}

// one answers a request for one entry of an existing queue by the id in
// the path: op reads (or deletes) it, toJSON shapes the answer, and what
// names it in a 404.
func one[T, J any](a *API, r *http.Request, what string, op func(context.Context, string, int64) (T, error), toJSON func(T) J) (any, error) {
	id, err := pathID(r)
	if err != nil {
		return nil, err
	}
	queue, err := a.existingQueue(r.Context(), r)
	if err != nil {
		return nil, err
	}
	v, err := op(r.Context(), queue, id)
	if err != nil {
		return nil, notFound(err, "queue %q has no %s %d", queue, what, id)
	}
	return toJSON(v), nil
}

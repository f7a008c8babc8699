package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/rowqtype"
)

// Limits of rowq's additions to the job API.
const (
	maxPushJobs     = 1000   // jobs in one POST /jobs
	minPriority     = -1000  // lowest job priority
	maxPriority     = 1000   // highest job priority
	maxUniqueKeyLen = 255    // characters of a unique_key
	maxBulkIDs      = 10_000 // ids in one bulk failure log request
	bulkChunk       = 1000   // failure log entries per transaction
)

// validateJobExtra checks rowq's additions to a job request.
func validateJobExtra(req *rowqtype.JobRequest) error {
	if err := checkRange("priority", req.Priority, minPriority, maxPriority); err != nil {
		return err
	}
	if k := req.UniqueKey; k != nil {
		if err := checkUniqueKey(*k); err != nil {
			return err
		}
	}
	backoff := valueOr(req.RetryBackoff, store.BackoffFixed)
	switch backoff {
	case store.BackoffFixed:
		if req.RetryDelayMax != nil {
			return errorf(http.StatusBadRequest, "retry_delay_max: only with retry_backoff \"exponential\"")
		}
	case store.BackoffExponential:
		if valueOr(req.RetryDelay, 0) < 1 {
			return errorf(http.StatusBadRequest, "retry_delay: must be 1..%d with retry_backoff \"exponential\" (it is the base), got %d",
				maxRetryDelay, valueOr(req.RetryDelay, 0))
		}
		if err := checkRange("retry_delay_max", req.RetryDelayMax, valueOr(req.RetryDelay, 1), maxRetryDelay); err != nil {
			return err
		}
	default:
		return errorf(http.StatusBadRequest, "retry_backoff: must be \"fixed\" or \"exponential\", got %q", backoff)
	}
	if j := req.RetryJitter; j != nil && !(*j >= 0 && *j <= 1) {
		return errorf(http.StatusBadRequest, "retry_jitter: must be 0..1 (a fraction of the delay), got %v", *j)
	}
	return nil
}

// checkUniqueKey validates a unique_key: 1..255 characters of UTF-8 without
// control characters, not ending in a space (MySQL's collations ignore
// trailing spaces, the other databases do not; refusing them keeps the
// dialects alike).
func checkUniqueKey(k string) error {
	switch {
	case k == "":
		return errorf(http.StatusBadRequest, "unique_key: must not be empty (leave it out for none)")
	case !utf8.ValidString(k):
		return errorf(http.StatusBadRequest, "unique_key: must be valid UTF-8")
	case utf8.RuneCountInString(k) > maxUniqueKeyLen:
		return errorf(http.StatusBadRequest, "unique_key: at most %d characters, got %d", maxUniqueKeyLen, utf8.RuneCountInString(k))
	case strings.HasSuffix(k, " "):
		return errorf(http.StatusBadRequest, "unique_key: must not end with a space")
	case strings.IndexFunc(k, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0:
		return errorf(http.StatusBadRequest, "unique_key: must not contain control characters")
	}
	return nil
}

// jobOptions returns the request's rowq settings with their defaults.
func jobOptions(req *rowqtype.JobRequest) store.JobOptions {
	return store.JobOptions{
		Priority:      valueOr(req.Priority, 0),
		UniqueKey:     valueOr(req.UniqueKey, ""),
		RetryBackoff:  valueOr(req.RetryBackoff, store.BackoffFixed),
		RetryDelayMax: valueOr(req.RetryDelayMax, 0),
		RetryJitter:   valueOr(req.RetryJitter, 0),
	}
}

// toJobPushed answers an enqueue of p with outcome res: the new job, or the
// pending job that holds p's unique key.
func toJobPushed(p *store.JobInsertParams, res store.JobPushed) *rowqtype.PushedJob {
	out := &rowqtype.PushedJob{
		ID: res.ID, QueueName: p.Queue, Category: p.Category, URL: p.URL, Payload: p.Payload,
		RunAfter: int(p.RunAfter / time.Second), MaxRetries: p.MaxRetries, RetryDelay: p.RetryDelay, Timeout: p.Timeout,
		Priority: p.Priority, RetryBackoff: p.RetryBackoff, RetryDelayMax: p.RetryDelayMax, RetryJitter: p.RetryJitter,
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
	}
}

// pushJobsRequest is how POST /jobs is decoded: rowqtype.JobsRequest with
// each element (a rowqtype.BatchJob) left raw, so that each is decoded on
// its own and an error names its element ("jobs[3].url: required").
type pushJobsRequest struct {
	Jobs []json.RawMessage `json:"jobs"`
}

// pushJobs is POST /jobs: up to maxPushJobs jobs in one transaction.
func (a *API) pushJobs(r *http.Request) (any, error) {
	var req pushJobsRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	if n := len(req.Jobs); n < 1 || n > maxPushJobs {
		return nil, errorf(http.StatusBadRequest, "jobs: must hold 1..%d jobs, got %d", maxPushJobs, n)
	}
	routes := map[string]string{}
	ps := make([]*store.JobInsertParams, len(req.Jobs))
	for i, raw := range req.Jobs {
		p, err := a.pushJobsElement(r.Context(), raw, routes)
		if err != nil {
			return nil, elementError(fmt.Sprintf("jobs[%d]", i), err)
		}
		ps[i] = p
	}
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

func (a *API) pushJobsElement(ctx context.Context, raw json.RawMessage, routes map[string]string) (*store.JobInsertParams, error) {
	var el rowqtype.BatchJob
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&el); err != nil {
		err = decodeError(err)
		var ae *apiError
		if errors.As(err, &ae) {
			// A type error's path names the embedded struct.
			ae.msg = strings.TrimPrefix(ae.msg, "JobRequest.")
		}
		return nil, err
	}
	if string(raw) == "null" {
		return nil, errorf(http.StatusBadRequest, "body: want a JSON object, got null")
	}
	if err := checkName("category", el.Category); err != nil {
		return nil, err
	}
	return a.jobParams(ctx, el.Category, &el.JobRequest, routes)
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

// pauseQueue is POST /queue/{name}/pause and /resume.
func (a *API) pauseQueue(paused bool) handlerFunc {
	return func(r *http.Request) (any, error) {
		name := r.PathValue("name")
		if err := checkName("name", name); err != nil {
			return nil, err
		}
		if err := decodeOptional(r, &struct{}{}); err != nil {
			return nil, err
		}
		q, err := a.cfg.Store.QueueSetPaused(r.Context(), name, paused)
		if err != nil {
			return nil, notFound(err, "queue %q does not exist", name)
		}
		// Apply it now to this node's runner of the queue, if any; the
		// leader, if another node, is nudged to re-read the queue.
		a.cfg.Dispatcher.SetPaused(name, paused)
		a.cfg.Dispatcher.Changed(name)
		return toQueueJSON(q), nil
	}
}

// retryFailedJob is POST /queue/{name}/failed/{id}/retry.
func (a *API) retryFailedJob(r *http.Request) (any, error) {
	name := r.PathValue("name")
	if err := checkName("name", name); err != nil {
		return nil, err
	}
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id < 1 {
		return nil, errorf(http.StatusBadRequest, "id: must be a positive integer, got %q", r.PathValue("id"))
	}
	if err := decodeOptional(r, &struct{}{}); err != nil {
		return nil, err
	}
	j, err := a.cfg.Store.FailedJobRetry(r.Context(), name, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, errorf(http.StatusNotFound, "id: no failed job %d in queue %q", id, name)
	case errors.Is(err, store.ErrConflict):
		return nil, errorf(http.StatusConflict, "id: the job of failed job %d is pending again", id)
	case err != nil:
		return nil, err
	}
	a.cfg.Enqueue.Due(name)
	out := storedJobPushed(j)
	out.RunAfter = 0 // due now, whenever it was created
	return out, nil
}

// retryFailedJobs is POST /queue/{name}/failed/retry.
func (a *API) retryFailedJobs(r *http.Request) (any, error) {
	n, err := a.failedBulk(r, a.cfg.Store.FailedJobsRetry)
	if errors.Is(err, store.ErrConflict) {
		// Only if the log holds two entries of one job id, which rowq
		// itself never writes.
		return nil, errorf(http.StatusConflict, "ids: the job of an entry is pending again; %d entries were retried before it", n)
	}
	if err != nil {
		return nil, err
	}
	if n > 0 {
		a.cfg.Enqueue.Due(r.PathValue("name"))
	}
	return &rowqtype.FailedRetryResult{Retried: n}, nil
}

// deleteFailedJobs is DELETE /queue/{name}/failed.
func (a *API) deleteFailedJobs(r *http.Request) (any, error) {
	n, err := a.failedBulk(r, a.cfg.Store.FailedJobsDelete)
	if err != nil {
		return nil, err
	}
	return &rowqtype.FailedDeleteResult{Deleted: n}, nil
}

// failedBulk runs op over the entries the request names, bulkChunk entries
// per transaction so that a huge log never makes one huge transaction,
// and returns how many it handled. Walking from the newest entry down, it
// never meets the entries that fail while it runs.
func (a *API) failedBulk(r *http.Request, op func(context.Context, *store.FailedJobsBulkParams) (*store.FailedJobsBulkResult, error)) (int, error) {
	name := r.PathValue("name")
	if err := checkName("name", name); err != nil {
		return 0, err
	}
	// No ids (absent or null) means every entry of the queue.
	var req rowqtype.FailedBulkRequest
	if err := decodeOptional(r, &req); err != nil {
		return 0, err
	}
	if len(req.IDs) > maxBulkIDs {
		return 0, errorf(http.StatusBadRequest, "ids: at most %d ids, got %d", maxBulkIDs, len(req.IDs))
	}
	for i, id := range req.IDs {
		if id < 1 {
			return 0, errorf(http.StatusBadRequest, "ids[%d]: must be a positive integer, got %d", i, id)
		}
	}
	total := 0
	if req.IDs != nil {
		for start := 0; start < len(req.IDs); start += bulkChunk {
			chunk := req.IDs[start:min(start+bulkChunk, len(req.IDs))]
			res, err := op(r.Context(), &store.FailedJobsBulkParams{Queue: name, IDs: chunk, Limit: len(chunk)})
			if err != nil {
				return total, err
			}
			total += res.Count
		}
		return total, nil
	}
	var before int64
	for {
		res, err := op(r.Context(), &store.FailedJobsBulkParams{Queue: name, Before: before, Limit: bulkChunk})
		if err != nil {
			return total, err
		}
		total += res.Count
		if res.Count < bulkChunk {
			return total, nil
		}
		before = res.Last
	}
}

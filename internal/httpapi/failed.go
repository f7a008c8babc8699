package httpapi

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/rowqtype"
)

// Limits of the bulk failure log requests.
const (
	maxBulkIDs = 10_000 // ids in one bulk failure log request
	bulkChunk  = 1000   // failure log entries per transaction
)

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

// toFailedJSON shows a failure log entry as the Fireworq one.
func toFailedJSON(f *store.FailedJob) *rowqtype.FailedJob {
	return &rowqtype.FailedJob{
		ID: f.ID, JobID: f.JobID, QueueName: f.Queue, Category: f.Category, URL: f.URL, Payload: f.Payload,
		Result:    rowqtype.FailedResult{Status: f.Status, Code: f.Code, Message: f.Message},
		FailCount: f.FailCount, FailedAt: f.FailedAt, CreatedAt: f.CreatedAt,
		ConcurrencyKey: f.ConcurrencyKey, ConcurrencyLimit: f.ConcurrencyLimit, Ordered: f.Ordered,
	}
}

// listFailed answers GET /queue/{name}/failed: newest first, by failure
// (order=failed, the default) or by the job's creation (order=created).
func (a *API) listFailed(r *http.Request) (any, error) {
	pq, err := parsePageQuery(r, "failed", "created")
	if err != nil {
		return nil, err
	}
	p := &store.FailedJobsListParams{ByCreated: pq.order == "created", Desc: true, Limit: pq.limit + 1}
	if pq.cursor != "" {
		if p.ByCreated {
			k, err := decodeCursor(pq.cursor, cursorCreated, 2)
			if err != nil {
				return nil, err
			}
			at, ok := cursorTime(k[0])
			if !ok {
				return nil, errorf(http.StatusBadRequest, "cursor: not a cursor of this listing (time out of range), got %q", pq.cursor)
			}
			p.After = &store.FailedKey{CreatedAt: at, ID: k[1]}
		} else {
			k, err := decodeCursor(pq.cursor, cursorFailed, 1)
			if err != nil {
				return nil, err
			}
			p.After = &store.FailedKey{ID: k[0]}
		}
	}
	if p.Queue, err = a.existingQueue(r.Context(), r); err != nil {
		return nil, err
	}
	fs, err := a.cfg.Store.FailedJobsList(r.Context(), p)
	if err != nil {
		return nil, err
	}
	page := &rowqtype.FailedJobPage{FailedJobs: make([]*rowqtype.FailedJob, 0, len(fs))}
	if len(fs) > pq.limit {
		fs = fs[:pq.limit]
		last := fs[len(fs)-1]
		if p.ByCreated {
			page.NextCursor = encodeCursor(cursorCreated, last.CreatedAt.UnixMicro(), last.ID)
		} else {
			page.NextCursor = encodeCursor(cursorFailed, last.ID)
		}
	}
	for _, f := range fs {
		page.FailedJobs = append(page.FailedJobs, toFailedJSON(f))
	}
	return page, nil
}

func (a *API) getFailed(r *http.Request) (any, error) {
	return one(a, r, "failed job", a.cfg.Store.FailedJobGet, toFailedJSON)
}

func (a *API) deleteFailed(r *http.Request) (any, error) {
	return one(a, r, "failed job", a.cfg.Store.FailedJobDelete, toFailedJSON)
}

package httpapi

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/rowqtype"
)

// The inspection of flows (docs/lifecycle.md): a live job's flow, a
// queue's blocked jobs, batches.

// Cursors of the flow listings.
const (
	cursorBlocked = "b"  // id
	cursorBatch   = "ba" // id
)

// withFlow adds the flow of live job j, when it has one, to its answer
// v: a job without Flow costs no read more.
func (a *API) withFlow(ctx context.Context, j *store.Job, v *rowqtype.Job) error {
	if !j.Flow {
		return nil
	}
	f, err := a.cfg.Store.FlowGet(ctx, j.ID)
	if errors.Is(err, store.ErrNotFound) {
		return nil // it ended, or lost its flow, since it was read
	}
	if err != nil {
		return err
	}
	v.Flow = &rowqtype.JobFlow{
		WaitsFor: orEmpty(f.WaitsFor), Dependents: f.Dependents, BatchID: f.BatchID,
		Callbacks: f.Callbacks,
	}
	if j.State == store.StateBlocked {
		v.Flow.OnParentFailure = f.OnParentFailure
	}
	return nil
}

func orEmpty(ids []int64) []int64 {
	if ids == nil {
		return []int64{}
	}
	return ids
}

// listBlocked answers GET /queue/{name}/blocked: the queue's blocked jobs,
// oldest (lowest id) first, each with the parents it waits for.
func (a *API) listBlocked(r *http.Request) (any, error) {
	pq, err := parsePageQuery(r)
	if err != nil {
		return nil, err
	}
	p := &store.JobsBlockedParams{Limit: pq.limit + 1}
	if pq.cursor != "" {
		if p.After, err = idCursor(pq.cursor, cursorBlocked); err != nil {
			return nil, err
		}
	}
	if p.Queue, err = a.existingQueue(r.Context(), r); err != nil {
		return nil, err
	}
	jobs, err := a.cfg.Store.JobsBlocked(r.Context(), p)
	if err != nil {
		return nil, err
	}
	page := &rowqtype.JobPage{Jobs: make([]*rowqtype.Job, 0, len(jobs))}
	if len(jobs) > pq.limit {
		jobs = jobs[:pq.limit]
		page.NextCursor = encodeCursor(cursorBlocked, jobs[len(jobs)-1].Job.ID)
	}
	for _, b := range jobs {
		j := toJobJSON(b.Job)
		j.Flow = &rowqtype.JobFlow{WaitsFor: orEmpty(b.WaitsFor)}
		page.Jobs = append(page.Jobs, j)
	}
	return page, nil
}

// idCursor decodes a cursor of tag holding one positive id.
func idCursor(s, tag string) (int64, error) {
	k, err := decodeCursor(s, tag, 1)
	if err == nil && k[0] < 1 {
		err = badCursor(s)
	}
	if err != nil {
		return 0, err
	}
	return k[0], nil
}

func toBatchJSON(b *store.Batch) *rowqtype.Batch {
	return &rowqtype.Batch{
		ID: b.ID, Total: b.Total, Pending: b.Pending, Succeeded: b.Succeeded, Failed: b.Failed, Cancelled: b.Cancelled,
		CreatedAt: b.CreatedAt, FinishedAt: b.FinishedAt, Meta: b.Meta,
	}
}

// getBatch answers GET /batch/{id}.
func (a *API) getBatch(r *http.Request) (any, error) {
	id, err := pathID(r)
	if err != nil {
		return nil, err
	}
	b, err := a.cfg.Store.BatchGet(r.Context(), id)
	if err != nil {
		return nil, notFound(err, "batch %s does not exist", strconv.FormatInt(id, 10))
	}
	return toBatchJSON(b), nil
}

// listBatches answers GET /batches?limit=&cursor=: the newest first.
func (a *API) listBatches(r *http.Request) (any, error) {
	pq, err := parsePageQuery(r)
	if err != nil {
		return nil, err
	}
	p := &store.BatchesListParams{Limit: pq.limit + 1}
	if pq.cursor != "" {
		if p.Before, err = idCursor(pq.cursor, cursorBatch); err != nil {
			return nil, err
		}
	}
	bs, err := a.cfg.Store.BatchesList(r.Context(), p)
	if err != nil {
		return nil, err
	}
	page := &rowqtype.BatchPage{Batches: make([]*rowqtype.Batch, 0, len(bs))}
	if len(bs) > pq.limit {
		bs = bs[:pq.limit]
		page.NextCursor = encodeCursor(cursorBatch, bs[len(bs)-1].ID)
	}
	for _, b := range bs {
		page.Batches = append(page.Batches, toBatchJSON(b))
	}
	return page, nil
}

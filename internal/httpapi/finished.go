package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/rowq/rowq/internal/dispatch"
	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/rowqtype"
)

// History of finished jobs (docs/lifecycle.md): a queue with keep_finished
// keeps each job that leaves it; GET /queue/{name}/job/{id} answers it
// once it is no longer live, GET /queue/{name}/finished pages them.

// jobOrFinished returns job id of queue as the API shows it: live, as
// before, or else from the history.
func (a *API) jobOrFinished(ctx context.Context, queue string, id int64) (any, error) {
	j, err := a.cfg.Store.JobGet(ctx, queue, id)
	if err == nil {
		v := toJobJSON(j)
		if err := a.withFlow(ctx, j, v); err != nil {
			return nil, err
		}
		return v, nil
	}
	if !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	f, err := a.cfg.Store.FinishedGet(ctx, queue, id)
	if err != nil {
		return nil, err
	}
	return toFinishedJSON(f), nil
}

func toFinishedJSON(f *store.FinishedJob) *rowqtype.FinishedJob {
	return &rowqtype.FinishedJob{
		ID: f.ID, QueueName: f.Queue, Category: f.Category, URL: f.URL, Payload: f.Payload,
		Status: f.Status, Attempts: f.Attempts, CreatedAt: f.CreatedAt, StartedAt: f.StartedAt,
		FinishedAt: f.FinishedAt, Message: f.Message, Result: f.Result,
	}
}

// listFinished answers GET /queue/{name}/finished?status=&category=&since=&until=&limit=&cursor=:
// a page of the queue's history, the latest finished first.
func (a *API) listFinished(r *http.Request) (any, error) {
	pq, err := parsePageQuery(r)
	if err != nil {
		return nil, err
	}
	q, err := parseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, err
	}
	p := &store.FinishedListParams{Limit: pq.limit + 1}
	switch st := q.Get("status"); st {
	case "", rowqtype.FinishedSucceeded, rowqtype.FinishedFailed, rowqtype.FinishedCancelled:
		p.Status = st
	default:
		return nil, errorf(http.StatusBadRequest, "status: must be succeeded, failed or cancelled, got %q", st)
	}
	if c := q.Get("category"); c != "" {
		if err := checkName("category", c); err != nil {
			return nil, err
		}
		p.Category = c
	}
	if p.Since, err = queryTime(q.Get("since"), "since"); err != nil {
		return nil, err
	}
	if p.Until, err = queryTime(q.Get("until"), "until"); err != nil {
		return nil, err
	}
	if pq.cursor != "" {
		k, err := decodeCursor(pq.cursor, cursorFin, 2)
		if err != nil {
			return nil, err
		}
		at, ok := cursorTime(k[0])
		if !ok {
			return nil, errorf(http.StatusBadRequest, "cursor: not a cursor of this listing (time out of range), got %q", pq.cursor)
		}
		p.Before = &store.FinishedCursor{FinishedAt: at, ID: k[1]}
	}
	if p.Queue, err = a.existingQueue(r.Context(), r); err != nil {
		return nil, err
	}
	fs, err := a.cfg.Store.FinishedList(r.Context(), p)
	if err != nil {
		return nil, err
	}
	page := &rowqtype.FinishedJobPage{FinishedJobs: make([]*rowqtype.FinishedJob, 0, len(fs))}
	if len(fs) > pq.limit {
		fs = fs[:pq.limit]
		last := fs[len(fs)-1]
		page.NextCursor = encodeCursor(cursorFin, last.FinishedAt.UnixMicro(), last.ID)
	}
	for _, f := range fs {
		page.FinishedJobs = append(page.FinishedJobs, toFinishedJSON(f))
	}
	return page, nil
}

// queryTime reads a time parameter in RFC 3339; zero when absent.
func queryTime(v, name string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, errorf(http.StatusBadRequest, "%s: must be a time in RFC 3339 (2026-12-04T10:00:00Z), got %q", name, v)
	}
	if _, ok := cursorTime(t.UnixMicro()); !ok || t.Year() < 1000 {
		return time.Time{}, errorf(http.StatusBadRequest, "%s: must be within the years 1000..9999, got %q", name, v)
	}
	return t.UTC(), nil
}

// completionResult checks a completion's result: only a success has one,
// and one over max (--max-result-bytes) answers 413, before anything is
// recorded. JSON null is no result.
func completionResult(status string, result json.RawMessage, max int) (json.RawMessage, error) {
	if len(result) == 0 || string(result) == "null" {
		return nil, nil
	}
	if status != dispatch.StatusSuccess {
		return nil, errorf(http.StatusBadRequest, "result: only with status success")
	}
	if len(result) > max {
		return nil, errorf(http.StatusRequestEntityTooLarge, "result: %d bytes, over the server's --max-result-bytes %d", len(result), max)
	}
	return result, nil
}

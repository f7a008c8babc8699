package httpapi

import (
	"net/http"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/rowqtype"
)

// listOutboxRejects answers GET /outbox/rejects: the outbox rows that
// were not valid jobs, oldest first.
func (a *API) listOutboxRejects(r *http.Request) (any, error) {
	pq, err := parsePageQuery(r)
	if err != nil {
		return nil, err
	}
	p := &store.OutboxRejectsParams{Limit: pq.limit + 1}
	if pq.cursor != "" {
		k, err := decodeCursor(pq.cursor, cursorReject, 1)
		if err == nil && k[0] < 1 {
			err = badCursor(pq.cursor)
		}
		if err != nil {
			return nil, err
		}
		p.After = k[0]
	}
	rejects, err := a.cfg.Store.OutboxRejects(r.Context(), p)
	if err != nil {
		return nil, err
	}
	out := &rowqtype.OutboxRejectPage{Rejects: []*rowqtype.OutboxReject{}}
	if len(rejects) > pq.limit {
		rejects = rejects[:pq.limit]
		out.NextCursor = encodeCursor(cursorReject, rejects[len(rejects)-1].ID)
	}
	for _, rj := range rejects {
		out.Rejects = append(out.Rejects, ToOutboxReject(rj))
	}
	return out, nil
}

// ToOutboxReject shows a reject as the API answers it; the dashboard
// shows the same fields.
func ToOutboxReject(rj *store.OutboxReject) *rowqtype.OutboxReject {
	row := &rj.Row
	return &rowqtype.OutboxReject{
		ID: rj.ID, OutboxID: row.ID, Category: row.Category, URL: row.URL, Payload: row.Payload,
		RunAfter: row.RunAfter, MaxRetries: row.MaxRetries, RetryDelay: row.RetryDelay, Timeout: row.Timeout,
		Priority: row.Priority, UniqueKey: row.UniqueKey, TraceParent: row.TraceParent, TraceState: row.TraceState,
		ConcurrencyKey: row.ConcurrencyKey, ConcurrencyLimit: row.ConcurrencyLimit, Ordered: row.Ordered,
		CreatedAt: row.CreatedAt, Reason: rj.Reason, RejectedAt: rj.RejectedAt,
	}
}

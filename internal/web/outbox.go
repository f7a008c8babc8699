package web

import (
	"fmt"
	"net/http"

	"github.com/rowq/rowq/internal/auth"
	"github.com/rowq/rowq/internal/store"
)

// outbox shows the transactional outbox's rejects: the rows that were
// not valid jobs, with why (GET /outbox/rejects pages through all of
// them). They belong to no queue, so a token confined to some queues may
// not see them, as on the API.
func (d *dashboard) outbox(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	if g := auth.FromContext(ctx); g.Confined() {
		d.message(w, r, http.StatusForbidden, fmt.Sprintf(
			"token %q is confined to some queues, and the outbox's rejects belong to no queue: use a token without --queues", g.Name))
		return
	}
	rejects, err := d.cfg.Store.OutboxRejects(ctx, &store.OutboxRejectsParams{Limit: listLimit})
	if err != nil {
		d.fail(w, r, err)
		return
	}
	n, err := d.cfg.Store.OutboxRejectsCount(ctx)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	rows := make([]rejectRow, len(rejects))
	for i, rj := range rejects {
		rows[i] = rejectRow{OutboxReject: rj}
		if p := rj.Row.Payload; p != nil {
			rows[i].Payload = shorten(*p, 120)
		}
	}
	d.render(w, r, http.StatusOK, "outbox.html", map[string]any{
		"Title": "rowq: outbox rejects", "Rejects": rows, "Count": n, "Limit": listLimit})
}

// rejectRow is one reject of the outbox page, its payload shortened.
type rejectRow struct {
	*store.OutboxReject
	Payload string
}

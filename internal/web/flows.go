package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/rowq/rowq/internal/auth"
	"github.com/rowq/rowq/internal/store"
)

// A job's lifecycle on the dashboard (docs/lifecycle.md): a queue's page
// shows its blocked jobs with the parents they wait for and, where the
// queue keeps finished jobs, its history with their results, paged by a
// cursor; a job's page shows a live job with its flow (batch, parents,
// dependents, callbacks) or a finished one with its history row; the
// batches' pages show their progress. A batch's jobs may span queues, so,
// as on GET /batches, a token confined to some queues sees no batch (nor
// a link to one).

// historyParams reads the history's place on a queue's page: status=
// (succeeded, failed, cancelled or all) and before= (the cursor of the
// page's Older link: the last row's finished_at in microseconds, a dot,
// its id).
func historyParams(r *http.Request, queue string) (*store.FinishedListParams, error) {
	q := r.URL.Query()
	p := &store.FinishedListParams{Queue: queue, Limit: listLimit + 1}
	switch st := q.Get("status"); st {
	case "", store.FinishedSucceeded, store.FinishedFailed, store.FinishedCancelled:
		p.Status = st
	default:
		return nil, fmt.Errorf("status: must be succeeded, failed or cancelled, got %q", st)
	}
	if b := q.Get("before"); b != "" {
		c, err := parseHistoryCursor(b)
		if err != nil {
			return nil, err
		}
		p.Before = c
	}
	return p, nil
}

// Times a history cursor may carry: what every database can store and
// compare (MySQL's DATETIME starts at year 1000).
var (
	minCursorTime = time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	maxCursorTime = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC).UnixMicro()
)

func parseHistoryCursor(s string) (*store.FinishedCursor, error) {
	bad := fmt.Errorf("before: not a place in the history (use the page's Older link), got %q", s)
	at, id, ok := strings.Cut(s, ".")
	if !ok {
		return nil, bad
	}
	us, err1 := strconv.ParseInt(at, 10, 64)
	n, err2 := strconv.ParseInt(id, 10, 64)
	if err1 != nil || err2 != nil || n < 1 || us < minCursorTime || us > maxCursorTime {
		return nil, bad
	}
	return &store.FinishedCursor{FinishedAt: time.UnixMicro(us).UTC(), ID: n}, nil
}

func historyCursor(f *store.FinishedJob) string {
	return strconv.FormatInt(f.FinishedAt.UnixMicro(), 10) + "." + strconv.FormatInt(f.ID, 10)
}

// queueFlows adds to a queue's page data its blocked jobs and, where the
// queue keeps them, its finished jobs from p's place.
func (d *dashboard) queueFlows(ctx context.Context, q *store.Queue, p *store.FinishedListParams, data map[string]any) error {
	blocked, err := d.cfg.Store.JobsBlocked(ctx, &store.JobsBlockedParams{Queue: q.Name, Limit: listLimit})
	if err != nil {
		return err
	}
	data["Blocked"] = blocked
	data["HistoryStatus"] = p.Status
	data["HistoryPaged"] = p.Before != nil
	// A queue that keeps none may still hold rows from when it did: they
	// are shown until pruned.
	fs, err := d.cfg.Store.FinishedList(ctx, p)
	if err != nil {
		return err
	}
	if len(fs) > listLimit {
		fs = fs[:listLimit]
		v := url.Values{"before": {historyCursor(fs[len(fs)-1])}}
		if p.Status != "" {
			v.Set("status", p.Status)
		}
		data["HistoryOlder"] = "/ui/queue/" + q.Name + "?" + v.Encode()
	}
	data["History"] = fs
	return nil
}

// pathID returns the id of the request's path, or answers 400.
func (d *dashboard) pathID(w http.ResponseWriter, r *http.Request) (int64, bool) {
	v := r.PathValue("id")
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil || id < 1 {
		d.message(w, r, http.StatusBadRequest, fmt.Sprintf("id: must be a positive integer, got %q", v))
		return 0, false
	}
	return id, true
}

// job shows a job of a queue: live, with its flow when it has one, or
// else finished, from the queue's history.
func (d *dashboard) job(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	name, ok := d.queueName(w, r)
	if !ok {
		return
	}
	id, ok := d.pathID(w, r)
	if !ok {
		return
	}
	q, ok := d.queueOf(w, r, name)
	if !ok {
		return
	}
	data := map[string]any{"Title": fmt.Sprintf("rowq: job %d of %s", id, name), "Queue": q, "ID": id,
		"Batches": !auth.FromContext(ctx).Confined()}
	j, err := d.cfg.Store.JobGet(ctx, name, id)
	switch {
	case err == nil:
		data["Job"], data["Deferred"] = j, j.State == store.StateWaiting && j.NextTry.After(d.now())
		data["Live"], data["Refresh"] = true, true
		if j.Flow {
			f, err := d.cfg.Store.FlowGet(ctx, id)
			if err != nil && !errors.Is(err, store.ErrNotFound) { // not found: it ended, or lost its flow, since
				d.fail(w, r, err)
				return
			}
			data["Flow"] = f
		}
		d.render(w, r, http.StatusOK, "job.html", data)
		return
	case !errors.Is(err, store.ErrNotFound):
		d.fail(w, r, err)
		return
	}
	f, err := d.cfg.Store.FinishedGet(ctx, name, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		d.message(w, r, http.StatusNotFound, d.notInQueue(ctx, q, id))
	case err != nil:
		d.fail(w, r, err)
	default:
		data["Finished"] = f
		d.render(w, r, http.StatusOK, "job.html", data)
	}
}

// notInQueue says why job id is neither live in q nor in its history. A
// flow's parents and dependents are linked in the queue of the job that
// names them, and may be in another: a job with a flow that is live
// elsewhere is told apart, but not to a token confined to some queues
// (the other queue may be another tenant's).
func (d *dashboard) notInQueue(ctx context.Context, q *store.Queue, id int64) string {
	msg := fmt.Sprintf("job %d is neither live in queue %s nor kept in its history", id, q.Name)
	if !auth.FromContext(ctx).Confined() {
		if _, err := d.cfg.Store.FlowGet(ctx, id); err == nil {
			return fmt.Sprintf("job %d is not in queue %s: it is live in another queue (its page is there, in that queue's tables)", id, q.Name)
		}
	}
	if q.KeepFinished == 0 {
		msg += " (the queue keeps no finished jobs: see its keep_finished)"
	}
	return msg
}

// batchesPage bounds the batches page; ?before=ID shows the older ones.
const batchesPage = 100

// batchesAllowed answers 403 to a token confined to some queues: a
// batch's jobs may span queues, as on GET /batches.
func (d *dashboard) batchesAllowed(w http.ResponseWriter, r *http.Request) bool {
	if g := auth.FromContext(r.Context()); g.Confined() {
		d.message(w, r, http.StatusForbidden, fmt.Sprintf(
			"token %q is confined to some queues, and a batch's jobs may span queues: use a token without --queues", g.Name))
		return false
	}
	return true
}

// batches lists the batches, newest first, with their progress.
func (d *dashboard) batches(w http.ResponseWriter, r *http.Request) {
	if !d.batchesAllowed(w, r) {
		return
	}
	p := &store.BatchesListParams{Limit: batchesPage + 1}
	if v := r.URL.Query().Get("before"); v != "" {
		id, err := strconv.ParseInt(v, 10, 64)
		if err != nil || id < 1 {
			d.message(w, r, http.StatusBadRequest, fmt.Sprintf("before: must be a positive integer, got %q", v))
			return
		}
		p.Before = id
	}
	bs, err := d.cfg.Store.BatchesList(r.Context(), p)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	older := int64(0)
	if len(bs) > batchesPage {
		bs = bs[:batchesPage]
		older = bs[batchesPage-1].ID
	}
	d.render(w, r, http.StatusOK, "batches.html", map[string]any{
		"Title": "rowq: batches", "Batches": bs, "Older": older, "Paged": p.Before != 0,
		"Page": batchesPage, "Live": true, "Refresh": true,
	})
}

// batch shows one batch and its progress.
func (d *dashboard) batch(w http.ResponseWriter, r *http.Request) {
	if !d.batchesAllowed(w, r) {
		return
	}
	id, ok := d.pathID(w, r)
	if !ok {
		return
	}
	b, err := d.cfg.Store.BatchGet(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		d.message(w, r, http.StatusNotFound, fmt.Sprintf("batch %d does not exist", id))
		return
	}
	if err != nil {
		d.fail(w, r, err)
		return
	}
	d.render(w, r, http.StatusOK, "batch.html", map[string]any{
		"Title": fmt.Sprintf("rowq: batch %d", id), "Batch": b, "Live": b.FinishedAt == nil, "Refresh": b.FinishedAt == nil,
	})
}

// idList is the ids of a job's parents or dependents a page links: the
// first Max of them (a fan-in may have 10,000), and how many more.
type idList struct {
	IDs  []int64
	More int
}

func firstIDs(ids []int64, max int) idList {
	if len(ids) <= max {
		return idList{IDs: ids}
	}
	return idList{IDs: ids[:max], More: len(ids) - max}
}

// progress is a batch's progress bar: the width of each outcome's part
// of barWidth pixels.
type progress struct {
	Succeeded, Failed, Cancelled int
	Percent                      int // of the jobs ended
}

const barWidth = 200

func progressOf(b *store.Batch) progress {
	if b.Total <= 0 {
		return progress{}
	}
	w := func(n int) int { return n * barWidth / b.Total }
	return progress{Succeeded: w(b.Succeeded), Failed: w(b.Failed), Cancelled: w(b.Cancelled),
		Percent: (b.Total - b.Pending) * 100 / b.Total}
}

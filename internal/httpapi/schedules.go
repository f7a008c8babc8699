package httpapi

import (
	"errors"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/rowq/rowq/internal/enqueue"
	"github.com/rowq/rowq/internal/schedule"
	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/validate"
	"github.com/rowq/rowq/rowqtype"
)

// Limits of schedule inputs.
const (
	maxCatchupCap = 1000
	nextRunsShown = 5
)

// toRun shows an entry of a schedule's run history.
func toRun(r *store.ScheduleRun) *rowqtype.ScheduleRun {
	out := &rowqtype.ScheduleRun{ID: r.ID, Schedule: r.Schedule, Kind: r.Kind, Tick: r.Tick, FiredAt: r.FiredAt,
		Node: r.Node, Queue: r.Queue, Skipped: r.Skipped, Reason: r.Reason}
	if !r.Skipped {
		id := r.JobID
		out.JobID = &id
	}
	return out
}

// loadZone loads an IANA zone; "Local" is refused, as it depends on the
// host.
func loadZone(name string) (*time.Location, error) {
	if name == "" || name == "Local" || len(name) > 64 {
		return nil, errors.New("not an IANA name")
	}
	return time.LoadLocation(name)
}

// toSchedule shows a schedule as the API answers it. While it is paused
// NextRunAt is null and NextRuns are the fire times it would have if it
// were resumed now, each marked paused, so that a cron expression can be
// checked before it runs.
func toSchedule(sc *store.Schedule) *rowqtype.Schedule {
	out := &rowqtype.Schedule{
		Name: sc.Name, Cron: sc.Cron, Timezone: sc.Timezone, Category: sc.Category, URL: sc.URL, Payload: sc.Payload,
		MaxRetries: sc.MaxRetries, RetryDelay: sc.RetryDelay, Timeout: sc.Timeout, Misfire: sc.Misfire,
		MaxCatchup: sc.MaxCatchup, Overlap: sc.Overlap, Paused: sc.Paused, NextRuns: []rowqtype.NextRun{},
		CreatedAt: sc.CreatedAt, UpdatedAt: sc.UpdatedAt,
		ConcurrencyKey: sc.ConcurrencyKey, ConcurrencyLimit: sc.ConcurrencyLimit, Ordered: sc.Ordered,
	}
	loc, err := loadZone(sc.Timezone)
	if err != nil {
		return out
	}
	spec, err := schedule.Parse(sc.Cron, loc)
	if err != nil {
		return out
	}
	var runs []time.Time
	if sc.Paused {
		// As resuming now would: from the next tick after now.
		runs = schedule.NextRuns(spec, time.Now(), nextRunsShown)
	} else {
		next := sc.NextRunAt
		out.NextRunAt = &next
		runs = append([]time.Time{next}, schedule.NextRuns(spec, next, nextRunsShown-1)...)
	}
	for _, t := range runs {
		out.NextRuns = append(out.NextRuns, rowqtype.NextRun{Local: t.In(loc).Format(time.RFC3339), UTC: t.UTC().Format(time.RFC3339), Paused: sc.Paused})
	}
	return out
}

// validateSchedule checks the body of PUT /schedule/{name} and fills in
// the defaults; it returns the parsed spec.
func (a *API) validateSchedule(req *rowqtype.ScheduleRequest) (schedule.Spec, error) {
	if req.Timezone == "" {
		req.Timezone = "UTC"
	}
	loc, err := loadZone(req.Timezone)
	if err != nil {
		return nil, errorf(http.StatusBadRequest, "timezone: want an IANA time zone name such as Europe/Berlin, got %q", req.Timezone)
	}
	if strings.TrimSpace(req.Cron) == "" {
		return nil, errorf(http.StatusBadRequest, "cron: required")
	}
	spec, err := schedule.Parse(req.Cron, loc)
	if err != nil {
		return nil, errorf(http.StatusBadRequest, "cron: %v, got %q", err, req.Cron)
	}
	if err := checkName("category", req.Category); err != nil {
		return nil, err
	}
	if req.URL != "" {
		// Left out, the category must route to a pull queue (putSchedule).
		if err := a.checkURL("url", req.URL); err != nil {
			return nil, err
		}
	}
	if !utf8.Valid(req.Payload) {
		return nil, errorf(http.StatusBadRequest, "payload: must be valid UTF-8")
	}
	if string(req.Payload) == "null" {
		req.Payload = nil
	}
	for _, c := range []struct {
		field  string
		v      *int
		lo, hi int
	}{
		{"max_retries", req.MaxRetries, 0, maxRetries},
		{"retry_delay", req.RetryDelay, 0, maxRetryDelay},
		{"timeout", req.Timeout, 0, maxTimeout},
		{"max_catchup", req.MaxCatchup, 1, maxCatchupCap},
	} {
		if err := checkRange(c.field, c.v, c.lo, c.hi); err != nil {
			return nil, err
		}
	}
	if err := badRequest(validate.Concurrency(req.ConcurrencyKey, req.ConcurrencyLimit, req.Ordered)); err != nil {
		return nil, err
	}
	switch req.Misfire {
	case "":
		req.Misfire = store.MisfireOnce
	case store.MisfireSkip, store.MisfireOnce, store.MisfireAll:
	default:
		return nil, errorf(http.StatusBadRequest, "misfire: must be skip, once or all, got %q", req.Misfire)
	}
	switch req.Overlap {
	case "":
		req.Overlap = store.OverlapAllow
	case store.OverlapAllow, store.OverlapSkip:
	default:
		return nil, errorf(http.StatusBadRequest, "overlap: must be allow or skip, got %q", req.Overlap)
	}
	return spec, nil
}

func (a *API) putSchedule(r *http.Request) (any, error) {
	ctx := r.Context()
	name := r.PathValue("name")
	if err := checkName("name", name); err != nil {
		return nil, err
	}
	var req rowqtype.ScheduleRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	spec, err := a.validateSchedule(&req)
	if err != nil {
		return nil, err
	}
	if err := a.allowCategory(ctx, req.Category); err != nil {
		return nil, err
	}
	if req.URL == "" || req.ConcurrencyKey != nil {
		// Both are checked against the queue the category routes to
		// now; should it become a push queue (no url) or a pull queue (a
		// concurrency key), the schedule's runs are skipped and say why.
		d, err := a.cfg.Enqueue.Route(ctx, req.Category)
		var ue *enqueue.UnroutableError
		switch {
		case errors.As(err, &ue) && req.URL == "":
			return nil, errorf(http.StatusBadRequest, "url: required unless the category routes to a pull queue, and %v", ue)
		case errors.As(err, &ue):
			// With a url, a category that routes nowhere yet is
			// accepted: its runs are skipped until it does.
		case err != nil:
			return nil, err
		default:
			if err := badRequest(validate.JobQueue(req.URL, valueOr(req.ConcurrencyKey, ""), d.Queue, d.Pull)); err != nil {
				return nil, err
			}
		}
	}
	climit := 0
	if req.ConcurrencyKey != nil {
		climit = valueOr(req.ConcurrencyLimit, 1)
	}
	now, err := a.cfg.Store.Now(ctx)
	if err != nil {
		return nil, err
	}
	// The store keeps the stored next_run_at when the spec and zone are
	// unchanged (a deploy re-applying its config neither loses a due tick
	// nor fires one twice); otherwise the schedule starts from the first
	// tick after now.
	next := spec.Next(now)
	if next.IsZero() {
		return nil, errorf(http.StatusBadRequest, "cron: no fire time within 9 years, got %q", req.Cron)
	}
	sc, err := a.cfg.Store.SchedulePut(ctx, &store.Schedule{
		Name: name, Cron: req.Cron, Timezone: req.Timezone, Category: req.Category, URL: req.URL, Payload: req.Payload,
		MaxRetries: valueOr(req.MaxRetries, 0), RetryDelay: valueOr(req.RetryDelay, 0), Timeout: valueOr(req.Timeout, 0),
		Misfire: req.Misfire, MaxCatchup: valueOr(req.MaxCatchup, 100), Overlap: req.Overlap, Paused: req.Paused,
		NextRunAt: next, ConcurrencyKey: valueOr(req.ConcurrencyKey, ""), ConcurrencyLimit: climit, Ordered: valueOr(req.Ordered, false),
	})
	if err != nil {
		return nil, err
	}
	a.cfg.Scheduler.Wake()
	return toSchedule(sc), nil
}

func (a *API) getSchedule(r *http.Request) (any, error) {
	name := r.PathValue("name")
	sc, err := a.cfg.Store.ScheduleGet(r.Context(), name)
	if err != nil {
		return nil, notFound(err, "name: no schedule %q", name)
	}
	return toSchedule(sc), nil
}

func (a *API) deleteSchedule(r *http.Request) (any, error) {
	name := r.PathValue("name")
	sc, err := a.cfg.Store.ScheduleDelete(r.Context(), name)
	if err != nil {
		return nil, notFound(err, "name: no schedule %q", name)
	}
	return toSchedule(sc), nil
}

// listSchedules answers GET /schedules: schedules by name.
func (a *API) listSchedules(r *http.Request) (any, error) {
	pq, err := parsePageQuery(r)
	if err != nil {
		return nil, err
	}
	p := &store.ScheduleListParams{Limit: pq.limit + 1}
	if pq.cursor != "" {
		if p.After, err = decodeNameCursor(pq.cursor, cursorSched); err != nil {
			return nil, err
		}
	}
	ss, err := a.cfg.Store.ScheduleList(r.Context(), p)
	if err != nil {
		return nil, err
	}
	out := &rowqtype.SchedulePage{Schedules: []*rowqtype.Schedule{}}
	if len(ss) > pq.limit {
		ss = ss[:pq.limit]
		out.NextCursor = encodeNameCursor(cursorSched, ss[len(ss)-1].Name)
	}
	// As for locks: a confined token sees its own, pages may be short.
	ss = visible(r.Context(), ss, func(sc *store.Schedule) string { return sc.Name })
	for _, sc := range ss {
		out.Schedules = append(out.Schedules, toSchedule(sc))
	}
	return out, nil
}

// setPaused pauses or resumes a schedule. Resuming starts from the next
// tick after now: ticks that passed while paused were the operator's
// choice not to run, as with a paused Temporal schedule.
func (a *API) setPaused(r *http.Request, paused bool) (any, error) {
	ctx := r.Context()
	name := r.PathValue("name")
	p := &store.SchedulePauseParams{Name: name, Paused: paused}
	if !paused {
		sc, err := a.cfg.Store.ScheduleGet(ctx, name)
		if err != nil {
			return nil, notFound(err, "name: no schedule %q", name)
		}
		if !sc.Paused {
			return toSchedule(sc), nil // resuming a running schedule keeps its place
		}
		if err := a.allowCategory(ctx, sc.Category); err != nil {
			return nil, err
		}
		loc, err := loadZone(sc.Timezone)
		if err != nil {
			return nil, err
		}
		spec, err := schedule.Parse(sc.Cron, loc)
		if err != nil {
			return nil, err
		}
		now, err := a.cfg.Store.Now(ctx)
		if err != nil {
			return nil, err
		}
		next := spec.Next(now)
		p.NextRunAt = &next
	}
	sc, err := a.cfg.Store.SchedulePause(ctx, p)
	if err != nil {
		return nil, notFound(err, "name: no schedule %q", name)
	}
	if !paused {
		a.cfg.Scheduler.Wake()
	}
	return toSchedule(sc), nil
}

func (a *API) pauseSchedule(r *http.Request) (any, error)  { return a.setPaused(r, true) }
func (a *API) resumeSchedule(r *http.Request) (any, error) { return a.setPaused(r, false) }

func (a *API) triggerSchedule(r *http.Request) (any, error) {
	name := r.PathValue("name")
	sc, err := a.cfg.Store.ScheduleGet(r.Context(), name)
	if err != nil {
		return nil, notFound(err, "name: no schedule %q", name)
	}
	if err := a.allowCategory(r.Context(), sc.Category); err != nil {
		return nil, err
	}
	run, err := a.cfg.Scheduler.Trigger(r.Context(), sc)
	for try := 1; errors.Is(err, store.ErrConflict) && try < 3; try++ {
		// Two triggers in the same microsecond share a run key.
		run, err = a.cfg.Scheduler.Trigger(r.Context(), sc)
	}
	if errors.Is(err, schedule.ErrUnroutable) {
		return nil, errorf(http.StatusNotFound, "category: %v", err)
	}
	if err != nil {
		return nil, notFound(err, "name: no schedule %q", name)
	}
	return toRun(run), nil
}

// scheduleRuns answers GET /schedule/{name}/runs: the run history,
// newest first.
func (a *API) scheduleRuns(r *http.Request) (any, error) {
	ctx := r.Context()
	name := r.PathValue("name")
	pq, err := parsePageQuery(r)
	if err != nil {
		return nil, err
	}
	p := &store.ScheduleRunsParams{Name: name, Limit: pq.limit + 1}
	if pq.cursor != "" {
		k, err := decodeCursor(pq.cursor, cursorRun, 1)
		if err == nil && k[0] < 1 {
			err = badCursor(pq.cursor)
		}
		if err != nil {
			return nil, err
		}
		p.Before = k[0]
	}
	if _, err := a.cfg.Store.ScheduleGet(ctx, name); err != nil {
		return nil, notFound(err, "name: no schedule %q", name)
	}
	runs, err := a.cfg.Store.ScheduleRuns(ctx, p)
	if err != nil {
		return nil, err
	}
	out := &rowqtype.ScheduleRunPage{Runs: []*rowqtype.ScheduleRun{}}
	if len(runs) > pq.limit {
		runs = runs[:pq.limit]
		out.NextCursor = encodeCursor(cursorRun, runs[len(runs)-1].ID)
	}
	for _, run := range runs {
		out.Runs = append(out.Runs, toRun(run))
	}
	return out, nil
}

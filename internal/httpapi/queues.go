package httpapi

import (
	"errors"
	"math"
	"net/http"
	"net/url"
	"strconv"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/rowqtype"
)

// toQueueJSON shows a queue as the Fireworq queue object.
func toQueueJSON(q *store.Queue) *rowqtype.Queue {
	return &rowqtype.Queue{Name: q.Name, PollingInterval: q.PollingInterval, MaxWorkers: q.MaxWorkers,
		MaxDispatchesPerSecond: q.MaxDispatchesPerSecond, MaxBurstSize: q.MaxBurstSize, Paused: q.Paused,
		Delivery: store.DeliveryOf(q), KeepFinished: q.KeepFinished}
}

func notFound(err error, format string, args ...any) error {
	if errors.Is(err, store.ErrNotFound) {
		return errorf(http.StatusNotFound, format, args...)
	}
	return err
}

// listQueues answers GET /queues: every queue, as Fireworq does, or with
// limit or cursor a page of them, the next page named by a Link header.
func (a *API) listQueues(r *http.Request) (any, error) {
	q, err := parseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, err
	}
	p := &store.QueueListParams{}
	var pq *pageQuery
	if q.Has("limit") || q.Has("cursor") {
		if pq, err = parsePageQuery(r); err != nil {
			return nil, err
		}
		p.Limit = pq.limit + 1
		if pq.cursor != "" {
			if p.After, err = decodeNameCursor(pq.cursor, cursorQueue); err != nil {
				return nil, err
			}
		}
	}
	qs, err := a.cfg.Store.QueueList(r.Context(), p)
	if err != nil {
		return nil, err
	}
	next := ""
	if pq != nil && len(qs) > pq.limit {
		qs = qs[:pq.limit]
		next = (&url.URL{Path: r.URL.Path, RawQuery: url.Values{
			"limit": {strconv.Itoa(pq.limit)}, "cursor": {encodeNameCursor(cursorQueue, qs[pq.limit-1].Name)},
		}.Encode()}).String()
	}
	// A confined token sees its own queues; the cursor still goes past
	// the others, so a page may hold fewer than limit.
	qs = visible(r.Context(), qs, func(q *store.Queue) string { return q.Name })
	out := make([]*rowqtype.Queue, len(qs))
	for i, q := range qs {
		out[i] = toQueueJSON(q)
	}
	if next != "" {
		return &linked{body: out, next: next}, nil
	}
	return out, nil
}

func (a *API) getQueue(r *http.Request) (any, error) {
	name := r.PathValue("name")
	if err := checkName("name", name); err != nil {
		return nil, err
	}
	q, err := a.cfg.Store.QueueGet(r.Context(), name)
	if err != nil {
		return nil, notFound(err, "queue %q does not exist", name)
	}
	hosts, err := a.cfg.Store.WorkerHostsList(r.Context(), name)
	if err != nil {
		return nil, err
	}
	out := toQueueJSON(q)
	for _, h := range hosts {
		out.WorkerHosts = append(out.WorkerHosts, &rowqtype.WorkerHost{Host: h.Host, Rate: h.Rate,
			Breaker: h.Breaker, Failures: h.Failures, OpenUntil: h.OpenUntil, UpdatedAt: h.UpdatedAt})
	}
	return out, nil
}

func (a *API) putQueue(r *http.Request) (any, error) {
	name := r.PathValue("name")
	if err := checkName("name", name); err != nil {
		return nil, err
	}
	// Absent fields take the configured defaults, except paused: absent
	// keeps the queue's state.
	var req rowqtype.QueueRequest
	if err := decodeOptional(r, &req); err != nil {
		return nil, err
	}
	if err := checkRange("polling_interval", req.PollingInterval, 1, maxPollingMs); err != nil {
		return nil, err
	}
	if err := checkRange("max_workers", req.MaxWorkers, 1, maxWorkersCap); err != nil {
		return nil, err
	}
	if err := checkRange("max_burst_size", req.MaxBurstSize, 1, math.MaxInt32); err != nil {
		return nil, err
	}
	if v := req.MaxDispatchesPerSecond; v != nil && !(*v > 0 && *v <= 1e9) {
		return nil, errorf(http.StatusBadRequest, "max_dispatches_per_second: must be > 0 and at most 1e9, got %v", *v)
	}
	if err := checkDelivery(req.Delivery); err != nil {
		return nil, err
	}
	if err := checkRange("keep_finished", req.KeepFinished, 0, rowqtype.MaxKeepFinished); err != nil {
		return nil, err
	}
	def := a.cfg.QueueDefaults
	q := &store.Queue{
		Name:                   name,
		PollingInterval:        valueOr(req.PollingInterval, def.PollingInterval),
		MaxWorkers:             valueOr(req.MaxWorkers, def.MaxWorkers),
		MaxDispatchesPerSecond: req.MaxDispatchesPerSecond,
		MaxBurstSize:           req.MaxBurstSize,
		Delivery:               valueOr(req.Delivery, store.DeliveryOf(&def)),
		KeepFinished:           valueOr(req.KeepFinished, 0),
	}
	defer a.cfg.Enqueue.RoutesChanged()
	q, err := a.cfg.Store.QueuePut(r.Context(), q)
	if err != nil {
		return nil, err
	}
	if req.Paused != nil && *req.Paused != q.Paused {
		if q, err = a.cfg.Store.QueueSetPaused(r.Context(), name, *req.Paused); err != nil {
			return nil, notFound(err, "queue %q was deleted meanwhile", name)
		}
		a.cfg.Dispatcher.SetPaused(name, q.Paused)
	}
	a.cfg.Dispatcher.Changed(name)
	return toQueueJSON(q), nil
}

func (a *API) deleteQueue(r *http.Request) (any, error) {
	name := r.PathValue("name")
	if err := checkName("name", name); err != nil {
		return nil, err
	}
	defer a.cfg.Enqueue.RoutesChanged()
	q, err := a.cfg.Store.QueueDelete(r.Context(), name)
	if err != nil {
		return nil, notFound(err, "queue %q does not exist", name)
	}
	a.cfg.Dispatcher.Changed(name) // its leader stops its runner
	return toQueueJSON(q), nil
}

func (a *API) queueNode(r *http.Request) (any, error) {
	name := r.PathValue("name")
	if err := checkName("name", name); err != nil {
		return nil, err
	}
	if _, err := a.cfg.Store.QueueGet(r.Context(), name); err != nil {
		return nil, notFound(err, "queue %q does not exist", name)
	}
	n, err := a.cfg.Store.QueueLeader(r.Context(), name)
	if err != nil {
		return nil, notFound(err, "queue %q has no active node yet", name)
	}
	return &rowqtype.Node{ID: n.ID, Host: n.Host}, nil
}

// nodes lists the live nodes and how many queues each dispatches.
func (a *API) nodes(r *http.Request) (any, error) {
	c, err := a.cfg.Store.NodesLive(r.Context())
	if err != nil {
		return nil, err
	}
	out := &rowqtype.Nodes{Nodes: make([]rowqtype.LiveNode, 0, len(c.Nodes)), Queues: c.Queues}
	for _, n := range c.Nodes {
		out.Nodes = append(out.Nodes, rowqtype.LiveNode{ID: n.ID, Host: n.Host, StartedAt: n.StartedAt, ExpiresAt: n.ExpiresAt, Queues: n.Leads})
	}
	return out, nil
}

// wakeQueue is the nudge another node sends when it accepted a job of a
// queue this node leads (internal/notify): the runner grabs now instead of
// at its next look. It reads no database, and a node that does not lead
// the queue passes nothing on.
func (a *API) wakeQueue(r *http.Request) (any, error) {
	name := r.PathValue("name")
	if err := checkName("name", name); err != nil {
		return nil, err
	}
	var req rowqtype.WakeRequest
	if err := decodeOptional(r, &req); err != nil {
		return nil, err
	}
	if req.Cancel < 0 {
		return nil, errorf(http.StatusBadRequest, "cancel: must be a job id, got %d", req.Cancel)
	}
	ended, err := leaseEnds(req.Finished)
	if err != nil {
		return nil, err
	}
	if req.Cancel > 0 {
		a.cfg.Dispatcher.Abort(name, req.Cancel)
	}
	if len(ended) > 0 {
		a.cfg.Dispatcher.LeasesEnded(name, ended)
	}
	return &rowqtype.WakeResult{QueueName: name, Woken: a.cfg.Dispatcher.Nudged(name, req.Settings)}, nil
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

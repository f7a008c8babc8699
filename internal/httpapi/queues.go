package httpapi

import (
	"errors"
	"math"
	"net/http"

	"github.com/rowq/rowq/internal/store"
)

// queueJSON is the Fireworq queue object.
type queueJSON struct {
	Name                   string   `json:"name"`
	PollingInterval        int      `json:"polling_interval"`
	MaxWorkers             int      `json:"max_workers"`
	MaxDispatchesPerSecond *float64 `json:"max_dispatches_per_second,omitempty"`
	MaxBurstSize           *int     `json:"max_burst_size,omitempty"`
	Paused                 bool     `json:"paused"`
}

func toQueueJSON(q *store.Queue) *queueJSON {
	return &queueJSON{Name: q.Name, PollingInterval: q.PollingInterval, MaxWorkers: q.MaxWorkers,
		MaxDispatchesPerSecond: q.MaxDispatchesPerSecond, MaxBurstSize: q.MaxBurstSize, Paused: q.Paused}
}

// queueRequest is the body of PUT /queue/{name}; absent fields take the
// configured defaults, except paused: absent keeps the queue's state.
type queueRequest struct {
	PollingInterval        *int64   `json:"polling_interval"`
	MaxWorkers             *int64   `json:"max_workers"`
	MaxDispatchesPerSecond *float64 `json:"max_dispatches_per_second"`
	MaxBurstSize           *int64   `json:"max_burst_size"`
	Paused                 *bool    `json:"paused"`
}

func notFound(err error, format string, args ...any) error {
	if errors.Is(err, store.ErrNotFound) {
		return errorf(http.StatusNotFound, format, args...)
	}
	return err
}

func (a *API) listQueues(r *http.Request) (any, error) {
	qs, err := a.cfg.Store.QueueList(r.Context())
	if err != nil {
		return nil, err
	}
	out := make([]*queueJSON, len(qs))
	for i, q := range qs {
		out[i] = toQueueJSON(q)
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
	return toQueueJSON(q), nil
}

func (a *API) putQueue(r *http.Request) (any, error) {
	name := r.PathValue("name")
	if err := checkName("name", name); err != nil {
		return nil, err
	}
	var req queueRequest
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
	def := a.cfg.QueueDefaults
	q := &store.Queue{
		Name:                   name,
		PollingInterval:        int(valueOr(req.PollingInterval, int64(def.PollingInterval))),
		MaxWorkers:             int(valueOr(req.MaxWorkers, int64(def.MaxWorkers))),
		MaxDispatchesPerSecond: req.MaxDispatchesPerSecond,
	}
	if req.MaxBurstSize != nil {
		b := int(*req.MaxBurstSize)
		q.MaxBurstSize = &b
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
	return map[string]string{"id": n.ID, "host": n.Host}, nil
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
	var req struct {
		// Settings: the queue's settings changed; re-read them now.
		Settings bool `json:"settings"`
	}
	if err := decodeOptional(r, &req); err != nil {
		return nil, err
	}
	return map[string]any{"queue_name": name, "woken": a.cfg.Dispatcher.Nudged(name, req.Settings)}, nil
}

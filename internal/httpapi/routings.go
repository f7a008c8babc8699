package httpapi

import (
	"net/http"

	"github.com/rowq/rowq/internal/store"
)

// routingJSON is the Fireworq routing object.
type routingJSON struct {
	JobCategory string `json:"job_category"`
	QueueName   string `json:"queue_name"`
}

func (a *API) listRoutings(r *http.Request) (any, error) {
	rs, err := a.cfg.Store.RoutingList(r.Context())
	if err != nil {
		return nil, err
	}
	out := make([]routingJSON, len(rs))
	for i, rt := range rs {
		out[i] = routingJSON{rt.JobCategory, rt.QueueName}
	}
	return out, nil
}

func (a *API) getRouting(r *http.Request) (any, error) {
	category := r.PathValue("category")
	if err := checkName("category", category); err != nil {
		return nil, err
	}
	rt, err := a.cfg.Store.RoutingGet(r.Context(), category)
	if err != nil {
		return nil, notFound(err, "no routing for category %q", category)
	}
	return routingJSON{rt.JobCategory, rt.QueueName}, nil
}

func (a *API) putRouting(r *http.Request) (any, error) {
	category := r.PathValue("category")
	if err := checkName("category", category); err != nil {
		return nil, err
	}
	var req struct {
		QueueName string `json:"queue_name"`
	}
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	if req.QueueName == "" {
		return nil, errorf(http.StatusBadRequest, "queue_name: required")
	}
	if err := checkName("queue_name", req.QueueName); err != nil {
		return nil, err
	}
	defer a.cfg.Enqueue.RoutesChanged()
	rt, err := a.cfg.Store.RoutingPut(r.Context(), &store.Routing{JobCategory: category, QueueName: req.QueueName})
	if err != nil {
		return nil, notFound(err, "queue_name: queue %q does not exist", req.QueueName)
	}
	return routingJSON{rt.JobCategory, rt.QueueName}, nil
}

func (a *API) deleteRouting(r *http.Request) (any, error) {
	category := r.PathValue("category")
	if err := checkName("category", category); err != nil {
		return nil, err
	}
	defer a.cfg.Enqueue.RoutesChanged()
	rt, err := a.cfg.Store.RoutingDelete(r.Context(), category)
	if err != nil {
		return nil, notFound(err, "no routing for category %q", category)
	}
	return routingJSON{rt.JobCategory, rt.QueueName}, nil
}

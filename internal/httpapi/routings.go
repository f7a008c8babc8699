package httpapi

import (
	"context"
	"errors"
	"net/http"

	"github.com/rowq/rowq/internal/auth"
	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/rowqtype"
)

// toRoutingJSON shows a routing as the Fireworq routing object.
func toRoutingJSON(rt *store.Routing) *rowqtype.Routing {
	return &rowqtype.Routing{JobCategory: rt.JobCategory, QueueName: rt.QueueName}
}

func (a *API) listRoutings(r *http.Request) (any, error) {
	rs, err := a.cfg.Store.RoutingList(r.Context())
	if err != nil {
		return nil, err
	}
	rs = visible(r.Context(), rs, func(rt *store.Routing) string { return rt.QueueName })
	out := make([]*rowqtype.Routing, len(rs))
	for i, rt := range rs {
		out[i] = toRoutingJSON(rt)
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
	if err := allowRouted(r.Context(), category, rt.QueueName); err != nil {
		return nil, err
	}
	return toRoutingJSON(rt), nil
}

func (a *API) putRouting(r *http.Request) (any, error) {
	category := r.PathValue("category")
	if err := checkName("category", category); err != nil {
		return nil, err
	}
	var req rowqtype.RoutingRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	if req.QueueName == "" {
		return nil, errorf(http.StatusBadRequest, "queue_name: required")
	}
	if err := checkName("queue_name", req.QueueName); err != nil {
		return nil, err
	}
	if err := allowQueue(auth.FromContext(r.Context()), "queue_name: queue", req.QueueName); err != nil {
		return nil, err
	}
	if err := a.allowRouting(r.Context(), category); err != nil {
		return nil, err
	}
	defer a.cfg.Enqueue.RoutesChanged()
	rt, err := a.cfg.Store.RoutingPut(r.Context(), &store.Routing{JobCategory: category, QueueName: req.QueueName})
	if err != nil {
		return nil, notFound(err, "queue_name: queue %q does not exist", req.QueueName)
	}
	return toRoutingJSON(rt), nil
}

func (a *API) deleteRouting(r *http.Request) (any, error) {
	category := r.PathValue("category")
	if err := checkName("category", category); err != nil {
		return nil, err
	}
	if err := a.allowRouting(r.Context(), category); err != nil {
		return nil, err
	}
	defer a.cfg.Enqueue.RoutesChanged()
	rt, err := a.cfg.Store.RoutingDelete(r.Context(), category)
	if err != nil {
		return nil, notFound(err, "no routing for category %q", category)
	}
	return toRoutingJSON(rt), nil
}

// allowRouting answers 403 when the request's token is confined to some
// queues and category is routed to a queue outside them: such a token
// may neither re-route nor delete another tenant's routing.
func (a *API) allowRouting(ctx context.Context, category string) error {
	if !auth.FromContext(ctx).Confined() {
		return nil
	}
	rt, err := a.cfg.Store.RoutingGet(ctx, category)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	return allowRouted(ctx, category, rt.QueueName)
}

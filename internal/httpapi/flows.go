package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/rowq/rowq/internal/enqueue"
	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/rowqtype"
)

// Flows (docs/lifecycle.md): callbacks, dependencies and batches. An
// enqueue that names none of them takes the path it always took
// (Enqueue.Push, PushMany); one that does goes through Enqueue.PushFlow,
// one transaction for its jobs, their flows and its batch.

// maxDependsOn bounds the parents of one job: a fan-in of 10,000 jobs to
// one is a request of about 200 KB.
const maxDependsOn = 10000

// callbackFields are a job request's callbacks left raw, so that each is
// decoded on its own and an error names it ("jobs[2].on_success.url:
// required"). They shadow rowqtype.JobRequest's fields of the same name
// (a shallower field wins in encoding/json).
type callbackFields struct {
	OnSuccess json.RawMessage `json:"on_success"`
	OnFailure json.RawMessage `json:"on_failure"`
	OnFinish  json.RawMessage `json:"on_finish"`
}

// jobBody is how the body of POST /job/{category} is decoded; its
// parents, left raw too, are decoded into JobRequest.DependsOn (refs).
type jobBody struct {
	rowqtype.JobRequest
	OnSuccess json.RawMessage   `json:"on_success"`
	OnFailure json.RawMessage   `json:"on_failure"`
	OnFinish  json.RawMessage   `json:"on_finish"`
	DependsOn []json.RawMessage `json:"depends_on"`
}

func (b *jobBody) callbacks() callbackFields {
	return callbackFields{OnSuccess: b.OnSuccess, OnFailure: b.OnFailure, OnFinish: b.OnFinish}
}

// jobElement is how an element of POST /jobs is decoded, as jobBody.
type jobElement struct {
	rowqtype.BatchJob
	OnSuccess json.RawMessage   `json:"on_success"`
	OnFailure json.RawMessage   `json:"on_failure"`
	OnFinish  json.RawMessage   `json:"on_finish"`
	DependsOn []json.RawMessage `json:"depends_on"`
}

func (e *jobElement) callbacks() callbackFields {
	return callbackFields{OnSuccess: e.OnSuccess, OnFailure: e.OnFailure, OnFinish: e.OnFinish}
}

// refs decodes raw parents into req.DependsOn, each on its own so that an
// error names it ("depends_on[2].id: …").
func refs(req *rowqtype.JobRequest, raw []json.RawMessage) error {
	if raw == nil {
		return nil
	}
	if len(raw) > maxDependsOn {
		return errorf(http.StatusBadRequest, "depends_on: at most %d parents, got %d", maxDependsOn, len(raw))
	}
	req.DependsOn = make([]rowqtype.JobRef, len(raw))
	for k, r := range raw {
		if err := decodeStrict(r, &req.DependsOn[k]); err != nil {
			return elementError(fmt.Sprintf("depends_on[%d]", k), err)
		}
	}
	return nil
}

// batchBody is how POST /jobs' batch is decoded.
type batchBody struct {
	OnSuccess json.RawMessage `json:"on_success"`
	OnFinish  json.RawMessage `json:"on_finish"`
	Meta      json.RawMessage `json:"meta"`
}

// given reports whether raw holds a value other than null.
func given(raw json.RawMessage) bool { return len(raw) > 0 && string(raw) != "null" }

// hasFlow reports whether a request names a flow field.
func hasFlow(req *rowqtype.JobRequest, cbs callbackFields) bool {
	// An empty depends_on is no parent, as a client that always sends the
	// list would mean it.
	return given(cbs.OnSuccess) || given(cbs.OnFailure) || given(cbs.OnFinish) || len(req.DependsOn) > 0 || req.OnParentFailure != nil
}

// flowOf checks and resolves the flow of job index (-1: the one job of
// POST /job/{category}, whose parents are named by id only) of a request
// whose jobs make a batch when inBatch: its callbacks routed, its parents
// checked. It returns nil for a job with no flow. Errors name the field
// within the job ("depends_on[1].index: …").
func (a *API) flowOf(ctx context.Context, index int, req *rowqtype.JobRequest, cbs callbackFields, inBatch bool, routes map[string]enqueue.Destination) (*store.FlowJobParams, error) {
	flow := hasFlow(req, cbs)
	switch {
	case req.UniqueKey != nil && flow:
		return nil, errorf(http.StatusBadRequest, "unique_key: not with on_success, on_failure, on_finish or depends_on: a job with a flow is always a new job")
	case req.UniqueKey != nil && inBatch:
		return nil, errorf(http.StatusBadRequest, "unique_key: not in a batch: a job of a batch is always a new job")
	case !flow:
		return nil, nil
	case req.Ordered != nil && *req.Ordered && len(req.DependsOn) > 0:
		return nil, errorf(http.StatusBadRequest, "ordered: not with depends_on: an ordered key's jobs go in enqueue order, which a blocked job would hold up")
	}
	f := &store.FlowJobParams{}
	var err error
	if f.DependsOn, err = parents(index, req.DependsOn); err != nil {
		return nil, err
	}
	if f.OnParentFailure, err = parentPolicy(req); err != nil {
		return nil, err
	}
	for _, cb := range []struct {
		name string
		raw  json.RawMessage
		dst  **store.JobInsertParams
	}{{"on_success", cbs.OnSuccess, &f.OnSuccess}, {"on_failure", cbs.OnFailure, &f.OnFailure}, {"on_finish", cbs.OnFinish, &f.OnFinish}} {
		if *cb.dst, err = a.callback(ctx, cb.name, cb.raw, routes); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// parents checks the parents of job index (-1: POST /job/{category}).
func parents(index int, refs []rowqtype.JobRef) ([]store.FlowParent, error) {
	out := make([]store.FlowParent, len(refs))
	seen := make(map[store.FlowParent]int, len(refs))
	for k, ref := range refs {
		name := fmt.Sprintf("depends_on[%d]", k)
		switch {
		case (ref.Index == nil) == (ref.ID == nil):
			return nil, errorf(http.StatusBadRequest, "%s: give one of index (an earlier job of this request) and id (an existing job)", name)
		case ref.ID != nil && *ref.ID < 1:
			return nil, errorf(http.StatusBadRequest, "%s.id: must be a positive integer, got %d", name, *ref.ID)
		case ref.ID != nil:
			out[k] = store.FlowParent{ID: *ref.ID}
		case index < 0:
			return nil, errorf(http.StatusBadRequest, "%s.index: only in POST /jobs, for an earlier job of the same request; name an existing job by id", name)
		case index == 0:
			return nil, errorf(http.StatusBadRequest, "%s.index: must name an earlier job of this request, and this is its first", name)
		case *ref.Index < 0 || *ref.Index >= index:
			return nil, errorf(http.StatusBadRequest, "%s.index: must name an earlier job of this request (0..%d), got %d", name, index-1, *ref.Index)
		default:
			out[k] = store.FlowParent{Index: *ref.Index}
		}
		if j, dup := seen[out[k]]; dup {
			return nil, errorf(http.StatusBadRequest, "%s: names the same job as depends_on[%d]", name, j)
		}
		seen[out[k]] = k
	}
	return out, nil
}

// parentPolicy checks on_parent_failure, which needs parents.
func parentPolicy(req *rowqtype.JobRequest) (string, error) {
	if req.OnParentFailure == nil {
		return store.ParentFailureCancel, nil
	}
	switch p := *req.OnParentFailure; {
	case len(req.DependsOn) == 0:
		return "", errorf(http.StatusBadRequest, "on_parent_failure: only with depends_on")
	case p == store.ParentFailureCancel, p == store.ParentFailureFail, p == store.ParentFailureRun:
		return p, nil
	default:
		return "", errorf(http.StatusBadRequest, "on_parent_failure: must be %q, %q or %q, got %q",
			store.ParentFailureCancel, store.ParentFailureFail, store.ParentFailureRun, p)
	}
}

// callback decodes, checks and routes the callback raw named name (nil
// for none): a job of its own, with no flow and no unique key.
func (a *API) callback(ctx context.Context, name string, raw json.RawMessage, routes map[string]enqueue.Destination) (*store.JobInsertParams, error) {
	if !given(raw) {
		return nil, nil
	}
	var cb rowqtype.BatchJob
	if err := decodeStrict(raw, &cb); err != nil {
		return nil, elementError(name, err)
	}
	bad := func(field, why string) error {
		return errorf(http.StatusBadRequest, "%s.%s: not in a callback: %s", name, field, why)
	}
	switch {
	case cb.OnSuccess != nil, cb.OnFailure != nil, cb.OnFinish != nil:
		return nil, bad(firstCallback(&cb.JobRequest), "a callback has no callbacks of its own")
	case cb.DependsOn != nil:
		return nil, bad("depends_on", "a callback is due when its job ends")
	case cb.OnParentFailure != nil:
		return nil, bad("on_parent_failure", "a callback has no parents")
	case cb.UniqueKey != nil:
		return nil, bad("unique_key", "a callback is always a new job")
	}
	if err := checkName("category", cb.Category); err != nil {
		return nil, elementError(name, err)
	}
	p, err := a.jobParams(ctx, cb.Category, &cb.JobRequest, routes)
	if err != nil {
		return nil, elementError(name, err)
	}
	return p, nil
}

func firstCallback(req *rowqtype.JobRequest) string {
	switch {
	case req.OnSuccess != nil:
		return "on_success"
	case req.OnFailure != nil:
		return "on_failure"
	}
	return "on_finish"
}

// decodeStrict decodes one JSON value of raw into dst, refusing unknown
// fields; a type error's path loses the Go names of embedded structs.
func decodeStrict(raw json.RawMessage, dst any) error {
	if string(raw) == "null" {
		return errorf(http.StatusBadRequest, "body: want a JSON object, got null")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return decodeError(err)
	}
	return nil
}

// trimGoPath drops the names of embedded Go structs ("BatchJob.",
// "JobRequest.") that lead a type error's field path: rowq's JSON names
// are lower case.
func trimGoPath(path string) string {
	for len(path) > 0 && path[0] >= 'A' && path[0] <= 'Z' {
		dot := strings.IndexByte(path, '.')
		if dot < 0 {
			break
		}
		path = path[dot+1:]
	}
	return path
}

// batchOf checks and resolves POST /jobs' batch (nil when absent).
func (a *API) batchOf(ctx context.Context, raw json.RawMessage, routes map[string]enqueue.Destination) (*store.BatchParams, error) {
	if !given(raw) {
		return nil, nil
	}
	var body batchBody
	if err := decodeStrict(raw, &body); err != nil {
		return nil, elementError("batch", err)
	}
	b := &store.BatchParams{}
	if given(body.Meta) {
		if body.Meta[0] != '{' {
			return nil, errorf(http.StatusBadRequest, "batch.meta: want a JSON object, got %s", shownJSON(body.Meta))
		}
		if !utf8.Valid(body.Meta) {
			return nil, errorf(http.StatusBadRequest, "batch.meta: must be valid UTF-8")
		}
		b.Meta = body.Meta
	}
	var err error
	if b.OnSuccess, err = a.callback(ctx, "batch.on_success", body.OnSuccess, routes); err != nil {
		return nil, err
	}
	if b.OnFinish, err = a.callback(ctx, "batch.on_finish", body.OnFinish, routes); err != nil {
		return nil, err
	}
	return b, nil
}

// shownJSON is a JSON value for an error message, cut when long.
func shownJSON(raw json.RawMessage) string {
	if len(raw) > 40 {
		return string(raw[:40]) + "…"
	}
	return string(raw)
}

// pushFlows stores jobs ps (routed) with their flows (flows[i] nil: none)
// and batch, and answers as POST /jobs does, with which jobs are blocked
// and the batch's id. name names job i in a 422 for a parent.
func (a *API) pushFlows(ctx context.Context, ps []*store.JobInsertParams, flows []*store.FlowJobParams, batch *store.BatchParams, name func(int) string) (*rowqtype.PushedJobs, error) {
	p := &store.FlowInsertParams{Jobs: make([]*store.FlowJobParams, len(ps)), Batch: batch}
	for i, j := range ps {
		f := &store.FlowJobParams{}
		if i < len(flows) && flows[i] != nil {
			f = flows[i]
		}
		f.Job = j
		p.Jobs[i] = f
	}
	res, err := a.cfg.Enqueue.PushFlow(ctx, p)
	var pe *store.ParentError
	if errors.As(err, &pe) {
		return nil, errorf(http.StatusUnprocessableEntity, "%sdepends_on[%d]: %v", name(pe.Job), pe.Item, pe)
	}
	if err != nil {
		return nil, err
	}
	out := &rowqtype.PushedJobs{Jobs: make([]*rowqtype.PushedJob, len(ps)), BatchID: res.BatchID}
	for i, j := range ps {
		out.Jobs[i] = toJobPushed(j, store.JobPushed{ID: res.IDs[i]})
		out.Jobs[i].Blocked = res.Blocked[i]
	}
	return out, nil
}

// callbackParams returns the callbacks of flows and batch, for the
// request's trace context.
func callbackParams(flows []*store.FlowJobParams, batch *store.BatchParams) []*store.JobInsertParams {
	var out []*store.JobInsertParams
	add := func(ps ...*store.JobInsertParams) {
		for _, p := range ps {
			if p != nil {
				out = append(out, p)
			}
		}
	}
	for _, f := range flows {
		if f != nil {
			add(f.OnSuccess, f.OnFailure, f.OnFinish)
		}
	}
	if batch != nil {
		add(batch.OnSuccess, batch.OnFinish)
	}
	return out
}

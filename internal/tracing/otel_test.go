package tracing_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/tracing"
	"github.com/rowq/rowq/internal/tracing/tracingtest"
)

const (
	clientTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	clientSpan  = "00f067aa0ba902b7"
)

// TestTracer_OffAllocatesNothing: with no endpoint (a nil Tracer) the
// enqueue and delivery paths make no span and allocate nothing for
// tracing, for a job without trace context as for one with it (but the
// delivery's headers, which SetHeaders allocates once).
func TestTracer_OffAllocatesNothing(t *testing.T) {
	var tr *tracing.Tracer
	ctx := context.Background()
	for _, trace := range []store.Trace{{}, {Parent: "00-" + clientTrace + "-" + clientSpan + "-01", State: "rojo=1"}} {
		p := &store.JobInsertParams{Queue: "q", Category: "c", Trace: trace}
		j := &store.Job{ID: 1, Queue: "q", Category: "c", Trace: trace}
		jobs := []*store.Job{j}
		began := time.Now()
		allocs := testing.AllocsPerRun(100, func() {
			span := tr.Enqueue(ctx, p)
			span.Enqueued(1, nil)
			tr.Grab("q", began, jobs, nil)
			dctx, ds := tr.Deliver(ctx, "q", j)
			ds.Delivered("success", 200, "")
			if dctx != ctx {
				t.Fatal("a nil Tracer changed the delivery's context")
			}
		})
		if allocs != 0 {
			t.Errorf("trace %+v: %v allocations per job with tracing off, want 0", trace, allocs)
		}
		if p.Trace != trace {
			t.Errorf("a nil Tracer changed the job's trace to %+v", p.Trace)
		}
		h := http.Header{}
		want := 0.0
		if trace.Parent != "" {
			want = 1
		}
		if allocs := testing.AllocsPerRun(100, func() { tracing.SetHeaders(ctx, h, trace) }); allocs != want {
			t.Errorf("trace %+v: SetHeaders allocates %v times, want %v", trace, allocs, want)
		}
		if h.Get("traceparent") != trace.Parent || h.Get("tracestate") != trace.State {
			t.Errorf("headers %v, want the job's trace %+v as stored", h, trace)
		}
	}
}

// BenchmarkTracerOff is the cost of tracing's hooks on one job's path
// while tracing is off: it should stay at 0 allocations.
func BenchmarkTracerOff(b *testing.B) {
	var tr *tracing.Tracer
	ctx := context.Background()
	p := &store.JobInsertParams{Queue: "q", Category: "c"}
	j := &store.Job{ID: 1, Queue: "q", Category: "c"}
	jobs := []*store.Job{j}
	h := http.Header{}
	b.ReportAllocs()
	for b.Loop() {
		tr.Enqueue(ctx, p).Enqueued(1, nil)
		tr.Grab("q", time.Time{}, jobs, nil)
		dctx, ds := tr.Deliver(ctx, "q", j)
		tracing.SetHeaders(dctx, h, j.Trace)
		ds.Delivered("success", 200, "")
	}
}

// TestTracer_ExportsToOTLPReceiver sends the spans of one job's enqueue,
// grab and delivery to a real OTLP/HTTP receiver, which decodes them:
// the enqueue span is a child of the client's span and becomes the job's
// trace parent, the delivery span is its child and the worker's parent,
// the grab span links to the job's trace.
func TestTracer_ExportsToOTLPReceiver(t *testing.T) {
	rec := tracingtest.New(t)
	tr, err := tracing.New(tracing.Config{Endpoint: rec.URL, Node: "node-1", Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	p := &store.JobInsertParams{Queue: "mail", Category: "welcome",
		Trace: store.Trace{Parent: "00-" + clientTrace + "-" + clientSpan + "-01", State: "rojo=1"}}
	span := tr.Enqueue(ctx, p)
	span.Enqueued(42, nil)
	j := &store.Job{ID: 42, Queue: "mail", Category: "welcome", FailCount: 2, Trace: p.Trace}
	tr.Grab("mail", time.Now(), []*store.Job{j}, nil)
	tr.Grab("mail", time.Now(), nil, nil) // took nothing: no span
	dctx, ds := tr.Deliver(ctx, "mail", j)
	h := http.Header{}
	tracing.SetHeaders(dctx, h, j.Trace)
	ds.Delivered("failure", 500, "boom")
	if err := tr.Stop(ctx); err != nil {
		t.Fatal(err)
	}

	spans := rec.Spans()
	byName := map[string]tracingtest.Span{}
	for _, s := range spans {
		byName[s.Name] = s
	}
	if len(spans) != 3 || len(byName) != 3 {
		t.Fatalf("received %d spans %+v, want enqueue, grab and deliver once each", len(spans), spans)
	}
	enq, grab, del := byName["enqueue mail"], byName["grab mail"], byName["deliver mail"]
	if enq.TraceID != clientTrace || enq.Parent != clientSpan || enq.Kind != "SPAN_KIND_PRODUCER" ||
		enq.Attributes["messaging.message.id"] != "42" || enq.Attributes["messaging.destination.name"] != "mail" || enq.Service != "rowq" {
		t.Errorf("enqueue span %+v, want a producer span of job 42, child of the client's span", enq)
	}
	if want := "00-" + clientTrace + "-" + enq.SpanID + "-01"; p.Trace.Parent != want || p.Trace.State != "rojo=1" {
		t.Errorf("the job's trace became %+v, want parent %s (the enqueue span) and its tracestate kept", p.Trace, want)
	}
	if del.TraceID != clientTrace || del.Parent != enq.SpanID || del.Kind != "SPAN_KIND_CLIENT" ||
		del.Attributes["http.response.status_code"] != "500" || del.Attributes["rowq.attempt"] != "3" ||
		del.StatusCode != "STATUS_CODE_ERROR" || del.StatusReason != "boom" {
		t.Errorf("deliver span %+v, want a client span, child of the enqueue span, failed with 500 on attempt 3", del)
	}
	if want := "00-" + clientTrace + "-" + del.SpanID + "-01"; h.Get("traceparent") != want || h.Get("tracestate") != "rojo=1" {
		t.Errorf("the worker gets traceparent %q and tracestate %q, want %q (the delivery span) and rojo=1",
			h.Get("traceparent"), h.Get("tracestate"), want)
	}
	if grab.Parent != "" || grab.TraceID == clientTrace || len(grab.Links) != 1 ||
		grab.Links[0] != (tracingtest.Link{TraceID: clientTrace, SpanID: enq.SpanID}) || grab.Attributes["messaging.batch.message_count"] != "1" {
		t.Errorf("grab span %+v, want a root span linked to the job's enqueue span", grab)
	}
}

// TestTracer_UnsampledParent: a job whose trace is not sampled (flags 00)
// gets no exported span, and its worker still gets a traceparent of the
// same trace, not sampled.
func TestTracer_UnsampledParent(t *testing.T) {
	rec := tracingtest.New(t)
	tr, err := tracing.New(tracing.Config{Endpoint: rec.URL + "/v1/traces"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	p := &store.JobInsertParams{Queue: "q", Trace: store.Trace{Parent: "00-" + clientTrace + "-" + clientSpan + "-00"}}
	tr.Enqueue(ctx, p).Enqueued(1, nil)
	dctx, ds := tr.Deliver(ctx, "q", &store.Job{ID: 1, Queue: "q", Trace: p.Trace})
	h := http.Header{}
	tracing.SetHeaders(dctx, h, p.Trace)
	ds.Delivered("success", 200, "")
	if err := tr.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if got := h.Get("traceparent"); !strings.HasPrefix(got, "00-"+clientTrace+"-") || !strings.HasSuffix(got, "-00") {
		t.Errorf("the worker gets traceparent %q, want one of trace %s, not sampled", got, clientTrace)
	}
	if spans := rec.Spans(); len(spans) != 0 {
		t.Errorf("received %d spans of an unsampled trace: %+v", len(spans), spans)
	}
}

func TestCheckEndpoint(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"http://collector:4318", true},
		{"https://collector.example/", true},
		{"http://127.0.0.1:4318/custom/v1/traces", true},
		{"collector:4318", false},
		{"grpc://collector:4317", false},
		{"http://", false},
		{"http://collector:4318/?x=1", false},
		{"http://user:secret@collector:4318", false},
	} {
		if err := tracing.CheckEndpoint(tc.in); (err == nil) != tc.ok {
			t.Errorf("CheckEndpoint(%q) = %v, want ok %v", tc.in, err, tc.ok)
		}
	}
}

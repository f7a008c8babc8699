package tracing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/rowq/rowq/internal/store"
)

// Config configures a Tracer.
type Config struct {
	// Endpoint is the URL of an OTLP/HTTP receiver (CheckEndpoint); ""
	// exports nothing.
	Endpoint string
	// Node and Version name the process in its spans' resource
	// (service.instance.id, service.version).
	Node, Version string
	Logger        *slog.Logger
}

// Tracer makes and exports rowq's spans: one per job enqueued through the
// API, one per grab that took jobs, and one per delivery. A nil *Tracer
// (no endpoint) makes none, and its methods allocate nothing, so the
// enqueue and delivery paths pay nothing for tracing while it is off.
type Tracer struct {
	tp  *sdktrace.TracerProvider
	tr  trace.Tracer
	log *slog.Logger
}

// tracePath is where an OTLP/HTTP receiver takes spans.
const tracePath = "/v1/traces"

// CheckEndpoint checks an OTLP/HTTP endpoint: an http or https URL with a
// host. Without a path (or with "/") spans go to /v1/traces, as with
// OTEL_EXPORTER_OTLP_ENDPOINT; a URL with a path is used as it is.
func CheckEndpoint(v string) error {
	_, err := parseEndpoint(v)
	return err
}

func parseEndpoint(v string) (*url.URL, error) {
	u, err := url.Parse(v)
	var ue *url.Error
	switch {
	case errors.As(err, &ue):
		// Its message would repeat the URL, which may hold a password.
		return nil, fmt.Errorf("not a URL: %w", ue.Err)
	case err != nil:
		return nil, fmt.Errorf("not a URL: %w", err)
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("scheme must be http or https, got %q", u.Scheme)
	case u.Host == "":
		return nil, errors.New("must name a host")
	case u.RawQuery != "" || u.Fragment != "":
		return nil, errors.New("must have no query or fragment")
	case u.User != nil:
		// It would show in /settings; the exporter sends none anyway.
		return nil, errors.New("must hold no credentials: give them in OTEL_EXPORTER_OTLP_HEADERS")
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = tracePath
	}
	return u, nil
}

// New returns a Tracer that exports to cfg.Endpoint, or nil when it is "".
// Nothing is sent before the first span ends; the OTEL_EXPORTER_OTLP_*
// variables the exporter reads (headers, timeout, certificates) apply,
// but not its endpoint, and OTEL_TRACES_SAMPLER picks the sampler
// (default: a span is sampled when its parent is, a root always).
func New(cfg Config) (*Tracer, error) {
	if cfg.Endpoint == "" {
		return nil, nil
	}
	u, err := parseEndpoint(cfg.Endpoint)
	if err != nil {
		return nil, fmt.Errorf("otel-endpoint: %w", err)
	}
	opts := []otlptracehttp.Option{otlptracehttp.WithEndpoint(u.Host), otlptracehttp.WithURLPath(u.Path)}
	if u.Scheme == "http" {
		opts = append(opts, otlptracehttp.WithInsecure())
	}
	// New dials nothing: the context only bounds its setup.
	exp, err := otlptracehttp.New(context.Background(), opts...)
	if err != nil {
		return nil, fmt.Errorf("otel-endpoint: %w", err)
	}
	res, err := resource.New(context.Background(),
		resource.WithAttributes(
			attribute.String("service.name", "rowq"),
			attribute.String("service.version", cfg.Version),
			attribute.String("service.instance.id", cfg.Node)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		return nil, fmt.Errorf("otel resource: %w", err)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// The SDK reports failed exports here (a process-wide setting: the
	// last Tracer made in a process logs them).
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("export spans", "err", err) }))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return &Tracer{tp: tp, tr: tp.Tracer("github.com/rowq/rowq"), log: log}, nil
}

// Start does nothing; the Tracer exports from New on. It is there for the
// lifecycle every service of a node shares.
func (t *Tracer) Start(context.Context) error { return nil }

// stopWait bounds how long Stop tries to send the last spans: a receiver
// that is away must not hold up a node's shutdown.
const stopWait = 5 * time.Second

// Stop sends the spans not sent yet, within ctx and stopWait, and ends the
// export. Spans it could not send are logged, not returned: they do not
// make the node's stop a failure. It is idempotent, and does nothing on a
// nil Tracer.
func (t *Tracer) Stop(ctx context.Context) error {
	if t == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, stopWait)
	defer cancel()
	if err := t.tp.Shutdown(ctx); err != nil {
		t.log.Warn("export the last spans", "err", err)
	}
	return nil
}

// Span is a span of rowq's in progress; the zero Span, which a nil Tracer
// returns, does nothing.
type Span struct {
	span trace.Span
}

// propagator reads and writes traceparent and tracestate.
var propagator propagation.TraceContext

// remote returns ctx with tr as the remote parent of the spans started
// from it, or ctx itself when tr is none (the span is a trace's root).
func remote(ctx context.Context, tr store.Trace) context.Context {
	if tr.Parent == "" {
		return ctx
	}
	return propagator.Extract(ctx, propagation.MapCarrier{"traceparent": tr.Parent, "tracestate": tr.State})
}

// queueAttrs are the attributes every span of a queue's job carries.
func queueAttrs(queue, category string) []attribute.KeyValue {
	return []attribute.KeyValue{
		attribute.String("messaging.system", "rowq"),
		attribute.String("messaging.destination.name", queue),
		attribute.String("rowq.category", category),
	}
}

// Enqueue starts the span of p's enqueue, a child of p's trace context,
// and makes that span p's trace parent: the job's deliveries are then its
// children. End it with Enqueued once the job is stored.
func (t *Tracer) Enqueue(ctx context.Context, p *store.JobInsertParams) Span {
	if t == nil {
		return Span{}
	}
	_, span := t.tr.Start(remote(ctx, p.Trace), "enqueue "+p.Queue,
		trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(queueAttrs(p.Queue, p.Category)...))
	p.Trace.Parent = formatParent(span.SpanContext())
	return Span{span: span}
}

// Enqueued ends an enqueue's span with the job's id, or its error.
func (s Span) Enqueued(id int64, err error) {
	if s.span == nil {
		return
	}
	if err != nil {
		s.span.SetStatus(codes.Error, err.Error())
	} else {
		s.span.SetAttributes(attribute.String("messaging.message.id", strconv.FormatInt(id, 10)))
	}
	s.span.End()
}

// Grab records a grab of queue that began at began and took jobs (or
// failed): a root span linked to the trace of each job that has one. A
// grab that took nothing and did not fail is not recorded: an idle
// queue's looks would bury the spans that matter.
func (t *Tracer) Grab(queue string, began time.Time, jobs []*store.Job, err error) {
	if t == nil || (len(jobs) == 0 && err == nil) {
		return
	}
	links := make([]trace.Link, 0, len(jobs))
	for _, j := range jobs {
		if sc := trace.SpanContextFromContext(remote(context.Background(), j.Trace)); sc.IsValid() {
			links = append(links, trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{
				attribute.String("messaging.message.id", strconv.FormatInt(j.ID, 10))}})
		}
	}
	_, span := t.tr.Start(context.Background(), "grab "+queue, trace.WithNewRoot(), trace.WithTimestamp(began),
		trace.WithSpanKind(trace.SpanKindConsumer), trace.WithLinks(links...),
		trace.WithAttributes(
			attribute.String("messaging.system", "rowq"),
			attribute.String("messaging.destination.name", queue),
			attribute.Int("messaging.batch.message_count", len(jobs))))
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// Deliver starts the span of a delivery of j, a child of j's trace
// context (a root for a job without one), and returns ctx carrying it:
// SetHeaders then names it as the worker's parent. End it with Delivered.
func (t *Tracer) Deliver(ctx context.Context, queue string, j *store.Job) (context.Context, Span) {
	if t == nil {
		return ctx, Span{}
	}
	attrs := append(queueAttrs(queue, j.Category),
		attribute.String("messaging.message.id", strconv.FormatInt(j.ID, 10)),
		attribute.Int("rowq.attempt", j.FailCount+1))
	ctx, span := t.tr.Start(remote(ctx, j.Trace), "deliver "+queue,
		trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	return ctx, Span{span: span}
}

// Delivered ends a delivery's span with the worker's answer: its status
// (success, accepted, failure, permanent-failure), HTTP code (0: none)
// and message. A failure marks the span as an error.
func (s Span) Delivered(status string, code int, message string) {
	if s.span == nil {
		return
	}
	s.span.SetAttributes(attribute.String("rowq.status", status))
	if code != 0 {
		s.span.SetAttributes(attribute.Int("http.response.status_code", code))
	}
	if status != "success" && status != "accepted" {
		s.span.SetStatus(codes.Error, message)
	}
	s.span.End()
}

// SetHeaders sets the traceparent and tracestate of a delivery of a job
// with trace context tr: with a delivery span in ctx (Deliver), the span
// is the parent; else tr as it was stored. A job without one, delivered
// without a span, gets neither header.
func SetHeaders(ctx context.Context, h http.Header, tr store.Trace) {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		tr.Parent = formatParent(sc)
	}
	if tr.Parent == "" {
		return
	}
	// One slice holds both values: one allocation.
	v := []string{tr.Parent, tr.State}
	h[HeaderParent] = v[0:1:1]
	if tr.State != "" {
		h[HeaderState] = v[1:2:2]
	}
}

// formatParent is sc as a version 00 traceparent.
func formatParent(sc trace.SpanContext) string {
	tid, sid := sc.TraceID(), sc.SpanID()
	b := make([]byte, 0, parentLen)
	b = append(b, "00-"...)
	b = appendHex(b, tid[:])
	b = append(b, '-')
	b = appendHex(b, sid[:])
	b = append(b, '-')
	b = appendHex(b, []byte{byte(sc.TraceFlags())})
	return string(b)
}

func appendHex(b, src []byte) []byte {
	const digits = "0123456789abcdef"
	for _, c := range src {
		b = append(b, digits[c>>4], digits[c&0xf])
	}
	return b
}

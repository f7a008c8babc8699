// Package tracingtest is an OTLP/HTTP receiver for tests: a real HTTP
// server that decodes the protobuf export requests rowq's exporter sends
// and keeps the spans, so that tests check what reaches a collector.
package tracingtest

import (
	"compress/gzip"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Span is a span as the receiver got it; ids are lowercase hex, "" for
// none.
type Span struct {
	Name                     string
	TraceID, SpanID, Parent  string
	Kind                     string // as OTLP names it: SPAN_KIND_CLIENT, …
	Attributes               map[string]string
	Links                    []Link
	StatusCode, StatusReason string
	Service                  string // the resource's service.name
}

// Link is a span's link to another span.
type Link struct {
	TraceID, SpanID string
}

// Receiver is an OTLP/HTTP trace receiver (POST /v1/traces).
type Receiver struct {
	*httptest.Server
	mu    sync.Mutex
	spans []Span
}

// New starts a receiver and closes it when the test ends. A request it
// cannot decode fails the test.
func New(t testing.TB) *Receiver {
	r := &Receiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
			t.Errorf("OTLP receiver: %s %s, want POST /v1/traces", req.Method, req.URL.Path)
			http.NotFound(w, req)
			return
		}
		if err := r.receive(req); err != nil {
			t.Errorf("OTLP receiver: %v", err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		b, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(b)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *Receiver) receive(req *http.Request) error {
	if ct := req.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		return fmt.Errorf("content type %q, want application/x-protobuf", ct)
	}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			return err
		}
		body = zr
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		return err
	}
	var export coltrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(raw, &export); err != nil {
		return fmt.Errorf("decode export request: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range export.GetResourceSpans() {
		var service string
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				sp := Span{
					Name: s.GetName(), TraceID: hex.EncodeToString(s.GetTraceId()), SpanID: hex.EncodeToString(s.GetSpanId()),
					Parent: hex.EncodeToString(s.GetParentSpanId()), Kind: s.GetKind().String(),
					Attributes: map[string]string{}, Service: service,
					StatusCode: s.GetStatus().GetCode().String(), StatusReason: s.GetStatus().GetMessage(),
				}
				for _, kv := range s.GetAttributes() {
					v := kv.GetValue()
					if v.GetStringValue() != "" {
						sp.Attributes[kv.GetKey()] = v.GetStringValue()
					} else {
						sp.Attributes[kv.GetKey()] = fmt.Sprint(v.GetIntValue())
					}
				}
				for _, l := range s.GetLinks() {
					sp.Links = append(sp.Links, Link{TraceID: hex.EncodeToString(l.GetTraceId()), SpanID: hex.EncodeToString(l.GetSpanId())})
				}
				r.spans = append(r.spans, sp)
			}
		}
	}
	return nil
}

// Spans returns the spans received so far, in the order received.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Find returns the spans received so far for which match holds.
func (r *Receiver) Find(match func(Span) bool) []Span {
	var out []Span
	for _, s := range r.Spans() {
		if match(s) {
			out = append(out, s)
		}
	}
	return out
}

package server_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/config"
	"github.com/rowq/rowq/internal/server"
	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/testworker"
	"github.com/rowq/rowq/internal/tracing/tracingtest"
)

// Trace contexts of the W3C specification's examples.
const (
	parentA = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	parentB = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	parentC = "00-0af7651916cd43dd8448eb211c80319c-b9c7c989f97918e1-00"
	stateA  = "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"
)

// postTraced POSTs body to path with the given headers and returns the
// status and the answer.
func postTraced(t *testing.T, s *server.Server, path, body string, headers map[string]string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest("POST", "http://"+s.Addr()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("POST %s: answer is not a JSON object: %q", path, raw)
	}
	return resp.StatusCode, out
}

// TestServer_TraceContextReachesWorker enqueues jobs with W3C trace
// context in the headers of POST /job and POST /jobs and in POST /jobs'
// own fields: each worker receives its job's traceparent and tracestate
// unchanged; invalid headers are ignored (the job is accepted, and
// delivered without them), an invalid field is refused with 400 naming
// it; the inspection answer shows what a job keeps.
func TestServer_TraceContextReachesWorker(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		w := testworker.New(t, nil)
		s := startNode(t, dbtest.URL(t, dialect), nil)
		setupQueue(t, s, "q", "cat", nil)
		job := func(payload string, fields string) string {
			return `{"url":"` + w.URL + `","payload":"` + payload + `"` + fields + `}`
		}
		if code, out := postTraced(t, s, "/job/cat", job("a", ""), map[string]string{"traceparent": parentA, "tracestate": stateA}); code != 200 {
			t.Fatalf("POST /job with trace headers = %d %v", code, out)
		}
		// Invalid headers: the job is accepted all the same.
		if code, out := postTraced(t, s, "/job/cat", job("b", ""), map[string]string{"traceparent": "00-xyz-01", "tracestate": stateA}); code != 200 {
			t.Fatalf("POST /job with an invalid traceparent header = %d %v, want 200 (the header ignored)", code, out)
		}
		// A valid traceparent with an invalid tracestate keeps the former.
		if code, out := postTraced(t, s, "/job/cat", job("c", ""), map[string]string{"traceparent": parentB, "tracestate": "Rojo=1"}); code != 200 {
			t.Fatalf("POST /job with an invalid tracestate header = %d %v", code, out)
		}
		// POST /jobs: the header for the jobs without a traceparent of
		// their own, the fields for the others.
		batch := `{"jobs":[{"category":"cat",` + strings.TrimPrefix(job("d", ""), "{") + `,` +
			`{"category":"cat",` + strings.TrimPrefix(job("e", `,"traceparent":"`+parentC+`","tracestate":"x@y=1"`), "{") + `]}`
		if code, out := postTraced(t, s, "/jobs", batch, map[string]string{"traceparent": parentA}); code != 200 {
			t.Fatalf("POST /jobs = %d %v", code, out)
		}
		// An outbox row carries its job's trace context in its columns;
		// an invalid one is a reject naming the column.
		ptr := func(s string) *string { return &s }
		if err := s.Store().OutboxInsert(t.Context(), []*store.OutboxRow{
			{Category: "cat", URL: ptr(w.URL), Payload: ptr(`"o"`), TraceParent: ptr(parentB), TraceState: ptr("rojo=2")},
			{Category: "cat", URL: ptr(w.URL), Payload: ptr(`"p"`), TraceParent: ptr("00-bad")},
		}); err != nil {
			t.Fatal(err)
		}
		// An invalid field is the client's own error.
		code, out := postTraced(t, s, "/job/cat", job("f", `,"traceparent":"`+strings.ToUpper(parentA)+`"`), nil)
		if msg, _ := out["error"].(string); code != 400 || !strings.HasPrefix(msg, "traceparent:") {
			t.Fatalf("POST /job with an invalid traceparent field = %d %v, want 400 naming traceparent", code, out)
		}

		want := map[string][2]string{
			"a": {parentA, stateA},
			"b": {"", ""},
			"c": {parentB, ""},
			"d": {parentA, ""},
			"e": {parentC, "x@y=1"},
			"o": {parentB, "rojo=2"},
		}
		testworker.WaitFor(t, 20*time.Second, "six deliveries", func() bool { return w.Distinct() == len(want) })
		for payload, tr := range want {
			d := w.Of(payload)[0]
			if got := [2]string{d.Header.Get("traceparent"), d.Header.Get("tracestate")}; got != tr {
				t.Errorf("job %s: the worker got traceparent, tracestate %q, want %q", payload, got, tr)
			}
			if n := len(d.Header.Values("traceparent")); tr[0] != "" && n != 1 {
				t.Errorf("job %s: %d traceparent headers, want 1", payload, n)
			}
		}
		if w.Count("f") != 0 || w.Count("p") != 0 {
			t.Error("a refused job was delivered")
		}
		var rejects struct {
			Rejects []struct {
				TraceParent *string `json:"traceparent"`
				Reason      string  `json:"reason"`
			} `json:"rejects"`
		}
		getJSON(t, s, "/outbox/rejects", &rejects)
		if r := rejects.Rejects; len(r) != 1 || r[0].TraceParent == nil || *r[0].TraceParent != "00-bad" || !strings.HasPrefix(r[0].Reason, "traceparent:") {
			t.Errorf("outbox rejects %+v, want the row with traceparent 00-bad, its reason naming traceparent", r)
		}

		// The inspection answer shows a job's trace context (a deferred
		// job, so that it is still there), a higher version read as 00.
		future := "01-" + strings.TrimPrefix(parentB, "00-") + "-more"
		_, out = postTraced(t, s, "/job/cat", job("g", `,"run_after":3600`), map[string]string{"traceparent": future, "tracestate": "a=1"})
		got := mustCall(t, s, "GET", fmt.Sprintf("/queue/q/job/%v", out["id"]), nil)
		if got["traceparent"] != parentB || got["tracestate"] != "a=1" {
			t.Errorf("GET job answers traceparent %v, tracestate %v; want %s and a=1", got["traceparent"], got["tracestate"], parentB)
		}
		_, out = postTraced(t, s, "/job/cat", job("h", `,"run_after":3600`), nil)
		got = mustCall(t, s, "GET", fmt.Sprintf("/queue/q/job/%v", out["id"]), nil)
		if _, ok := got["traceparent"]; ok {
			t.Errorf("a job without trace context answers traceparent %v", got["traceparent"])
		}
	})
}

// TestServer_ExportsSpansToOTLP runs a node with --otel-endpoint naming a
// real OTLP/HTTP receiver: a job enqueued in a client's trace gets an
// enqueue span (child of the client's), a grab span linked to it and a
// delivery span (child of the enqueue span), and the worker's traceparent
// names the delivery span; a job enqueued without trace context starts a
// trace of its own, which its delivery joins.
func TestServer_ExportsSpansToOTLP(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		rec := tracingtest.New(t)
		w := testworker.New(t, nil)
		s := startNode(t, dbtest.URL(t, dialect), func(c *config.Config) {
			c.OTelEndpoint = rec.URL
			c.DispatchHandoff = false // every job is grabbed
		})
		if got := mustCall(t, s, "GET", "/settings", nil)["otel-endpoint"]; got != rec.URL {
			t.Errorf("/settings shows otel-endpoint %v, want %s", got, rec.URL)
		}
		setupQueue(t, s, "q", "cat", nil)
		body := func(p string) string { return `{"url":"` + w.URL + `","payload":"` + p + `"}` }
		if code, out := postTraced(t, s, "/job/cat", body("traced"), map[string]string{"traceparent": parentA, "tracestate": stateA}); code != 200 {
			t.Fatalf("POST /job = %d %v", code, out)
		}
		if code, out := postTraced(t, s, "/job/cat", body("untraced"), nil); code != 200 {
			t.Fatalf("POST /job = %d %v", code, out)
		}
		testworker.WaitFor(t, 20*time.Second, "two deliveries", func() bool { return w.Distinct() == 2 })
		// Stopping the node sends the spans not sent yet.
		if err := s.Stop(nil); err != nil {
			t.Fatal(err)
		}

		const traceA = "4bf92f3577b34da6a3ce929d0e0e4736"
		for _, tc := range []struct {
			payload, trace, parent string
		}{
			{"traced", traceA, "00f067aa0ba902b7"},
			{"untraced", "", ""},
		} {
			d := w.Of(tc.payload)[0]
			tp := strings.Split(d.Header.Get("traceparent"), "-")
			if len(tp) != 4 {
				t.Fatalf("job %s: the worker got traceparent %q", tc.payload, d.Header.Get("traceparent"))
			}
			trace, delID := tp[1], tp[2]
			if tc.trace != "" && trace != tc.trace {
				t.Errorf("job %s: the worker's traceparent is of trace %s, want the client's %s", tc.payload, trace, tc.trace)
			}
			if tc.payload == "traced" && d.Header.Get("tracestate") != stateA {
				t.Errorf("job %s: the worker got tracestate %q, want %q", tc.payload, d.Header.Get("tracestate"), stateA)
			}
			del := rec.Find(func(s tracingtest.Span) bool { return s.SpanID == delID })
			if len(del) != 1 || del[0].Name != "deliver q" || del[0].TraceID != trace {
				t.Fatalf("job %s: the worker's parent %s is no delivery span received: %+v", tc.payload, delID, del)
			}
			enq := rec.Find(func(s tracingtest.Span) bool { return s.SpanID == del[0].Parent })
			if len(enq) != 1 || enq[0].Name != "enqueue q" || enq[0].TraceID != trace || enq[0].Parent != tc.parent {
				t.Fatalf("job %s: the delivery's parent is %+v, want the enqueue span, child of %q", tc.payload, enq, tc.parent)
			}
			grabs := rec.Find(func(s tracingtest.Span) bool {
				for _, l := range s.Links {
					if l.SpanID == enq[0].SpanID && l.TraceID == trace {
						return true
					}
				}
				return false
			})
			if len(grabs) != 1 || grabs[0].Name != "grab q" {
				t.Errorf("job %s: spans linked to its enqueue: %+v, want one grab span", tc.payload, grabs)
			}
			if id := enq[0].Attributes["messaging.message.id"]; id == "" || del[0].Attributes["messaging.message.id"] != id {
				t.Errorf("job %s: enqueue span of job %q, delivery span of job %q", tc.payload, id, del[0].Attributes["messaging.message.id"])
			}
		}
	})
}

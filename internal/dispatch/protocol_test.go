package dispatch

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/signing"
	"github.com/rowq/rowq/internal/store"
)

// BenchmarkDeliver measures one delivery to a local worker, unsigned and
// signed with one secret: what signing adds to a delivery's cost.
func BenchmarkDeliver(b *testing.B) {
	worker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, `{"status":"success"}`)
	}))
	b.Cleanup(worker.Close)
	keys, err := signing.ParseSecrets("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		b.Fatal(err)
	}
	j := &store.Job{ID: 123456, Queue: "mail", Category: "welcome", URL: worker.URL + "/send",
		Payload: json.RawMessage(`{"to":"ana@example.com","template":"welcome","user":123456}`), CreatedAt: time.Now()}
	for _, tc := range []struct {
		name   string
		signer *signing.Signer
	}{{"unsigned", nil}, {"signed", signing.NewSigner(keys)}} {
		b.Run(tc.name, func(b *testing.B) {
			cfg := &Config{Client: worker.Client(), UserAgent: "rowq", Signer: tc.signer}
			b.ReportAllocs()
			for b.Loop() {
				if res := deliver(context.Background(), cfg, j, "1.token"); res.Status != StatusSuccess {
					b.Fatalf("delivery: %+v", res)
				}
			}
		})
	}
}

// TestDeliver_Results: a success's result is kept up to MaxResultBytes;
// over it the success stands, its result dropped with a note, whether
// the answer fits what rowq holds or is read on a token at a time (the
// status after a long result); a failure keeps no result; an answer too
// long that is not an object, or is cut, is a failure.
func TestDeliver_Results(t *testing.T) {
	long := `"` + strings.Repeat("r", 300<<10) + `"`
	for _, tc := range []struct {
		name, answer string
		max          int
		status       string
		output       string
		msgPrefix    string
	}{
		{"object", `{"status":"success","result":{"a":[1,2]}}`, 64 << 10, StatusSuccess, `{"a":[1,2]}`, ""},
		{"null is none", `{"status":"success","result":null}`, 64 << 10, StatusSuccess, "", ""},
		{"at the cap", `{"status":"success","result":"12345678"}`, 10, StatusSuccess, `"12345678"`, ""},
		{"over the cap", `{"status":"success","message":"m","result":"123456789"}`, 10, StatusSuccess, "", "result dropped: 11 bytes, over --max-result-bytes 10; m"},
		{"too long, status first", `{"status":"success","result":` + long + `}`, 64 << 10, StatusSuccess, "", "result dropped: 307202 bytes"},
		{"too long, status last", `{"result":{"x":[` + long + `,{"y":` + long + `}]},"message":"m","status":"success"}`, 64 << 10, StatusSuccess, "", "result dropped: "},
		{"too long failure", `{"result":` + long + `,"status":"permanent-failure","message":"no"}`, 64 << 10, StatusPermanentFailure, "", "no"},
		{"failure keeps none", `{"status":"permanent-failure","result":1}`, 64 << 10, StatusPermanentFailure, "", ""},
		{"too long, cut", `{"status":"success","result":` + long, 64 << 10, StatusFailure, "", "worker response of more than"},
		{"too long, not an object", long, 64 << 10, StatusFailure, "", "worker response is not JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			worker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.WriteString(w, tc.answer)
			}))
			t.Cleanup(worker.Close)
			cfg := &Config{Client: worker.Client(), MaxResultBytes: tc.max}
			res := deliver(t.Context(), cfg, &store.Job{ID: 1, URL: worker.URL}, "1.token")
			if res.Status != tc.status || string(res.Output) != tc.output || !strings.HasPrefix(res.Message, tc.msgPrefix) {
				t.Fatalf("deliver = status %q output %.40q message %.100q; want %q, %q, message starting %q",
					res.Status, res.Output, res.Message, tc.status, tc.output, tc.msgPrefix)
			}
		})
	}
}

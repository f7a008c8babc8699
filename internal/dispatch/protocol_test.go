package dispatch

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
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

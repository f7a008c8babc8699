package signing_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/signing"
)

// The Standard Webhooks reference libraries' signing test vector.
const (
	vectorSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	vectorID        = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	vectorTimestamp = "1614265330"
	vectorBody      = `{"test": 2432232314}`
	vectorSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func mustSecrets(t *testing.T, s string) [][]byte {
	t.Helper()
	keys, err := signing.ParseSecrets(s)
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

func TestSign_SpecVector(t *testing.T) {
	s := signing.NewSigner(mustSecrets(t, vectorSecret))
	if got := s.Sign(vectorID, vectorTimestamp, []byte(vectorBody)); got != vectorSignature {
		t.Fatalf("Sign = %s, want the spec's %s", got, vectorSignature)
	}
}

func TestSign_OnePerSecretInOrder(t *testing.T) {
	other := "whsec_" + base64.StdEncoding.EncodeToString([]byte("another secret of 32 bytes......"))
	s := signing.NewSigner(mustSecrets(t, other+", "+vectorSecret))
	got := strings.Split(s.Sign(vectorID, vectorTimestamp, []byte(vectorBody)), " ")
	if len(got) != 2 || got[1] != vectorSignature {
		t.Fatalf("Sign with two secrets = %q, want two signatures, the second %s", got, vectorSignature)
	}
	mac := hmac.New(sha256.New, []byte("another secret of 32 bytes......"))
	mac.Write([]byte(vectorID + "." + vectorTimestamp + "." + vectorBody))
	if want := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil)); got[0] != want {
		t.Fatalf("first signature %s, want %s", got[0], want)
	}
	if signing.NewSigner(nil) != nil {
		t.Fatal("NewSigner(no keys) is not nil")
	}
}

func TestParseSecrets_Errors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "secret 1: want whsec_"},
		{vectorSecret + ",whsec_not*base64", "secret 2: the part after whsec_ is not standard base64"},
		{"whsec_" + base64.StdEncoding.EncodeToString(make([]byte, 23)), "want 24 to 64 bytes once decoded, got 23"},
		{"whsec_" + base64.StdEncoding.EncodeToString(make([]byte, 65)), "got 65"},
	} {
		if _, err := signing.ParseSecrets(tc.in); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseSecrets(%q) = %v, want an error with %q", tc.in, err, tc.want)
		}
	}
	if keys, err := signing.ParseSecrets(" "); err != nil || len(keys) != 0 {
		t.Errorf("ParseSecrets(blank) = %v, %v, want no secret", keys, err)
	}
}

func TestVerify(t *testing.T) {
	keys := mustSecrets(t, vectorSecret)
	at := time.Unix(1614265330, 0)
	header := func(id, ts, sig string) func(string) string {
		h := http.Header{}
		for k, v := range map[string]string{"Webhook-Id": id, "Webhook-Timestamp": ts, "Webhook-Signature": sig} {
			if v != "" {
				h.Set(k, v)
			}
		}
		return h.Get
	}
	for _, tc := range []struct {
		name string
		get  func(string) string
		body string
		now  time.Time
		want error
	}{
		{"valid", header(vectorID, vectorTimestamp, vectorSignature), vectorBody, at, nil},
		{"among others", header(vectorID, vectorTimestamp, "v1a,abc v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc= "+vectorSignature), vectorBody, at, nil},
		{"4 min later", header(vectorID, vectorTimestamp, vectorSignature), vectorBody, at.Add(4 * time.Minute), nil},
		{"6 min later", header(vectorID, vectorTimestamp, vectorSignature), vectorBody, at.Add(6 * time.Minute), signing.ErrTimestamp},
		{"6 min earlier", header(vectorID, vectorTimestamp, vectorSignature), vectorBody, at.Add(-6 * time.Minute), signing.ErrTimestamp},
		{"timestamp not a number", header(vectorID, "soon", vectorSignature), vectorBody, at, signing.ErrTimestamp},
		{"body changed", header(vectorID, vectorTimestamp, vectorSignature), `{"test": 2432232315}`, at, signing.ErrSignature},
		{"id changed", header("msg_other", vectorTimestamp, vectorSignature), vectorBody, at, signing.ErrSignature},
		{"timestamp changed", header(vectorID, strconv.Itoa(1614265331), vectorSignature), vectorBody, at, signing.ErrSignature},
		{"no signature header", header(vectorID, vectorTimestamp, ""), vectorBody, at, signing.ErrMissingHeader},
		{"no id header", header("", vectorTimestamp, vectorSignature), vectorBody, at, signing.ErrMissingHeader},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := signing.Verify(keys, tc.get, []byte(tc.body), tc.now); !errors.Is(err, tc.want) {
				t.Fatalf("Verify = %v, want %v", err, tc.want)
			}
		})
	}
}

func BenchmarkSign(b *testing.B) {
	s := signing.NewSigner([][]byte{make([]byte, 32)})
	body := []byte(`{"user":12345,"action":"welcome-mail","attempt":1}`)
	b.ReportAllocs()
	for b.Loop() {
		s.Sign("msg_123456_lq3k2x1a9", "1614265330", body)
	}
}

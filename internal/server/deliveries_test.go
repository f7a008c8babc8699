package server_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/config"
	"github.com/rowq/rowq/internal/server"
	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/testworker"
)

// verifyStandardWebhook checks a delivery as the Standard Webhooks spec
// tells a consumer to, written here from the spec and independent of
// rowq's signing code: HMAC-SHA256 keyed by the base64-decoded secret
// (without whsec_) over "{webhook-id}.{webhook-timestamp}.{body}", one of
// the space-separated "v1,<base64>" signatures matching, and the
// timestamp within 5 minutes of now.
func verifyStandardWebhook(secret string, h http.Header, body string, now time.Time) error {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return err
	}
	id, ts, sigs := h.Get("webhook-id"), h.Get("webhook-timestamp"), h.Get("webhook-signature")
	if id == "" || ts == "" || sigs == "" {
		return errors.New("missing a webhook- header")
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("webhook-timestamp %q: %w", ts, err)
	}
	if d := now.Sub(time.Unix(sec, 0)); d > 5*time.Minute || d < -5*time.Minute {
		return fmt.Errorf("webhook-timestamp %s is %v off", ts, d)
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "." + body))
	want := base64.StdEncoding.EncodeToString(mac.Sum(nil))
	for _, sig := range strings.Split(sigs, " ") {
		version, value, _ := strings.Cut(sig, ",")
		if version == "v1" && hmac.Equal([]byte(value), []byte(want)) {
			return nil
		}
	}
	return errors.New("no signature matches")
}

// TestVerifyStandardWebhook_SpecVector checks the test's own verifier
// against the signature the spec's reference libraries test with.
func TestVerifyStandardWebhook_SpecVector(t *testing.T) {
	h := http.Header{}
	h.Set("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek")
	h.Set("webhook-timestamp", "1614265330")
	h.Set("webhook-signature", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
	at := time.Unix(1614265330, 0)
	const secret, body = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", `{"test": 2432232314}`
	if err := verifyStandardWebhook(secret, h, body, at); err != nil {
		t.Fatalf("the spec's vector: %v", err)
	}
	if err := verifyStandardWebhook(secret, h, body+" ", at); err == nil {
		t.Fatal("a changed body verifies")
	}
}

func secret(fill byte) string {
	return "whsec_" + base64.StdEncoding.EncodeToString([]byte(strings.Repeat(string(fill), 32)))
}

// TestDeliveries_SignedWithRotation signs with two secrets (the new one
// and the one being retired): every attempt carries the job headers and
// a signature per secret that the spec's verification accepts with
// either, under the same webhook-id, and the body as enqueued.
func TestDeliveries_SignedWithRotation(t *testing.T) {
	newSecret, oldSecret := secret('n'), secret('o')
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		w := testworker.New(t, func(body string, attempt int) (int, string, time.Duration) {
			if attempt == 1 {
				return 500, `{"status":"failure","message":"try again"}`, 0
			}
			return 200, `{"status":"success"}`, 0
		})
		s := startNode(t, dbtest.URL(t, dialect), func(c *config.Config) { c.SigningSecret = newSecret + "," + oldSecret })
		settings := mustCall(t, s, "GET", "/settings", nil)
		if got := settings["signing-secret"]; got != "xxxxx,xxxxx" {
			t.Errorf("/settings shows signing-secret %v, want it masked as xxxxx,xxxxx", got)
		}
		setupQueue(t, s, "mail", "welcome", nil)
		const body = `{"to":"ana@example.com","note":"héllo  spaced"}`
		id := push(t, s, "welcome", map[string]any{"url": w.URL + "/hook", "payload": body, "max_retries": 3, "retry_delay": 0})
		testworker.WaitFor(t, 20*time.Second, "two deliveries", func() bool { return w.Count(body) == 2 })

		ds := w.Of(body)
		var msgID string
		for i, d := range ds {
			for _, sec := range []string{newSecret, oldSecret} {
				if err := verifyStandardWebhook(sec, d.Header, body, time.Now()); err != nil {
					t.Errorf("attempt %d: verify with one secret: %v", i+1, err)
				}
			}
			if err := verifyStandardWebhook(secret('x'), d.Header, body, time.Now()); err == nil {
				t.Errorf("attempt %d verifies with a secret rowq does not have", i+1)
			}
			if n := len(strings.Fields(d.Header.Get("webhook-signature"))); n != 2 {
				t.Errorf("attempt %d: %d signatures, want one per secret", i+1, n)
			}
			want := map[string]string{
				"Rowq-Job-Id":   strconv.FormatInt(id, 10),
				"Rowq-Attempt":  strconv.Itoa(i + 1),
				"Rowq-Queue":    "mail",
				"Rowq-Category": "welcome",
				"Content-Type":  "application/json",
			}
			for k, v := range want {
				if got := d.Header.Get(k); got != v {
					t.Errorf("attempt %d: %s = %q, want %q", i+1, k, got, v)
				}
			}
			got := d.Header.Get("webhook-id")
			if !strings.HasPrefix(got, "msg_"+strconv.FormatInt(id, 10)+"_") || strings.Contains(got, ".") {
				t.Errorf("attempt %d: webhook-id %q, want msg_%d_… without dots", i+1, got, id)
			}
			if i == 0 {
				msgID = got
			} else if got != msgID {
				t.Errorf("webhook-id changed between attempts: %q then %q", msgID, got)
			}
		}
	})
}

// TestDeliveries_UnsignedCarryJobHeaders: without a secret a delivery has
// the job headers and no webhook- headers.
func TestDeliveries_UnsignedCarryJobHeaders(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		w := testworker.New(t, nil)
		s := startNode(t, dbtest.URL(t, dialect), nil)
		setupQueue(t, s, "q", "cat", nil)
		id := push(t, s, "cat", map[string]any{"url": w.URL, "payload": map[string]int{"n": 1}})
		testworker.WaitFor(t, 20*time.Second, "the delivery", func() bool { return w.Count(`{"n":1}`) == 1 })
		h := w.Of(`{"n":1}`)[0].Header
		if h.Get("Rowq-Job-Id") != strconv.FormatInt(id, 10) || h.Get("Rowq-Attempt") != "1" || h.Get("Rowq-Queue") != "q" || h.Get("Rowq-Category") != "cat" {
			t.Errorf("job headers %v, want job %d, attempt 1, queue q, category cat", h, id)
		}
		for _, k := range []string{"webhook-id", "webhook-timestamp", "webhook-signature"} {
			if v := h.Get(k); v != "" {
				t.Errorf("unsigned delivery has %s: %q", k, v)
			}
		}
	})
}

// waitFailed waits for the job's failure log entry.
func waitFailed(t *testing.T, s *server.Server, queue string, id int64) *store.FailedJob {
	t.Helper()
	var f *store.FailedJob
	testworker.WaitFor(t, 20*time.Second, "failure log entry", func() bool {
		f = failedEntry(t, s, queue, id)
		return f != nil
	})
	return f
}

// insert stores jobs straight in the database, as a job stored before
// the policy changed would be, and returns their ids.
func insert(t *testing.T, st store.Store, queue string, urls ...string) []int64 {
	t.Helper()
	var ps []*store.JobInsertParams
	for _, u := range urls {
		ps = append(ps, &store.JobInsertParams{Queue: queue, Category: "cat", URL: u, MaxRetries: 5, Timeout: 5})
	}
	ids, err := st.JobsInsert(t.Context(), ps)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// TestDeliveries_RefusedFailForGood: a job to a metadata address, to a
// URL outside the allow list (both stored before the API could refuse
// them) or to a name that resolves to loopback under deny-private goes
// to the failure log after one try, with retries left, saying why.
func TestDeliveries_RefusedFailForGood(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		w := testworker.New(t, nil)
		_, port, _ := strings.Cut(strings.TrimPrefix(w.URL, "http://"), ":")
		s := startNode(t, dbtest.URL(t, dialect), func(c *config.Config) {
			c.WorkerURLAllow = "*.example.test,localhost,169.254.0.0/16"
			c.WorkerDenyPrivate = true
		})
		setupQueue(t, s, "q", "cat", nil)
		ids := insert(t, s.Store(), "q",
			"http://169.254.169.254/latest/meta-data/",
			"http://outside.example.net/hook",
		)
		// localhost passes the allow list and, a name, the API's check:
		// the dialer refuses the loopback address it resolves to.
		ids = append(ids, push(t, s, "cat", map[string]any{"url": "http://localhost:" + port + "/", "max_retries": 5}))
		for i, want := range []string{
			"worker url refused: 169.254.169.254 is a link-local address",
			`worker url refused: "http://outside.example.net/hook" matches no entry of --worker-url-allow`,
			"delivery refused to connect to", // 127.0.0.1 or ::1, as resolved
		} {
			f := waitFailed(t, s, "q", ids[i])
			if f.Status != "permanent-failure" || f.FailCount != 1 || !strings.Contains(f.Message, want) {
				t.Errorf("job %d: failure log %s after %d tries: %q, want permanent-failure after 1 with %q", i, f.Status, f.FailCount, f.Message, want)
			}
			if i == 2 && !strings.Contains(f.Message, "--worker-deny-private") {
				t.Errorf("localhost job: message %q does not name --worker-deny-private", f.Message)
			}
		}
		if n := w.Distinct(); n != 0 {
			t.Fatalf("worker got %d deliveries, want none", n)
		}
	})
}

// TestDeliveries_RedirectNotFollowed: a worker answering a redirect does
// not get the job re-sent to the target; the job fails with the 3xx and
// is retried like any failure.
func TestDeliveries_RedirectNotFollowed(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		target := testworker.New(t, nil)
		redirect := httptest.NewServer(http.RedirectHandler(target.URL+"/elsewhere", http.StatusTemporaryRedirect))
		t.Cleanup(redirect.Close)
		s := startNode(t, dbtest.URL(t, dialect), nil)
		setupQueue(t, s, "q", "cat", nil)
		id := push(t, s, "cat", map[string]any{"url": redirect.URL + "/old", "payload": "moved", "max_retries": 1, "retry_delay": 0})
		f := waitFailed(t, s, "q", id)
		if f.Code != 307 || f.FailCount != 2 || !strings.Contains(f.Message, "does not follow") || !strings.Contains(f.Message, target.URL+"/elsewhere") {
			t.Errorf("failure log: code %d after %d tries, %q; want 307 after 2 (a retried failure) saying the redirect is not followed", f.Code, f.FailCount, f.Message)
		}
		if n := target.Count("moved"); n != 0 {
			t.Fatalf("redirect target got the job %d times, want 0", n)
		}
	})
}

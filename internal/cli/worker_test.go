package cli

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/config"
	"github.com/rowq/rowq/internal/signing"
	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/testworker"
)

func testSecret(fill byte) string {
	return "whsec_" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{fill}, 32))
}

// lockedBuffer is a bytes.Buffer that handlers may write while the test
// reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestEchoHandler_VerifiesSignatures sends the echo worker deliveries
// signed by rowq's signer: a good one is answered, a bad signature, an
// old timestamp or no signature gets 401.
func TestEchoHandler_VerifiesSignatures(t *testing.T) {
	t.Parallel()
	keys, err := signing.ParseSecrets(testSecret('a') + "," + testSecret('b'))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_800_000_000, 0)
	var out lockedBuffer
	srv := httptest.NewServer(echoHandler("success", keys, &out, func() time.Time { return now }))
	t.Cleanup(srv.Close)
	signed := func(secret string, at time.Time, body string) http.Header {
		k, err := signing.ParseSecrets(secret)
		if err != nil {
			t.Fatal(err)
		}
		ts := strconv.FormatInt(at.Unix(), 10)
		h := http.Header{}
		h.Set("webhook-id", "msg_7_abc")
		h.Set("webhook-timestamp", ts)
		h.Set("webhook-signature", signing.NewSigner(k).Sign("msg_7_abc", ts, []byte(body)))
		return h
	}
	for _, tc := range []struct {
		name   string
		header http.Header
		want   int
	}{
		{"signed with the first secret", signed(testSecret('a'), now, `{"n":1}`), 200},
		{"signed with the second secret", signed(testSecret('b'), now.Add(-4*time.Minute), `{"n":1}`), 200},
		{"signed with another secret", signed(testSecret('c'), now, `{"n":1}`), 401},
		{"signed over another body", signed(testSecret('a'), now, `{"n":2}`), 401},
		{"timestamp 6 minutes old", signed(testSecret('a'), now.Add(-6*time.Minute), `{"n":1}`), 401},
		{"not signed", http.Header{}, 401},
	} {
		req, err := http.NewRequest("POST", srv.URL+"/job", strings.NewReader(`{"n":1}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header = tc.header
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s: status %d, want %d", tc.name, resp.StatusCode, tc.want)
		}
	}
	if got := out.String(); strings.Count(got, "refused POST /job") != 4 || strings.Count(got, `POST /job {"n":1}`) != 2 {
		t.Errorf("worker printed %q, want 2 jobs and 4 refusals", got)
	}
}

// TestEchoWorker_SignedByServer delivers jobs from a node signing with a
// secret to echo workers: the one holding the secret answers success, the
// one holding another answers 401, and the job fails with that.
func TestEchoWorker_SignedByServer(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		srv := startServerOn(t, dbtest.URL(t, dialect), func(c *config.Config) { c.SigningSecret = testSecret('s') })
		mustRun(t, srv, "queue", "put", "q")
		mustRun(t, srv, "routing", "put", "c", "q")

		for _, tc := range []struct {
			secret string
			ok     bool
		}{{testSecret('s'), true}, {testSecret('x'), false}} {
			keys, err := signing.ParseSecrets(tc.secret)
			if err != nil {
				t.Fatal(err)
			}
			var out lockedBuffer
			worker := httptest.NewServer(echoHandler("success", keys, &out, time.Now))
			t.Cleanup(worker.Close)
			id := strings.TrimSpace(mustRun(t, srv, "job", "push", "c", "--url", worker.URL, "--payload", `"hi"`, "--json"))
			testworker.WaitFor(t, 20*time.Second, "the job done", func() bool {
				code, _, _ := run(t, srv, "job", "get", "q", jobID(t, id))
				return code != 0
			})
			failed := failedIDs(t, srv, "q")
			if tc.ok && (!strings.Contains(out.String(), "POST / hi") || len(failed) != 0) {
				t.Errorf("worker with the secret printed %q and the failure log holds %v; want the job answered", out.String(), failed)
			}
			if !tc.ok {
				if len(failed) != 1 {
					t.Fatalf("failure log %v, want the refused job", failed)
				}
				entry := mustRun(t, srv, "failed", "get", "q", failed[0], "--json")
				if !strings.Contains(entry, `"code": 401`) && !strings.Contains(entry, `"code":401`) || !strings.Contains(entry, signing.ErrSignature.Error()) {
					t.Errorf("failure log entry %s, want code 401 and %q", entry, signing.ErrSignature)
				}
			}
		}
	})
}

// jobID reads the id from `rowq job push --json`'s answer.
func jobID(t *testing.T, answer string) string {
	t.Helper()
	i := strings.Index(answer, `"id":`)
	if i < 0 {
		t.Fatalf("no id in %s", answer)
	}
	var id int64
	if _, err := fmt.Sscan(strings.TrimLeft(answer[i+len(`"id":`):], " "), &id); err != nil {
		t.Fatalf("no id in %s: %v", answer, err)
	}
	return strconv.FormatInt(id, 10)
}

// TestSigningSecret_BadAtStart: serve and echo-worker refuse a secret that
// is not whsec_ and base64, naming the flag.
func TestSigningSecret_BadAtStart(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"serve", "--signing-secret", "whsec_not*base64", "--database-url", "sqlite://" + t.TempDir() + "/x.db"},
		{"echo-worker", "--signing-secret", "whsec_not*base64"},
		{"serve", "--worker-url-allow", "10.0.0.0/99", "--database-url", "sqlite://" + t.TempDir() + "/x.db"},
	} {
		var out, errb bytes.Buffer
		code := Main(args, &out, &errb)
		flag := strings.TrimPrefix(args[1], "--")
		if code == 0 || !strings.Contains(errb.String(), flag+":") {
			t.Errorf("rowq %s: exit %d, stderr %q; want a failure naming %s", strings.Join(args, " "), code, errb.String(), flag)
		}
	}
}

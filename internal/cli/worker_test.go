package cli

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rowq/rowq/client"
	"github.com/rowq/rowq/internal/config"
	"github.com/rowq/rowq/internal/signing"
	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/testworker"
	"github.com/rowq/rowq/rowqtype"
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

// TestWorkerCmd_RunsACommandPerJob runs rowq worker with a shell script
// as its command against a live server: the script reads the payload on
// stdin and the job in its environment; exit 0 completes the job, 75
// retries it, anything else fails it for good with stderr's tail as the
// message. When its context ends (SIGTERM), the worker stops pulling and
// waits for the command running, whose job is completed.
func TestWorkerCmd_RunsACommandPerJob(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		srv := startServerOn(t, dbtest.URL(t, dialect), nil)
		c := client.New(srv, nil)
		ctx := t.Context()
		if _, err := c.PutQueue(ctx, "q", &rowqtype.QueueRequest{Delivery: new("pull"), MaxWorkers: new(4)}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.PutRouting(ctx, "cat", "q"); err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		script := filepath.Join(dir, "work.sh")
		os.WriteFile(script, []byte(`#!/bin/sh
payload=$(cat)
echo "job $ROWQ_JOB_ID attempt $ROWQ_ATTEMPT queue $ROWQ_QUEUE category $ROWQ_CATEGORY payload $payload"
case "$payload" in
retry) if [ "$ROWQ_ATTEMPT" = 1 ]; then echo "not yet" >&2; exit 75; fi ;;
bad) head -c 3000 /dev/zero | tr '\0' x >&2; echo " went wrong" >&2; exit 3 ;;
slow) touch "$1/slow-started"; sleep 2 ;;
esac
exit 0
`), 0o755)
		ids := map[string]int64{}
		for _, p := range []string{`"ok"`, `"retry"`, `"bad"`, `{"n":1}`} {
			j, err := c.PushJob(ctx, "cat", &rowqtype.JobRequest{Payload: json.RawMessage(p), MaxRetries: new(2)})
			if err != nil {
				t.Fatal(err)
			}
			ids[p] = j.ID
		}
		runCtx, stop := context.WithCancel(ctx)
		defer stop()
		var out, errb lockedBuffer
		done := make(chan error, 1)
		go func() {
			done <- work(runCtx, []string{"--server", srv, "--queue", "q", "--concurrency", "3", "--lease", "5", "--", script, dir}, &out, &errb)
		}()
		stats := func() *rowqtype.QueueStats {
			s, err := c.QueueStats(ctx, "q")
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		testworker.WaitFor(t, 60*time.Second, "3 successes, 2 failures (one permanent)", func() bool {
			s := stats()
			return s.TotalSuccesses == 3 && s.TotalFailures == 2 && s.TotalPermanentFailures == 1
		})
		for _, want := range []string{
			fmt.Sprintf("job %d attempt 1 queue q category cat payload ok\n", ids[`"ok"`]),
			fmt.Sprintf("job %d attempt 2 queue q category cat payload retry\n", ids[`"retry"`]),
			fmt.Sprintf("job %d attempt 1 queue q category cat payload {\"n\":1}\n", ids[`{"n":1}`]),
		} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("the command's output lacks %q:\n%s", want, out.String())
			}
		}
		page, err := c.FailedJobs(ctx, "q", nil)
		if err != nil || len(page.FailedJobs) != 1 {
			t.Fatalf("failure log = %+v, %v; want the bad job", page, err)
		}
		if f := page.FailedJobs[0]; f.JobID != ids[`"bad"`] || !strings.HasSuffix(f.Result.Message, "x went wrong") || len(f.Result.Message) > stderrTail {
			t.Fatalf("failed job = %+v, want the tail of its stderr (at most %d bytes)", f, stderrTail)
		}

		// SIGTERM while a command runs: it finishes, and its job is done.
		slow, err := c.PushJob(ctx, "cat", &rowqtype.JobRequest{Payload: json.RawMessage(`"slow"`)})
		if err != nil {
			t.Fatal(err)
		}
		testworker.WaitFor(t, 30*time.Second, "the slow command started", func() bool {
			_, err := os.Stat(filepath.Join(dir, "slow-started"))
			return err == nil
		})
		stop()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("rowq worker = %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("rowq worker did not stop")
		}
		if _, err := c.Job(ctx, "q", slow.ID); !client.IsNotFound(err) {
			t.Fatalf("the job whose command ran at the stop: %v, want it completed", err)
		}
		if s := stats(); s.TotalSuccesses != 4 {
			t.Fatalf("successes %d after the stop, want 4", s.TotalSuccesses)
		}
	})
}

// TestWorkerCmd_BadFlags: the flags are checked before anything runs.
func TestWorkerCmd_BadFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--", "true"}, "--queue: required"},
		{[]string{"--queue", "q", "--concurrency", "0", "--", "true"}, "--concurrency:"},
		{[]string{"--queue", "q", "--lease", "0.5", "--", "true"}, "--lease:"},
		{[]string{"--queue", "q"}, "a command to run is required"},
	} {
		var out, errb bytes.Buffer
		err := work(t.Context(), tc.args, &out, &errb)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("rowq worker %v = %v, want an error with %q", tc.args, err, tc.want)
		}
	}
}

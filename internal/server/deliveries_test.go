package server_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/config"
	"github.com/rowq/rowq/internal/server"
	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/testworker"
)

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

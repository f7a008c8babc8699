package server_test

import (
	"context"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/config"
	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/testworker"
)

// TestServer_StopIsNotHeldByUnusedConnections: a client left a connection
// open without sending a request (a pool that dialed ahead). The stop
// closes it instead of letting http.Server.Shutdown wait 5 s for it, so a
// 3 s shutdown timeout is not spent on it: the stop reports no error and
// the delivery in flight is acknowledged.
func TestServer_StopIsNotHeldByUnusedConnections(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		w := testworker.New(t, func(string, int) (int, string, time.Duration) {
			return 200, `{"status":"success"}`, time.Second
		})
		url := dbtest.URL(t, dialect)
		s := startNode(t, url, func(c *config.Config) { c.ShutdownTimeout = 3 * time.Second })
		setupQueue(t, s, "q", "cat", nil)
		push(t, s, "cat", map[string]any{"url": w.URL, "payload": "in-flight"})
		testworker.WaitFor(t, 5*time.Second, "the delivery", func() bool { return w.Count("in-flight") == 1 })

		conn, err := net.Dial("tcp", s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if err := s.Stop(nil); err != nil {
			t.Fatalf("stop: %v", err)
		}
		conn.SetReadDeadline(time.Now().Add(time.Second))
		if _, err := conn.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("the unused connection is still open after the stop (read: %v)", err)
		}
		if w.Count("in-flight") != 1 {
			t.Fatalf("delivered %d times, want once", w.Count("in-flight"))
		}
		js, err := dbtest.OpenURL(t, url).JobsList(context.Background(), &store.JobsListParams{Queue: "q", Kind: store.JobsGrabbed, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(js) != 0 {
			t.Fatal("the delivered job is still grabbed: not acknowledged before the stop")
		}
	})
}

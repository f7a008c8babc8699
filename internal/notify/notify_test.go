package notify

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store"
)

type leaders struct {
	host  string
	reads atomic.Int64
}

func (l *leaders) QueueLeader(_ context.Context, _ string) (*store.Node, error) {
	l.reads.Add(1)
	return &store.Node{ID: "leader", Host: l.host}, nil
}

// TestNudger_CoalescesWakes wakes a queue led by another node 1,000 times
// at once: the leader gets one nudge per round trip, not one per wake, at
// least one after the last wake, and the leader is read once.
func TestNudger_CoalescesWakes(t *testing.T) {
	var nudges atomic.Int64
	var last atomic.Int64 // when the last nudge arrived (UnixNano)
	leader := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.EscapedPath() != "/queue/a%2Fb/wake" {
			t.Errorf("nudge %s %s, want POST /queue/a%%2Fb/wake", r.Method, r.URL.EscapedPath())
		}
		time.Sleep(5 * time.Millisecond)
		nudges.Add(1)
		last.Store(time.Now().UnixNano())
		w.Write([]byte(`{"queue_name":"a/b","woken":true}`))
	}))
	defer leader.Close()
	l := &leaders{host: strings.TrimPrefix(leader.URL, "http://")}
	n := New(Config{Leaders: l, Node: "me", LeaderTTL: time.Minute})
	var lastWake time.Time
	for range 1000 {
		n.Wake("a/b")
		lastWake = time.Now()
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Unix(0, last.Load()).Before(lastWake) {
		if time.Now().After(deadline) {
			t.Fatalf("no nudge arrived after the last wake (%d nudges)", nudges.Load())
		}
		time.Sleep(time.Millisecond)
	}
	if got := nudges.Load(); got > 10 {
		t.Errorf("%d nudges for 1,000 wakes in a burst, want a few", got)
	}
	if got := l.reads.Load(); got != 1 {
		t.Errorf("leader read %d times, want once within LeaderTTL", got)
	}
}

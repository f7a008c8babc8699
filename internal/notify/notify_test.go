package notify

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/testcert"
	"github.com/rowq/rowq/rowqtype"
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

// TestNudger_HTTPS nudges a leader that serves HTTPS: a nudger whose client
// trusts the leader's CA reaches it, one trusting another CA does not.
func TestNudger_HTTPS(t *testing.T) {
	ca := testcert.NewCA(t, "rowq test CA")
	nudged := make(chan string, 10)
	leader := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		nudged <- string(b)
		w.Write([]byte(`{"queue_name":"q","woken":true}`))
	}))
	leader.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Issue(t).TLS(t)}}
	leader.StartTLS()
	defer leader.Close()
	nudger := func(trusted *testcert.CA) *Nudger {
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: trusted.Pool()}}}
		return New(Config{Leaders: &leaders{host: strings.TrimPrefix(leader.URL, "https://")}, Node: "me", Scheme: "https", Client: c})
	}

	nudger(testcert.NewCA(t, "another CA")).Changed("q")
	select {
	case b := <-nudged:
		t.Fatalf("a nudger that does not trust the leader's CA nudged it (%q)", b)
	case <-time.After(300 * time.Millisecond):
	}
	nudger(ca).Changed("q")
	select {
	case b := <-nudged:
		if b != settingsBody {
			t.Errorf("nudge body %q, want %q", b, settingsBody)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no nudge reached the HTTPS leader")
	}
}

// TestNudger_FinishedGoTogether: 500 lease ends of a queue led by another
// node reach it, every one exactly once, in a few nudges.
func TestNudger_FinishedGoTogether(t *testing.T) {
	var (
		mu     sync.Mutex
		got    = map[int64]int{}
		nudges atomic.Int64
	)
	leader := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req rowqtype.WakeRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			t.Errorf("nudge body: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
		nudges.Add(1)
		mu.Lock()
		for _, e := range req.Finished {
			if e.Grabs != 2 {
				t.Errorf("lease end %+v, want grabs 2", e)
			}
			got[e.ID]++
		}
		mu.Unlock()
		w.Write([]byte(`{"queue_name":"q","woken":true}`))
	}))
	defer leader.Close()
	n := New(Config{Leaders: &leaders{host: strings.TrimPrefix(leader.URL, "http://")}, Node: "me", LeaderTTL: time.Minute})
	for id := range int64(500) {
		n.Finished("q", store.JobGrab{ID: id + 1, Grabs: 2})
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		mu.Lock()
		arrived := len(got)
		mu.Unlock()
		if arrived == 500 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of 500 lease ends arrived", arrived)
		}
	}
	time.Sleep(50 * time.Millisecond) // nothing more may come
	mu.Lock()
	defer mu.Unlock()
	for id, k := range got {
		if k != 1 {
			t.Errorf("lease end of job %d arrived %d times", id, k)
		}
	}
	if k := nudges.Load(); k > 20 {
		t.Errorf("%d nudges for 500 lease ends in a burst, want a few", k)
	}
}

package dispatch

import (
	"net/http"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 26, 4, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Duration // -1: nil
	}{
		{"", -1},
		{"0", 0},
		{" 120 ", 2 * time.Minute},
		{"-5", -1},
		{"1.5", -1},
		{"soon", -1},
		{"99999999", maxWorkerDefer},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{now.Add(-time.Hour).Format(http.TimeFormat), 0},
		{now.Add(48 * time.Hour).Format(http.TimeFormat), maxWorkerDefer},
		{"Wednesday, 26-Nov-26 04:00:30 GMT", 30 * time.Second}, // RFC 850, which HTTP dates allow
	} {
		got := parseRetryAfter(tc.in, now)
		switch {
		case tc.want < 0 && got != nil:
			t.Errorf("parseRetryAfter(%q) = %v, want nil", tc.in, *got)
		case tc.want >= 0 && (got == nil || *got != tc.want):
			t.Errorf("parseRetryAfter(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestHostKey(t *testing.T) {
	for in, want := range map[string]string{
		"http://Worker.example/x?y":    "worker.example:80",
		"https://worker.example/x":     "worker.example:443",
		"http://user:pw@10.0.0.1:81/x": "10.0.0.1:81",
		"http://[::1]:8080/":           "[::1]:8080",
	} {
		if got := hostKey(in); got != want {
			t.Errorf("hostKey(%q) = %q, want %q", in, got, want)
		}
	}
}

// flowJob is a job of host h with the given id.
func flowJob(id int64, h string) *store.Job { return &store.Job{ID: id, URL: "http://" + h + "/work"} }

// TestHostFlow_RateCutAndRecovery: a 429 cuts the host's rate to half an
// estimate of what it had; later jobs of the host get turns one interval
// apart, a job given a turn goes when it comes back, other hosts are not
// touched, answers to deliveries begun before the cut do not cut again,
// and successes grow the rate back until the host is let go.
func TestHostFlow_RateCutAndRecovery(t *testing.T) {
	var f hostFlow
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	busy := &Result{Status: StatusFailure, Code: 429, Busy: true}
	ok := &Result{Status: StatusSuccess, Code: 200}

	if w := f.admitAt(flowJob(1, "a:80"), t0); w != 0 {
		t.Fatalf("a host in no trouble waits %v", w)
	}
	f.observe(flowJob(1, "a:80"), ok, t0, t0, 4, nil) // nothing tracked, nothing kept
	if f.n.Load() != 0 {
		t.Fatal("a success of an untracked host was tracked")
	}
	// 4 in flight, 1 s each: about 4/s; halved: 2/s, one turn each 500 ms.
	f.observe(flowJob(1, "a:80"), busy, t0.Add(-time.Second), t0, 4, nil)
	if f.n.Load() != 1 || !f.dirty.Load() {
		t.Fatal("a 429 did not track its host")
	}
	if hs := f.snapshot(); len(hs) != 1 || hs[0].Host != "a:80" || hs[0].Rate == nil || *hs[0].Rate != 2 {
		t.Fatalf("snapshot after a 429 = %+v, want a:80 at 2/s", hs)
	}
	if w := f.admitAt(flowJob(2, "a:80"), t0); w != 0 {
		t.Fatalf("first job after the cut waits %v, want 0 (its turn is now)", w)
	}
	if w := f.admitAt(flowJob(3, "a:80"), t0); w != 500*time.Millisecond {
		t.Fatalf("second job waits %v, want 500ms", w)
	}
	if w := f.admitAt(flowJob(4, "a:80"), t0); w != time.Second {
		t.Fatalf("third job waits %v, want 1s", w)
	}
	if w := f.admitAt(flowJob(9, "b:80"), t0); w != 0 {
		t.Fatalf("another host's job waits %v", w)
	}
	// Job 3 comes back a little early (clocks): it has its turn.
	if w := f.admitAt(flowJob(3, "a:80"), t0.Add(450*time.Millisecond)); w != 0 {
		t.Fatalf("a job back for its turn waits %v", w)
	}
	// An answer to a delivery begun before the cut does not cut again; a
	// later one does.
	f.observe(flowJob(5, "a:80"), busy, t0.Add(-time.Millisecond), t0.Add(time.Millisecond), 4, nil)
	if r := f.hosts["a:80"].rate; r != 2 {
		t.Fatalf("rate after an answer sent before the cut = %v, want 2", r)
	}
	f.observe(flowJob(6, "a:80"), busy, t0.Add(10*time.Millisecond), t0.Add(20*time.Millisecond), 4, nil)
	if r := f.hosts["a:80"].rate; r != 1 {
		t.Fatalf("rate after a second cut = %v, want 1", r)
	}
	// Recovery: step = 4/60 per second; from 1 to 4 takes 45 s.
	at := t0.Add(20 * time.Millisecond)
	f.observe(flowJob(7, "a:80"), ok, at, at.Add(30*time.Second), 4, nil)
	if r := f.hosts["a:80"].rate; r < 2.9 || r > 3.1 {
		t.Fatalf("rate 30 s after the cut = %v, want about 3", r)
	}
	f.observe(flowJob(8, "a:80"), ok, at, at.Add(46*time.Second), 4, nil)
	if f.n.Load() != 0 || len(f.hosts) != 0 {
		t.Fatalf("host still tracked after recovering: %+v", f.hosts)
	}
	if hs := f.snapshot(); len(hs) != 0 {
		t.Fatalf("snapshot after recovery = %+v", hs)
	}
}

// TestHostFlow_RateCapsAtQueueRate: a queue with its own rate starts the
// cut from it, and a host is never admitted below the floor.
func TestHostFlow_RateCapsAtQueueRate(t *testing.T) {
	var f hostFlow
	t0 := time.Now()
	rate := 10.0
	busy := &Result{Status: StatusFailure, Code: 503, Busy: true}
	f.observe(flowJob(1, "a:80"), busy, t0.Add(-time.Millisecond), t0, 100, &rate)
	if h := f.hosts["a:80"]; h.rate != 5 || h.ceiling != rate {
		t.Fatalf("rate = %v growing back to %v, want half the queue's 10, growing back to 10", h.rate, h.ceiling)
	}
	for i := range 10 {
		f.observe(flowJob(int64(i+2), "a:80"), busy, t0.Add(time.Duration(i+1)*time.Second), t0.Add(time.Duration(i+1)*time.Second), 1, &rate)
	}
	if r := f.hosts["a:80"].rate; r != minHostRate {
		t.Fatalf("rate after many cuts = %v, want the floor %v", r, minHostRate)
	}
}

// TestHostFlow_Breaker: 5 consecutive connection failures open the
// breaker, which holds the host's jobs until it half-opens; then one
// probe goes and the others wait; a probe that fails reopens for twice as
// long; one that is answered closes it. A success between failures resets
// the count.
func TestHostFlow_Breaker(t *testing.T) {
	var f hostFlow
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	down := &Result{Status: StatusFailure, Unreachable: true}
	ok := &Result{Status: StatusSuccess, Code: 200}
	fail := func(id int64, at time.Time) { f.observe(flowJob(id, "a:80"), down, at, at, 1, nil) }

	for i := range 4 {
		fail(int64(i+1), t0)
	}
	f.observe(flowJob(5, "a:80"), ok, t0, t0, 1, nil)
	if f.n.Load() != 0 {
		t.Fatal("a host that answered is still tracked")
	}
	for i := range breakerThreshold - 1 {
		fail(int64(i+1), t0)
	}
	if w := f.admitAt(flowJob(10, "a:80"), t0); w != 0 {
		t.Fatalf("4 failures held the host's job for %v", w)
	}
	fail(5, t0)
	if hs := f.snapshot(); len(hs) != 1 || hs[0].Breaker != store.BreakerOpen || hs[0].Failures != 5 || hs[0].OpenUntil == nil {
		t.Fatalf("snapshot after 5 failures = %+v, want open", hs)
	}
	if w := f.admitAt(flowJob(10, "a:80"), t0.Add(time.Second)); w != defaultBreakerOpen-time.Second {
		t.Fatalf("job of an open host waits %v, want %v", w, defaultBreakerOpen-time.Second)
	}
	if w := f.admitAt(flowJob(9, "b:80"), t0); w != 0 {
		t.Fatalf("another host's job waits %v", w)
	}
	// Half-open: one probe, the others wait.
	t1 := t0.Add(defaultBreakerOpen)
	if w := f.admitAt(flowJob(10, "a:80"), t1); w != 0 {
		t.Fatalf("the probe waits %v", w)
	}
	if w := f.admitAt(flowJob(11, "a:80"), t1); w != probeWait {
		t.Fatalf("a job beside the probe waits %v, want %v", w, probeWait)
	}
	if hs := f.snapshot(); hs[0].Breaker != store.BreakerHalfOpen {
		t.Fatalf("breaker = %q, want half-open", hs[0].Breaker)
	}
	// A failure of a delivery that is not the probe changes nothing.
	fail(12, t1)
	if h := f.hosts["a:80"]; h.state != store.BreakerHalfOpen || h.probe != 10 {
		t.Fatalf("after another job's failure: %+v", h)
	}
	fail(10, t1) // the probe fails: open for 60 s
	if w := f.admitAt(flowJob(11, "a:80"), t1); w != 2*defaultBreakerOpen {
		t.Fatalf("after a failed probe a job waits %v, want %v", w, 2*defaultBreakerOpen)
	}
	t2 := t1.Add(2 * defaultBreakerOpen)
	if w := f.admitAt(flowJob(11, "a:80"), t2); w != 0 {
		t.Fatalf("second probe waits %v", w)
	}
	// A probe aborted passes its turn on.
	f.observe(flowJob(11, "a:80"), nil, t2, t2, 1, nil)
	if w := f.admitAt(flowJob(13, "a:80"), t2); w != 0 {
		t.Fatalf("the probe after an aborted one waits %v", w)
	}
	// Answered, even with a failure: the host is reachable; closed.
	f.observe(flowJob(13, "a:80"), &Result{Status: StatusFailure, Code: 500}, t2, t2, 1, nil)
	if f.n.Load() != 0 {
		t.Fatalf("host still tracked after its probe was answered: %+v", f.hosts["a:80"])
	}
	// The delay doubles up to its cap.
	var delay time.Duration
	for range 10 {
		f.hosts = map[string]*hostState{"a:80": {state: store.BreakerHalfOpen, probe: 1, delay: delay}}
		f.n.Store(1)
		fail(1, t0)
		delay = f.hosts["a:80"].delay
	}
	if delay != 20*defaultBreakerOpen {
		t.Fatalf("open delay after many failed probes = %v, want %v", delay, 20*defaultBreakerOpen)
	}
}

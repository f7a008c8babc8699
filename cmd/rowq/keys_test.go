package main_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/testworker"
)

// keyedJobs enqueues perKey jobs for each of keys keys through p, in one
// POST /jobs, the keys taking turns: job n of key k carries the payload
// keyBody(k, n), and extra's fields.
func keyedJobs(t *testing.T, p *proc, w *testworker.Worker, keys, perKey int, extra map[string]any) {
	t.Helper()
	var jobs []map[string]any
	for n := range perKey {
		for k := range keys {
			job := map[string]any{"category": "cat", "url": w.URL, "payload": keyBody(k, n), "concurrency_key": fmt.Sprintf("k%d", k)}
			for f, v := range extra {
				job[f] = v
			}
			jobs = append(jobs, job)
		}
	}
	p.mustCall(t, "POST", "/jobs", map[string]any{"jobs": jobs})
}

func keyBody(k, n int) string { return fmt.Sprintf("k%d-job-%d", k, n) }

// keyKill kills victim from inside the worker at the first delivery for
// which kill(distinct, open) holds (under the worker's lock, so at that
// very delivery), and returns when.
func keyKill(t *testing.T, w *testworker.Worker, victim *proc, kill func(distinct, open int) bool) time.Time {
	t.Helper()
	killed := make(chan time.Time, 1)
	done := false // guarded by the worker's lock, which the hook runs under
	w.SetOnDelivery(func(distinct, open int) {
		if !done && kill(distinct, open) {
			done = true
			at := time.Now()
			victim.cmd.Process.Kill()
			killed <- at
		}
	})
	var at time.Time
	select {
	case at = <-killed:
	case <-time.After(30 * time.Second):
		t.Fatalf("no kill within 30s: %d jobs delivered", w.Distinct())
	}
	w.SetOnDelivery(nil)
	if code := victim.wait(t, 5*time.Second); code != -1 {
		t.Fatalf("%s exit code = %d, want -1 (killed)", victim.name, code)
	}
	return at
}

// everyKeyedJobAnswered waits until every job of keyedJobs was answered
// success, within bound.
func everyKeyedJobAnswered(t *testing.T, w *testworker.Worker, keys, perKey int, bound time.Duration) {
	t.Helper()
	testworker.WaitFor(t, bound, "every job answered", func() bool {
		for k := range keys {
			for n := range perKey {
				if !answered(w.Of(keyBody(k, n))) {
					return false
				}
			}
		}
		return true
	})
	time.Sleep(300 * time.Millisecond) // room for a stray delivery to show
}

// checkRedeliveries checks that each job was delivered at most twice, and
// twice only by the killed node before the kill, then by the survivor: a
// job the killed node held (in delivery, or answered but its success not
// yet committed).
func checkRedeliveries(t *testing.T, w *testworker.Worker, keys, perKey int, killAt time.Time, victimID, survivorID string) (twice int) {
	t.Helper()
	for k := range keys {
		for n := range perKey {
			body := keyBody(k, n)
			ds := w.Of(body)
			for _, d := range ds {
				switch {
				case d.By == victimID && d.At.Sub(killAt) > time.Second: // sent before the kill, it may arrive a moment after
					t.Errorf("%s delivered by the killed %s %v after the kill", body, victimID, d.At.Sub(killAt))
				case d.By == survivorID && d.At.Before(killAt):
					t.Errorf("%s delivered by %s before the kill, while %s led", body, survivorID, victimID)
				}
			}
			switch {
			case len(ds) == 2 && (ds[0].By != victimID || ds[1].By != survivorID):
				t.Errorf("%s delivered by %s, then %s; want by the killed node, then the survivor", body, ds[0].By, ds[1].By)
			case len(ds) == 2:
				twice++
			case len(ds) > 2:
				t.Errorf("%s delivered %d times", body, len(ds))
			}
		}
	}
	return twice
}

// peakAtOnce returns the most deliveries of ds that the worker had in hand
// at the same moment (from arrival to its answer, or until the sender went
// away).
func peakAtOnce(ds []testworker.Delivery) int {
	peak := 0
	for _, d := range ds {
		n := 0
		for _, e := range ds {
			if !e.At.After(d.At) && (e.Ended.IsZero() || e.Ended.After(d.At)) {
				n++
			}
		}
		peak = max(peak, n)
	}
	return peak
}

// TestServe_KillNineKeepsKeyLimits kills (SIGKILL) the node leading a
// queue while every one of its concurrency keys has its limit of jobs in
// delivery, the rest parked, and checks, from the worker's side, that no
// key ever had more than its limit of deliveries in hand at once, before,
// across or after the takeover, and that every job was delivered. The
// killed node's deliveries end at the worker when its connections close
// with it, before the survivor, which learns of the death from the
// database, delivers anything. At least once allows a job to be delivered
// again by the survivor when the killed node held it: in delivery, or
// answered but its success not yet committed (a key without order hands
// its slot on at the worker's answer; docs/flow-control.md).
func TestServe_KillNineKeepsKeyLimits(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		const (
			keys, limit, perKey = 4, 2, 12
			maxWorkers          = 20 // above keys × limit: the keys bind
		)
		w := testworker.New(t, func(string, int) (int, string, time.Duration) {
			return 200, `{"status":"success"}`, 150 * time.Millisecond
		})
		// A TTL and grab lease far beyond the test's bounds: only the
		// session explains a takeover within them.
		victim, survivor, victimID, survivorID := twoNodes(t, dbtest.URL(t, dialect), 30*time.Second, 60*time.Second, maxWorkers)
		keyedJobs(t, survivor, w, keys, perKey, map[string]any{"concurrency_limit": limit})
		// Every key full, a quarter of the jobs delivered.
		killAt := keyKill(t, w, victim, func(distinct, open int) bool { return distinct >= keys*perKey/4 && open >= keys*limit })
		everyKeyedJobAnswered(t, w, keys, perKey, 20*time.Second)

		twice := checkRedeliveries(t, w, keys, perKey, killAt, victimID, survivorID)
		for k := range keys {
			var ds []testworker.Delivery
			for n := range perKey {
				ds = append(ds, w.Of(keyBody(k, n))...)
			}
			if peak := peakAtOnce(ds); peak > limit {
				t.Errorf("key k%d: %d deliveries at once, want at most its limit %d", k, peak, limit)
			}
			var after []testworker.Delivery
			for _, d := range ds {
				if d.At.After(killAt) {
					after = append(after, d)
				}
			}
			if len(after) == 0 {
				t.Errorf("key k%d: nothing delivered after the kill: the takeover was not tested", k)
			}
		}
		// A job is in flight from its delivery until its success commits:
		// max_workers in delivery, and as many answered whose slot went on
		// to the key's next job before the commit.
		if twice > 2*maxWorkers {
			t.Errorf("%d jobs delivered again, want at most twice max_workers = %d", twice, 2*maxWorkers)
		}
		t.Logf("killed %s with every key at its limit; %d jobs delivered again by %s", victimID, twice, survivorID)
	})
}

// TestServe_KillNineKeepsKeyOrder kills (SIGKILL) the node leading a queue
// of ordered keys at the very moment a job arrives at the worker whose
// predecessor has just succeeded: the worst moment for order, for the
// predecessor's success must be committed before its successor goes. It
// checks, per key, from the worker's side: one delivery at a time, each
// job delivered only after its predecessor was answered success, and
// never a job after its successor, before, across or after the takeover;
// and every job delivered. At least once allows the killed node's job in
// delivery (the successor that arrived at the kill) to be delivered again
// by the survivor, but never a job once its successor has been delivered.
func TestServe_KillNineKeepsKeyOrder(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		const (
			keys, perKey = 4, 8
			maxWorkers   = 10
		)
		w := testworker.New(t, func(string, int) (int, string, time.Duration) {
			return 200, `{"status":"success"}`, 100 * time.Millisecond
		})
		victim, survivor, victimID, survivorID := twoNodes(t, dbtest.URL(t, dialect), 30*time.Second, 60*time.Second, maxWorkers)
		keyedJobs(t, survivor, w, keys, perKey, map[string]any{"ordered": true})
		// The keys go one job at a time, so a delivery of a new job past
		// the first of each key is a successor's.
		killAt := keyKill(t, w, victim, func(distinct, _ int) bool { return distinct > 3*keys })
		everyKeyedJobAnswered(t, w, keys, perKey, 20*time.Second)

		twice := checkRedeliveries(t, w, keys, perKey, killAt, victimID, survivorID)
		for k := range keys {
			type arrival struct {
				n int
				d testworker.Delivery
			}
			var as []arrival
			for n := range perKey {
				for _, d := range w.Of(keyBody(k, n)) {
					as = append(as, arrival{n, d})
				}
			}
			slices.SortFunc(as, func(a, b arrival) int { return a.d.At.Compare(b.d.At) })
			var ds []testworker.Delivery
			for _, a := range as {
				ds = append(ds, a.d)
			}
			if peak := peakAtOnce(ds); peak > 1 {
				t.Errorf("key k%d: %d deliveries at once, want one at a time", k, peak)
			}
			if len(as) > 0 && as[0].n != 0 {
				t.Errorf("key k%d: job %d delivered first, want job 0", k, as[0].n)
			}
			for i := 1; i < len(as); i++ {
				prev, cur := as[i-1], as[i]
				switch {
				case cur.n < prev.n:
					t.Errorf("key k%d: job %d delivered after its successor, job %d (%s then %s)", k, cur.n, prev.n, prev.d.By, cur.d.By)
				case cur.n > prev.n && (prev.n != cur.n-1 || prev.d.AnsweredAt.IsZero()):
					t.Errorf("key k%d: job %d delivered after job %d's delivery, which was not answered success", k, cur.n, prev.n)
				}
			}
		}
		if twice > keys {
			t.Errorf("%d jobs delivered again, want at most one per key (its job in flight at the kill)", twice)
		}
		t.Logf("killed %s at a successor's arrival; %d jobs delivered again by %s", victimID, twice, survivorID)
	})
}

package dispatch

import (
	"cmp"
	"context"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rowq/rowq/internal/store"
)

// Flow control per worker host (the host:port of a job's URL), kept by the
// queue's runner in memory (docs/flow-control.md):
//
//   - A worker that answers 429 or 503 says it is overloaded. With a
//     Retry-After (seconds or an HTTP date, at most maxWorkerDefer) the job
//     is deferred to that time without spending a retry (JobsDefer with
//     Count), up to maxDeferrals times, after which such an answer is an
//     ordinary failure. Without Retry-After it is an ordinary failure: the
//     worker did not say when to come back, and a retry bounds the loop.
//     Either way the host's dispatch rate is cut by half (multiplicative
//     decrease), at most once per round of deliveries (an answer to a
//     delivery that began before the last cut does not cut again), and
//     grows back by a fixed step per second while its deliveries succeed
//     (additive increase) until it reaches the queue's own
//     max_dispatches_per_second, or, on an unlimited queue, the rate the
//     host had before its first cut; then the host is let go.
//   - A circuit breaker opens after breakerThreshold consecutive connection
//     failures or timeouts of the host, holds its jobs for Config.BreakerOpen
//     (30 s), then half-opens: exactly one job goes as a probe. An answer
//     to it (any HTTP status: the host is reachable) closes the breaker; no
//     answer opens it again for twice as long, at most 20 times the first.
//
// A job that its host may not take now is held back: its worker slot
// delivers the next job instead, and the job goes back to waiting in the
// database, due when its host can take it (JobsDefer without Count, in
// batches). It spends no retry and holds no slot; other hosts' jobs keep
// flowing. A slowed host's jobs are given turns one rate interval apart
// (a GCRA schedule whose turns are remembered by job id, up to maxHold
// ahead), so that they come back one at a time, not all together.
//
// The state lives in the leader's memory: a new leader starts with every
// host closed and unlimited. The leader records the hosts it slows or
// holds in the database once a second (store.WorkerHostStore) for the
// API, the dashboard and /metrics. A queue none of whose hosts is in
// trouble pays one atomic load per delivery.

const (
	// maxWorkerDefer bounds a Retry-After.
	maxWorkerDefer = time.Hour
	// maxDeferrals bounds the deferrals a job gets without spending a
	// retry: a worker that answers 429 forever fails the job in the end.
	maxDeferrals = 20
	// breakerThreshold consecutive connection failures or timeouts open a
	// host's breaker: few enough that a dead host costs little, enough
	// that a single flaky connection or slow job does not hold a host.
	breakerThreshold = 5
	// defaultBreakerOpen is how long a breaker first stays open (then
	// doubled on each failed probe, up to 20 times as long): long enough
	// for a restart or a failover, short enough that a recovered host
	// waits little.
	defaultBreakerOpen = 30 * time.Second
	// probeWait is how long the jobs of a half-open host wait while its
	// probe runs: a probe that succeeds lets them go within it.
	probeWait = 5 * time.Second
	// minHostRate is the floor of a slowed host's rate: one job in 5 s.
	minHostRate = 0.2
	// recoverTime is how long a host's rate takes to grow from nothing
	// back to its ceiling while deliveries succeed: 30 s from a halving.
	recoverTime = 60 * time.Second
	// maxHold bounds how far ahead a slowed host's jobs are given turns;
	// one whose turn is further is held that long and then tries again.
	maxHold = time.Minute
	// maxTurns bounds the turns a host remembers.
	maxTurns = 100_000
)

// hostFlow is a runner's flow control state: the worker hosts in trouble.
type hostFlow struct {
	// n counts the hosts in the map: while 0 (no host in trouble),
	// admission and bookkeeping return at once.
	n     atomic.Int32
	dirty atomic.Bool // changed since last recorded in the database
	// anyDirty is the dispatcher's: set with dirty, so that a leadership
	// cycle in which no host changed walks no runner (saveHosts).
	anyDirty *atomic.Bool
	// open is Config.BreakerOpen (0: defaultBreakerOpen).
	open  time.Duration
	mu    sync.Mutex
	hosts map[string]*hostState
}

// hostState is one worker host in trouble.
type hostState struct {
	// rate (jobs/s) is the host's slowed rate; 0 when not slowed.
	// ceiling is what it grows back to, step how fast (per second).
	rate, ceiling, step float64
	// tat is the host's next free turn (GCRA's theoretical arrival time);
	// turns holds the jobs given a turn ahead, which go when they come
	// back.
	tat   time.Time
	turns map[int64]struct{}
	// cut is when the rate was last cut, grown when it last grew.
	cut, grown time.Time

	fails int    // consecutive connection failures and timeouts
	state string // store.BreakerClosed, BreakerOpen or BreakerHalfOpen
	until time.Time
	delay time.Duration // how long the breaker was last opened for
	probe int64         // the job id of a half-open host's probe; 0: none yet
}

// hostKey is the host:port of a worker URL, the port from the scheme when
// the URL has none.
func hostKey(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	port := u.Port()
	if port == "" {
		port = "80"
		if strings.EqualFold(u.Scheme, "https") {
			port = "443"
		}
	}
	return net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// admit reports how long job j must be held back before its host may take
// it: 0 to deliver it now.
func (f *hostFlow) admit(j *store.Job) time.Duration {
	if f.n.Load() == 0 {
		return 0
	}
	return f.admitAt(j, time.Now())
}

// admitAt is admit at time now.
func (f *hostFlow) admitAt(j *store.Job, now time.Time) time.Duration {
	key := hostKey(j.URL)
	f.mu.Lock()
	defer f.mu.Unlock()
	h := f.hosts[key]
	if h == nil {
		return 0
	}
	switch h.state {
	case store.BreakerOpen:
		if now.Before(h.until) {
			return h.until.Sub(now)
		}
		h.state = store.BreakerHalfOpen
		f.changed()
		fallthrough
	case store.BreakerHalfOpen:
		if h.probe != 0 && h.probe != j.ID {
			return min(h.delay, probeWait)
		}
		h.probe = j.ID // the probe goes whatever the rate
		return 0
	}
	if h.rate == 0 {
		return 0
	}
	if _, ok := h.turns[j.ID]; ok {
		delete(h.turns, j.ID)
		return 0
	}
	interval := time.Duration(float64(time.Second) / h.rate)
	if !h.tat.After(now) {
		h.tat = now.Add(interval)
		return 0
	}
	wait := h.tat.Sub(now)
	if wait > maxHold {
		return maxHold
	}
	h.tat = h.tat.Add(interval)
	if h.turns == nil || len(h.turns) >= maxTurns {
		h.turns = map[int64]struct{}{}
	}
	h.turns[j.ID] = struct{}{}
	return wait
}

// observe records the outcome of a delivery of j to its host, begun at
// began and answered (or not) at now; res is nil when the delivery was
// aborted and says nothing of the host. inflight and queueRate (nil:
// unlimited) estimate the host's rate when it is first cut.
func (f *hostFlow) observe(j *store.Job, res *Result, began, now time.Time, inflight int64, queueRate *float64) {
	trouble := res != nil && (res.Busy || res.Unreachable)
	if f.n.Load() == 0 && !trouble {
		return
	}
	key := hostKey(j.URL)
	f.mu.Lock()
	defer f.mu.Unlock()
	h := f.hosts[key]
	if h == nil {
		if !trouble {
			return
		}
		h = &hostState{state: store.BreakerClosed}
		if f.hosts == nil {
			f.hosts = map[string]*hostState{}
		}
		f.hosts[key] = h
		f.n.Add(1)
	}
	probe := h.probe == j.ID && h.state == store.BreakerHalfOpen
	if probe {
		h.probe = 0
	}
	switch {
	case res == nil || res.Code == 0 && !res.Unreachable:
		// Aborted, or refused before a request went: nothing learnt; a
		// probe's turn passes to the next job.
	case res.Unreachable:
		h.fails++
		if probe || h.state == store.BreakerClosed && h.fails >= breakerThreshold {
			first := cmp.Or(f.open, defaultBreakerOpen)
			h.delay = min(max(2*h.delay, first), 20*first)
			if h.state == store.BreakerClosed {
				h.delay = first
			}
			h.state, h.until = store.BreakerOpen, now.Add(h.delay)
		}
	default: // the host answered
		h.fails = 0
		if probe {
			h.state, h.delay = store.BreakerClosed, 0
		}
		if res.Busy {
			h.slow(began, now, inflight, queueRate)
		} else if res.Status == StatusSuccess || res.Status == StatusAccepted {
			h.recover(now)
		}
	}
	f.changed()
	if h.state == store.BreakerClosed && h.fails == 0 && h.rate == 0 {
		delete(f.hosts, key)
		f.n.Add(-1)
	}
}

// slow cuts the host's rate by half, unless the delivery that answered
// 429/503 began before the last cut. A host not slowed yet starts from an
// estimate of its rate: the queue's deliveries in flight over this
// delivery's time (Little's law; an upper bound, as they are not all the
// host's), at most the queue's own rate; it grows back to the queue's own
// rate, or on an unlimited queue to that estimate.
func (h *hostState) slow(began, now time.Time, inflight int64, queueRate *float64) {
	if h.rate > 0 && began.Before(h.cut) {
		return
	}
	if h.rate == 0 {
		est := float64(max(inflight, 1)) / max(now.Sub(began), time.Millisecond).Seconds()
		h.ceiling = est
		if queueRate != nil {
			est, h.ceiling = min(est, *queueRate), *queueRate
		}
		h.rate, h.tat = est, now
		h.step = h.ceiling / recoverTime.Seconds()
	}
	h.rate = max(minHostRate, h.rate/2)
	h.cut, h.grown = now, now
}

// recover grows a slowed host's rate by step per second since it last
// grew; at its ceiling the host is no longer slowed.
func (h *hostState) recover(now time.Time) {
	if h.rate == 0 {
		return
	}
	h.rate += h.step * now.Sub(h.grown).Seconds()
	h.grown = now
	if h.rate >= h.ceiling {
		h.rate, h.turns = 0, nil
	}
}

// snapshot returns the hosts slowed down or with a breaker not closed,
// as recorded for the queue.
func (f *hostFlow) snapshot() []*store.WorkerHost {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*store.WorkerHost
	for key, h := range f.hosts {
		if h.rate == 0 && h.state == store.BreakerClosed {
			continue
		}
		w := &store.WorkerHost{Host: key, Breaker: h.state, Failures: h.fails}
		if h.rate > 0 {
			r := h.rate
			w.Rate = &r
		}
		if h.state == store.BreakerOpen {
			t := h.until.UTC()
			w.OpenUntil = &t
		}
		out = append(out, w)
	}
	return out
}

// busyAnswer marks res as the answer of a worker that is overloaded: 429
// or 503, with the delay its Retry-After asks for, if it has one.
func busyAnswer(res *Result, code int, header http.Header) {
	if code != http.StatusTooManyRequests && code != http.StatusServiceUnavailable {
		return
	}
	res.Busy = true
	res.Defer = parseRetryAfter(header.Get("Retry-After"), time.Now())
}

// parseRetryAfter reads a Retry-After: delta-seconds or an HTTP date (a
// date past is 0), at most maxWorkerDefer; nil when absent or unreadable.
func parseRetryAfter(v string, now time.Time) *time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return nil
	}
	var d time.Duration
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 0 {
			return nil
		}
		d = time.Duration(min(n, int64(maxWorkerDefer/time.Second))) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = max(t.Sub(now), 0)
	} else {
		return nil
	}
	d = min(d, maxWorkerDefer)
	return &d
}

// hold puts j back to waiting for wait, its host not taking it now, in
// the next batch of held jobs; its worker slot goes on with the next job.
func (r *runner) hold(j *store.Job, wait time.Duration) {
	r.logger().Debug("job held back for its worker host", "job_id", j.ID, "wait", wait)
	err := r.d.retryStore(r.logger, "hold job back", func(ctx context.Context) error {
		_, err := r.d.holds.Do(ctx, store.JobDelay{ID: j.ID, Delay: wait})
		return err
	})
	if err != nil && r.d.deliverCtx.Err() == nil {
		r.logger().Warn("job held back was taken from this node before it was put back; it will be delivered again", "job_id", j.ID, "err", err)
	}
	r.later() // due again after wait: the prober learns when
}

// saveHosts records, for each queue whose flow control changed since, the
// hosts its runner slows down or holds back.
func (d *Dispatcher) saveHosts() {
	if !d.hostsDirty.Swap(false) {
		return
	}
	d.mu.Lock()
	var changed []*runner
	for _, r := range d.runners {
		if r.flow.dirty.Swap(false) {
			changed = append(changed, r)
		}
	}
	d.mu.Unlock()
	for _, r := range changed {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := d.cfg.Store.WorkerHostsSet(ctx, &store.WorkerHostsSetParams{Queue: r.name, Node: d.cfg.Node, Hosts: r.flow.snapshot()})
		cancel()
		if err != nil {
			r.flow.changed() // the next cycle tries again
			r.logger().Debug("record worker hosts failed", "err", err)
		}
	}
}

// changed marks f as to be recorded at the next leadership cycle.
func (f *hostFlow) changed() {
	f.dirty.Store(true)
	if f.anyDirty != nil {
		f.anyDirty.Store(true)
	}
}

// Package bench drives a rowq server as clients would and measures it: it
// runs its own loopback worker, enqueues jobs over HTTP from concurrent
// clients, and reports enqueue and end-to-end rates, enqueue→worker latency
// percentiles, and the jobs lost or delivered twice.
package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Options configures a run.
type Options struct {
	Server     string // base URL of the rowq API, e.g. http://127.0.0.1:8080
	Jobs       int
	Clients    int
	Queue      string
	MaxWorkers int
	// Rate, when > 0, offers this many jobs per second in total (latency
	// mode) instead of enqueueing as fast as the clients can.
	Rate float64
	// Settle is how long to wait after the last delivery for duplicates.
	Settle time.Duration
	// Timeout bounds the wait for all deliveries.
	Timeout time.Duration
}

// Result is what a run measured.
type Result struct {
	Jobs          int
	Enqueued      int
	EnqueueErrors int
	Delivered     int // distinct jobs delivered
	Duplicates    int // deliveries beyond the first
	Lost          int // enqueued but never delivered
	EnqueueTime   time.Duration
	EndToEndTime  time.Duration // first enqueue to last delivery
	P50, P95, P99 time.Duration // enqueue request start → worker receives
}

// EnqueueRate is jobs accepted per second.
func (r *Result) EnqueueRate() float64 { return float64(r.Enqueued) / r.EnqueueTime.Seconds() }

// EndToEndRate is jobs delivered per second from first enqueue to last delivery.
func (r *Result) EndToEndRate() float64 { return float64(r.Delivered) / r.EndToEndTime.Seconds() }

func (r *Result) String() string {
	return fmt.Sprintf("jobs=%d enqueued=%d enqueue_errors=%d delivered=%d lost=%d duplicates=%d\n"+
		"enqueue: %.0f jobs/s (%v)\nend to end: %.0f jobs/s (%v)\nlatency enqueue→worker: p50=%v p95=%v p99=%v",
		r.Jobs, r.Enqueued, r.EnqueueErrors, r.Delivered, r.Lost, r.Duplicates,
		r.EnqueueRate(), r.EnqueueTime.Round(time.Millisecond), r.EndToEndRate(), r.EndToEndTime.Round(time.Millisecond),
		r.P50.Round(10*time.Microsecond), r.P95.Round(10*time.Microsecond), r.P99.Round(10*time.Microsecond))
}

// worker is the loopback worker; payloads are {"seq": n}.
type worker struct {
	sent      []atomic.Int64 // enqueue start, unix ns, by seq
	accepted  []atomic.Bool  // the server answered 200
	count     []atomic.Int32 // deliveries by seq
	latency   []atomic.Int64 // first delivery latency, ns
	delivered atomic.Int64
	last      atomic.Int64 // unix ns of the latest first delivery
	done      chan struct{}
	doneOnce  sync.Once
}

var success = []byte(`{"status":"success"}`)

func (w *worker) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	now := time.Now().UnixNano()
	var p struct {
		Seq int `json:"seq"`
	}
	body, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(body, &p); err != nil || p.Seq < 0 || p.Seq >= len(w.count) {
		rw.Write([]byte(`{"status":"permanent-failure","message":"bad bench payload"}`))
		return
	}
	if w.count[p.Seq].Add(1) == 1 {
		w.latency[p.Seq].Store(now - w.sent[p.Seq].Load())
		w.last.Store(now)
		if int(w.delivered.Add(1)) == len(w.count) {
			w.doneOnce.Do(func() { close(w.done) })
		}
	}
	rw.Write(success)
}

// Run performs one benchmark run against a running server.
func Run(ctx context.Context, o Options) (*Result, error) {
	if o.Jobs <= 0 || o.Clients <= 0 {
		return nil, errors.New("bench: jobs and clients must be positive")
	}
	w := &worker{
		sent: make([]atomic.Int64, o.Jobs), accepted: make([]atomic.Bool, o.Jobs), count: make([]atomic.Int32, o.Jobs),
		latency: make([]atomic.Int64, o.Jobs), done: make(chan struct{}),
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	ws := &http.Server{Handler: w}
	go ws.Serve(ln)
	defer ws.Close()
	workerURL := "http://" + ln.Addr().String() + "/work"

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: o.Clients * 2, MaxIdleConns: o.Clients * 2}}
	api := func(method, path string, body any) error {
		b, _ := json.Marshal(body)
		req, err := http.NewRequestWithContext(ctx, method, o.Server+path, bytes.NewReader(b))
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, out)
		}
		return nil
	}
	category := "bench-" + o.Queue
	if err := api("PUT", "/queue/"+o.Queue, map[string]any{"max_workers": o.MaxWorkers}); err != nil {
		return nil, err
	}
	if err := api("PUT", "/routing/"+category, map[string]any{"queue_name": o.Queue}); err != nil {
		return nil, err
	}

	// A new queue is claimed by a node at its next refresh (1 s by
	// default); measure dispatch, not that wait.
	for deadline := time.Now().Add(30 * time.Second); api("GET", "/queue/"+o.Queue+"/node", nil) != nil; {
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no node took queue %s within 30s", o.Queue)
		}
		time.Sleep(20 * time.Millisecond)
	}

	res := &Result{Jobs: o.Jobs}
	var (
		next     atomic.Int64
		enqueued atomic.Int64
		failed   atomic.Int64
		wg       sync.WaitGroup
	)
	var tick <-chan time.Time
	if o.Rate > 0 {
		t := time.NewTicker(time.Duration(float64(time.Second) / o.Rate))
		defer t.Stop()
		tick = t.C
	}
	start := time.Now()
	for range o.Clients {
		wg.Go(func() {
			body := map[string]any{"url": workerURL, "payload": map[string]int{"seq": 0}}
			for {
				seq := int(next.Add(1) - 1)
				if seq >= o.Jobs {
					return
				}
				if tick != nil {
					select {
					case <-tick:
					case <-ctx.Done():
						return
					}
				}
				body["payload"] = map[string]int{"seq": seq}
				w.sent[seq].Store(time.Now().UnixNano())
				if err := api("POST", "/job/"+category, body); err != nil {
					failed.Add(1)
					continue
				}
				w.accepted[seq].Store(true)
				enqueued.Add(1)
			}
		})
	}
	wg.Wait()
	res.EnqueueTime = time.Since(start)
	res.Enqueued, res.EnqueueErrors = int(enqueued.Load()), int(failed.Load())

	timeout := o.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Minute
	}
	select {
	case <-w.done:
	case <-time.After(timeout):
	case <-ctx.Done():
	}
	if last := w.last.Load(); last > 0 {
		res.EndToEndTime = time.Unix(0, last).Sub(start)
	}
	time.Sleep(o.Settle)

	lat := make([]time.Duration, 0, o.Jobs)
	for i := range o.Jobs {
		switch n := int(w.count[i].Load()); {
		case n == 0 && w.accepted[i].Load():
			res.Lost++
		case n > 0:
			res.Delivered++
			res.Duplicates += n - 1
			lat = append(lat, time.Duration(w.latency[i].Load()))
		}
	}
	slices.Sort(lat)
	res.P50, res.P95, res.P99 = pct(lat, 50), pct(lat, 95), pct(lat, 99)
	return res, nil
}

func pct(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, len(sorted)*p/100)]
}

// Label describes a run's settings for reports.
func (o Options) Label() string {
	mode := "max rate"
	if o.Rate > 0 {
		mode = strconv.FormatFloat(o.Rate, 'f', 0, 64) + " jobs/s offered"
	}
	return fmt.Sprintf("%d jobs, %d clients, max_workers %d, %s", o.Jobs, o.Clients, o.MaxWorkers, mode)
}

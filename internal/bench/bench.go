// Package bench drives a rowq server as clients would and measures it: it
// runs its own loopback worker (or, for a pull queue, its own pullers),
// enqueues jobs over HTTP from concurrent clients (one job per request,
// POST /jobs batches, or a fixed offered rate), or pre-fills a backlog and
// lets it drain, and reports enqueue and end-to-end rates, enqueue→worker
// latency percentiles, and the jobs lost or delivered twice.
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
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/backend"
	"github.com/rowq/rowq/rowqtype"
)

// Options configures a run.
type Options struct {
	Server     string // base URL of the rowq API, e.g. http://127.0.0.1:8080
	Token      string // API token sent with every request ("" for none)
	Jobs       int
	Clients    int
	Queue      string
	MaxWorkers int
	// KeepFinished, when > 0, is the queue's keep_finished (seconds): the
	// run keeps every job's history (docs/lifecycle.md).
	KeepFinished int
	// Rate, when > 0, offers this many jobs per second in total (latency
	// mode) instead of enqueueing as fast as the clients can.
	Rate float64
	// Batch, when > 0, enqueues with POST /jobs, this many jobs a request.
	Batch int
	// Backlog, when true, writes the Jobs straight into the database
	// (DatabaseURL) for a queue that does not exist yet, so that no node
	// leads it, then creates the queue and measures how fast the backlog
	// drains. Clients, Rate and Batch are unused.
	Backlog     bool
	DatabaseURL string
	// Outbox, when true, writes the jobs as rows of the transactional
	// outbox (DatabaseURL), from Clients concurrent transactions of
	// OutboxRows rows each (at Rate rows a second in all when Rate > 0),
	// and measures the rows moved per second and the latency from each
	// transaction's commit to the worker.
	Outbox     bool
	OutboxRows int
	// Pull, when true, makes the queue a pull queue and works it with
	// Pullers workers, each leasing up to PullMax jobs a request and
	// completing each; the jobs are enqueued as in the default mode.
	Pull    bool
	Pullers int
	PullMax int
	// Keys, when > 0, spreads the jobs over this many concurrency keys
	// (job seq has key "k<seq mod Keys>"), each with KeyLimit. HotKey, when
	// > 0, puts this fraction of the jobs, evenly spread, on one key
	// ("hot", KeyLimit) and the others on keys of their own, or over Keys
	// keys when it is given too (docs/flow-control.md).
	Keys     int
	KeyLimit int
	HotKey   float64
	// Ordered makes the keys ordered (KeyLimit must be 1).
	Ordered bool
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
	EndToEndTime  time.Duration // first enqueue (backlog: queue created) to last delivery
	P50, P95, P99 time.Duration // enqueue request start (backlog: queue created) → worker receives
	// FillTime is how long writing the backlog took (backlog mode).
	FillTime time.Duration
	// MoveTime is the time from the first outbox commit until the outbox
	// was empty after the last (outbox mode).
	MoveTime time.Duration
	// PeakRSS is the bench process's peak resident set size (VmHWM) in
	// bytes: with the node in process it covers the node, the worker and
	// the clients. 0 where /proc is not available.
	PeakRSS int64
	// ColdJobs and ColdTime are, with Options.HotKey, the jobs not on the
	// hot key delivered, and the time from the start to the last of them.
	ColdJobs int
	ColdTime time.Duration
}

// ColdRate is the rate of the jobs not on the hot key.
func (r *Result) ColdRate() float64 { return float64(r.ColdJobs) / r.ColdTime.Seconds() }

// EnqueueRate is jobs accepted per second.
func (r *Result) EnqueueRate() float64 { return float64(r.Enqueued) / r.EnqueueTime.Seconds() }

// EndToEndRate is jobs delivered per second from first enqueue to last
// delivery; in backlog mode, the drain rate.
func (r *Result) EndToEndRate() float64 { return float64(r.Delivered) / r.EndToEndTime.Seconds() }

func (r *Result) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "jobs=%d enqueued=%d enqueue_errors=%d delivered=%d lost=%d duplicates=%d\n",
		r.Jobs, r.Enqueued, r.EnqueueErrors, r.Delivered, r.Lost, r.Duplicates)
	if r.MoveTime > 0 {
		fmt.Fprintf(&b, "outbox: committed %.0f rows/s (%v), moved %.0f rows/s (%v); end to end %.0f jobs/s\n",
			r.EnqueueRate(), r.EnqueueTime.Round(time.Millisecond), float64(r.Enqueued)/r.MoveTime.Seconds(),
			r.MoveTime.Round(time.Millisecond), r.EndToEndRate())
	} else if r.FillTime > 0 {
		fmt.Fprintf(&b, "backlog: written in %v, drained at %.0f jobs/s (%v)\n",
			r.FillTime.Round(time.Millisecond), r.EndToEndRate(), r.EndToEndTime.Round(time.Millisecond))
	} else {
		fmt.Fprintf(&b, "enqueue: %.0f jobs/s (%v)\nend to end: %.0f jobs/s (%v)\n",
			r.EnqueueRate(), r.EnqueueTime.Round(time.Millisecond), r.EndToEndRate(), r.EndToEndTime.Round(time.Millisecond))
	}
	what := "enqueue"
	if r.MoveTime > 0 {
		what = "commit"
	}
	if r.ColdTime > 0 {
		fmt.Fprintf(&b, "cold jobs (not on the hot key): %d delivered at %.0f jobs/s (%v)\n", r.ColdJobs, r.ColdRate(), r.ColdTime.Round(time.Millisecond))
	}
	fmt.Fprintf(&b, "latency %s→worker: p50=%v p95=%v p99=%v", what,
		r.P50.Round(10*time.Microsecond), r.P95.Round(10*time.Microsecond), r.P99.Round(10*time.Microsecond))
	if r.PeakRSS > 0 {
		fmt.Fprintf(&b, "\npeak RSS of the bench process: %d MiB", r.PeakRSS>>20)
	}
	return b.String()
}

// worker is the loopback worker; payloads are {"seq": n}.
type worker struct {
	sent      []atomic.Int64 // enqueue start, unix ns, by seq
	accepted  []atomic.Bool  // the server answered 200
	count     []atomic.Int32 // deliveries by seq
	latency   []atomic.Int64 // first delivery latency, ns
	at        []atomic.Int64 // first delivery, unix ns
	delivered atomic.Int64
	last      atomic.Int64 // unix ns of the latest first delivery
	done      chan struct{}
	doneOnce  sync.Once
}

var success = []byte(`{"status":"success"}`)

func (w *worker) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	now := time.Now().UnixNano()
	body, _ := io.ReadAll(r.Body)
	if !w.receive(body, now) {
		rw.Write([]byte(`{"status":"permanent-failure","message":"bad bench payload"}`))
		return
	}
	rw.Write(success)
}

// receive counts the delivery at now of the job whose payload is body,
// and reports whether the payload was the bench's.
func (w *worker) receive(body []byte, now int64) bool {
	var p struct {
		Seq int `json:"seq"`
	}
	if err := json.Unmarshal(body, &p); err != nil || p.Seq < 0 || p.Seq >= len(w.count) {
		return false
	}
	if w.count[p.Seq].Add(1) == 1 {
		w.latency[p.Seq].Store(now - w.sent[p.Seq].Load())
		w.at[p.Seq].Store(now)
		w.last.Store(now)
		if int(w.delivered.Add(1)) == len(w.count) {
			w.doneOnce.Do(func() { close(w.done) })
		}
	}
	return true
}

// client is the bench's HTTP client of the rowq API.
type client struct {
	http   *http.Client
	server string
	token  string
}

// call sends body (already JSON, or nil) and decodes a 200 answer into out
// (when not nil).
func (c *client) call(ctx context.Context, method, path string, body []byte, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, c.server+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, raw)
	}
	if out != nil {
		return json.Unmarshal(raw, out)
	}
	return nil
}

func (c *client) json(ctx context.Context, method, path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return c.call(ctx, method, path, b, nil)
}

// Run performs one benchmark run against a running server.
func Run(ctx context.Context, o Options) (*Result, error) {
	switch {
	case o.Jobs <= 0:
		return nil, errors.New("bench: jobs must be positive")
	case !o.Backlog && o.Clients <= 0:
		return nil, errors.New("bench: clients must be positive")
	case (o.Backlog || o.Outbox) && o.DatabaseURL == "":
		return nil, errors.New("bench: backlog and outbox modes need the server's database URL")
	case o.keyed() && (o.Outbox || o.Pull):
		return nil, errors.New("bench: keys and hot-key are not for the outbox or pull modes")
	}
	w := &worker{
		sent: make([]atomic.Int64, o.Jobs), accepted: make([]atomic.Bool, o.Jobs), count: make([]atomic.Int32, o.Jobs),
		latency: make([]atomic.Int64, o.Jobs), at: make([]atomic.Int64, o.Jobs), done: make(chan struct{}),
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	ws := &http.Server{Handler: w}
	go ws.Serve(ln)
	defer ws.Close()
	workerURL := "http://" + ln.Addr().String() + "/work"

	conns := o.Clients*2 + 2
	if o.Pull {
		workerURL = "" // a pull queue's jobs need none
		conns += o.Pullers * (pullCompleters + 1)
	}
	c := &client{
		http:   &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conns, MaxIdleConns: conns}},
		server: o.Server,
		token:  o.Token,
	}
	category := "bench-" + o.Queue
	res := &Result{Jobs: o.Jobs}
	var start time.Time
	if o.Outbox {
		if start, err = fillOutbox(ctx, o, c, w, category, workerURL, res); err != nil {
			return nil, err
		}
	} else if o.Backlog {
		if start, err = fillBacklog(ctx, o, c, w, category, workerURL, res); err != nil {
			return nil, err
		}
	} else {
		var stop func()
		if o.Pull {
			stop = pull(o, c, w)
		}
		start, err = enqueue(ctx, o, c, w, category, workerURL, res)
		if stop != nil {
			defer stop()
		}
		if err != nil {
			return nil, err
		}
	}

	timeout := o.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Minute
	}
	// Wait for every accepted job (all of them, unless enqueues failed).
	deadline := time.After(timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
wait:
	for w.delivered.Load() < int64(res.Enqueued) {
		select {
		case <-w.done:
			break wait
		case <-tick.C:
		case <-deadline:
			break wait
		case <-ctx.Done():
			break wait
		}
	}
	if last := w.last.Load(); last > 0 {
		res.EndToEndTime = time.Unix(0, last).Sub(start)
	}
	time.Sleep(o.Settle)

	lat := make([]time.Duration, 0, o.Jobs)
	var coldLast int64
	for i := range o.Jobs {
		if o.HotKey > 0 && !o.hot(i) && w.count[i].Load() > 0 {
			res.ColdJobs++
			coldLast = max(coldLast, w.at[i].Load())
		}
		switch n := int(w.count[i].Load()); {
		case n == 0 && w.accepted[i].Load():
			res.Lost++
		case n > 0:
			res.Delivered++
			res.Duplicates += n - 1
			if o.Outbox {
				// sent holds the commit's return; a delivery may come
				// before it was stored.
				lat = append(lat, time.Duration(w.at[i].Load()-w.sent[i].Load()))
				continue
			}
			lat = append(lat, time.Duration(w.latency[i].Load()))
		}
	}
	if coldLast > 0 {
		res.ColdTime = time.Unix(0, coldLast).Sub(start)
	}
	slices.Sort(lat)
	res.P50, res.P95, res.P99 = pct(lat, 50), pct(lat, 95), pct(lat, 99)
	res.PeakRSS = peakRSS()
	return res, nil
}

// enqueue creates the queue and routing, waits until a node leads the
// queue, and enqueues the jobs from o.Clients clients. It returns when the
// first enqueue began.
func enqueue(ctx context.Context, o Options, c *client, w *worker, category, workerURL string, res *Result) (time.Time, error) {
	q := o.queueRequest()
	if o.Pull {
		q.Delivery = new(store.DeliveryPull)
	}
	if err := c.json(ctx, "PUT", "/queue/"+o.Queue, q); err != nil {
		return time.Time{}, err
	}
	if err := c.json(ctx, "PUT", "/routing/"+category, &rowqtype.RoutingRequest{QueueName: o.Queue}); err != nil {
		return time.Time{}, err
	}
	// A new queue is claimed by a node at its next refresh (1 s by
	// default); measure dispatch, not that wait.
	for deadline := time.Now().Add(30 * time.Second); c.call(ctx, "GET", "/queue/"+o.Queue+"/node", nil, nil) != nil; {
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("no node took queue %s within 30s", o.Queue)
		}
		time.Sleep(20 * time.Millisecond)
	}

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
	per := max(o.Batch, 1)
	start := time.Now()
	for range o.Clients {
		wg.Go(func() {
			var body []byte
			for {
				first := int(next.Add(int64(per))) - per
				if first >= o.Jobs {
					return
				}
				end := min(first+per, o.Jobs)
				if tick != nil {
					select {
					case <-tick:
					case <-ctx.Done():
						return
					}
				}
				var err error
				if o.Batch > 0 {
					body = batchBody(body[:0], &o, category, workerURL, first, end)
					now := time.Now().UnixNano()
					for seq := first; seq < end; seq++ {
						w.sent[seq].Store(now)
					}
					// Only the ids of rowqtype.PushedJobs: the bench's
					// clients share the machine with the server.
					var out struct {
						Jobs []struct {
							ID int64 `json:"id"`
						} `json:"jobs"`
					}
					err = c.call(ctx, "POST", "/jobs", body, &out)
					if err == nil && len(out.Jobs) != end-first {
						err = fmt.Errorf("POST /jobs answered %d jobs for %d", len(out.Jobs), end-first)
					}
				} else {
					body = jobBody(body[:0], &o, workerURL, first)
					w.sent[first].Store(time.Now().UnixNano())
					err = c.call(ctx, "POST", "/job/"+category, body, nil)
				}
				if err != nil {
					if failed.Add(int64(end-first)) == int64(end-first) {
						fmt.Fprintf(os.Stderr, "rowq bench: first enqueue error: %v\n", err)
					}
					continue
				}
				for seq := first; seq < end; seq++ {
					w.accepted[seq].Store(true)
				}
				enqueued.Add(int64(end - first))
			}
		})
	}
	wg.Wait()
	res.EnqueueTime = time.Since(start)
	res.Enqueued, res.EnqueueErrors = int(enqueued.Load()), int(failed.Load())
	return start, nil
}

// jobBody appends the body of POST /job/{category} for job seq.
func jobBody(b []byte, o *Options, url string, seq int) []byte {
	b = append(b, '{')
	return append(jobFields(b, o, url, seq), '}')
}

// jobFields appends a job's url (none when ""), concurrency key (o.key)
// and payload fields.
func jobFields(b []byte, o *Options, url string, seq int) []byte {
	if url != "" {
		b = append(b, `"url":`...)
		b = strconv.AppendQuote(b, url)
		b = append(b, ',')
	}
	if key := o.key(seq); key != "" {
		b = append(b, `"concurrency_key":`...)
		b = strconv.AppendQuote(b, key)
		b = append(b, `,"concurrency_limit":`...)
		b = strconv.AppendInt(b, int64(o.keyLimit()), 10)
		if o.Ordered {
			b = append(b, `,"ordered":true`...)
		}
		b = append(b, ',')
	}
	b = append(b, `"payload":{"seq":`...)
	b = strconv.AppendInt(b, int64(seq), 10)
	return append(b, '}')
}

// keyed reports whether the jobs have concurrency keys.
func (o *Options) keyed() bool { return o.Keys > 0 || o.HotKey > 0 }

// hot reports whether job seq is on the hot key: a fraction HotKey of the
// jobs, evenly spread.
func (o *Options) hot(seq int) bool {
	return o.HotKey > 0 && int(float64(seq+1)*o.HotKey) > int(float64(seq)*o.HotKey)
}

// key is job seq's concurrency key, "" for none.
func (o *Options) key(seq int) string {
	switch {
	case o.hot(seq):
		return "hot"
	case o.Keys > 0:
		return "k" + strconv.Itoa(seq%o.Keys)
	case o.HotKey > 0:
		return "c" + strconv.Itoa(seq)
	}
	return ""
}

func (o *Options) keyLimit() int { return max(o.KeyLimit, 1) }

// batchBody appends the body of POST /jobs for jobs first..end-1.
func batchBody(b []byte, o *Options, category, url string, first, end int) []byte {
	b = append(b, `{"jobs":[`...)
	for seq := first; seq < end; seq++ {
		if seq > first {
			b = append(b, ',')
		}
		b = append(b, `{"category":`...)
		b = strconv.AppendQuote(b, category)
		b = append(b, ',')
		b = append(jobFields(b, o, url, seq), '}')
	}
	return append(b, "]}"...)
}

// backlogChunk is how many jobs one insert of the backlog writes.
const backlogChunk = 1000

// fillBacklog writes o.Jobs jobs for o.Queue straight into the database
// while the queue does not exist (so no node leads it and none is
// delivered), then creates the queue and its routing through the API. It
// returns when the queue was created: the start of the drain.
func fillBacklog(ctx context.Context, o Options, c *client, w *worker, category, workerURL string, res *Result) (time.Time, error) {
	st, err := backend.Open(o.DatabaseURL)
	if err != nil {
		return time.Time{}, err
	}
	defer st.Close()
	if err := st.Migrate(ctx); err != nil {
		return time.Time{}, err
	}
	began := time.Now()
	jobs := make([]*store.JobInsertParams, 0, backlogChunk)
	for first := 0; first < o.Jobs; first += backlogChunk {
		jobs = jobs[:0]
		end := min(first+backlogChunk, o.Jobs)
		for seq := first; seq < end; seq++ {
			j := &store.JobInsertParams{Queue: o.Queue, Category: category, URL: workerURL,
				Payload: json.RawMessage(`{"seq":` + strconv.Itoa(seq) + `}`)}
			if key := o.key(seq); key != "" {
				j.ConcurrencyKey, j.ConcurrencyLimit, j.Ordered = key, o.keyLimit(), o.Ordered
			}
			jobs = append(jobs, j)
		}
		if _, err := st.JobsInsert(ctx, jobs); err != nil {
			return time.Time{}, fmt.Errorf("write backlog: %w", err)
		}
		for seq := first; seq < end; seq++ {
			w.accepted[seq].Store(true)
		}
	}
	res.FillTime = time.Since(began)
	res.Enqueued = o.Jobs
	res.EnqueueTime = res.FillTime

	start := time.Now()
	for i := range w.sent {
		w.sent[i].Store(start.UnixNano())
	}
	if err := c.json(ctx, "PUT", "/queue/"+o.Queue, o.queueRequest()); err != nil {
		return time.Time{}, err
	}
	return start, nil
}

// fillOutbox creates the queue and its routing, waits until a node leads
// the queue, and writes the jobs as outbox rows from o.Clients concurrent
// transactions of o.OutboxRows rows each, recording each commit's return
// as the job's start. It returns when the first transaction began, once
// every row was committed and the outbox found empty.
func fillOutbox(ctx context.Context, o Options, c *client, w *worker, category, workerURL string, res *Result) (time.Time, error) {
	if err := c.json(ctx, "PUT", "/queue/"+o.Queue, o.queueRequest()); err != nil {
		return time.Time{}, err
	}
	if err := c.json(ctx, "PUT", "/routing/"+category, &rowqtype.RoutingRequest{QueueName: o.Queue}); err != nil {
		return time.Time{}, err
	}
	for deadline := time.Now().Add(30 * time.Second); c.call(ctx, "GET", "/queue/"+o.Queue+"/node", nil, nil) != nil; {
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("no node took queue %s within 30s", o.Queue)
		}
		time.Sleep(20 * time.Millisecond)
	}
	st, err := backend.Open(o.DatabaseURL)
	if err != nil {
		return time.Time{}, err
	}
	defer st.Close()
	per := max(o.OutboxRows, 1)
	var (
		next     atomic.Int64
		enqueued atomic.Int64
		failed   atomic.Int64
		wg       sync.WaitGroup
	)
	// With --rate, transactions start at that many rows a second in all
	// (the latency of an outbox that keeps up, not of a backlog).
	var tick <-chan time.Time
	if o.Rate > 0 {
		t := time.NewTicker(time.Duration(float64(time.Second) * float64(per) / o.Rate))
		defer t.Stop()
		tick = t.C
	}
	start := time.Now()
	for range o.Clients {
		wg.Go(func() {
			rows := make([]*store.OutboxRow, 0, per)
			for {
				first := int(next.Add(int64(per))) - per
				if first >= o.Jobs {
					return
				}
				end := min(first+per, o.Jobs)
				if tick != nil {
					select {
					case <-tick:
					case <-ctx.Done():
						return
					}
				}
				rows = rows[:0]
				for seq := first; seq < end; seq++ {
					payload := `{"seq":` + strconv.Itoa(seq) + `}`
					rows = append(rows, &store.OutboxRow{Category: category, URL: &workerURL, Payload: &payload})
				}
				if err := st.OutboxInsert(ctx, rows); err != nil {
					if failed.Add(int64(end-first)) == int64(end-first) {
						fmt.Fprintf(os.Stderr, "rowq bench: first outbox insert error: %v\n", err)
					}
					continue
				}
				now := time.Now().UnixNano()
				for seq := first; seq < end; seq++ {
					w.sent[seq].Store(now)
					w.accepted[seq].Store(true)
				}
				enqueued.Add(int64(end - first))
			}
		})
	}
	wg.Wait()
	res.EnqueueTime = time.Since(start)
	res.Enqueued, res.EnqueueErrors = int(enqueued.Load()), int(failed.Load())
	for deadline := time.Now().Add(10 * time.Minute); ; time.Sleep(2 * time.Millisecond) {
		rows, err := st.OutboxRead(ctx, 1)
		if err != nil {
			return time.Time{}, err
		}
		if len(rows) == 0 {
			break
		}
		if time.Now().After(deadline) {
			return time.Time{}, errors.New("the outbox was not emptied within 10 minutes")
		}
	}
	res.MoveTime = time.Since(start)
	return start, nil
}

// peakRSS reads this process's VmHWM from /proc, in bytes; 0 if unknown.
func peakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

func pct(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, len(sorted)*p/100)]
}

// Label describes a run's settings for reports.
func (o Options) Label() string {
	mode := "max rate, one job a request"
	switch {
	case o.Backlog:
		return fmt.Sprintf("backlog of %d jobs, max_workers %d%s", o.Jobs, o.MaxWorkers, o.keysLabel())
	case o.Outbox && o.Rate > 0:
		return fmt.Sprintf("outbox: %d rows, %d concurrent transactions of %d rows, %.0f rows/s offered, max_workers %d", o.Jobs, o.Clients, max(o.OutboxRows, 1), o.Rate, o.MaxWorkers)
	case o.Outbox:
		return fmt.Sprintf("outbox: %d rows, %d concurrent transactions of %d rows, max_workers %d", o.Jobs, o.Clients, max(o.OutboxRows, 1), o.MaxWorkers)
	case o.Pull:
		return fmt.Sprintf("pull: %d jobs, %d clients enqueueing, %d pullers leasing up to %d jobs a request, max_workers %d", o.Jobs, o.Clients, o.Pullers, o.PullMax, o.MaxWorkers)
	case o.Rate > 0:
		mode = strconv.FormatFloat(o.Rate, 'f', 0, 64) + " jobs/s offered"
	case o.Batch > 0:
		mode = fmt.Sprintf("max rate, POST /jobs with %d jobs a request", o.Batch)
	}
	return fmt.Sprintf("%d jobs, %d clients, max_workers %d, %s%s%s", o.Jobs, o.Clients, o.MaxWorkers, mode, o.keysLabel(), o.keepLabel())
}

// keysLabel describes the jobs' concurrency keys, "" for none.
// keepLabel tells that the run keeps its jobs' history.
func (o Options) keepLabel() string {
	if o.KeepFinished > 0 {
		return fmt.Sprintf("; keep_finished %ds", o.KeepFinished)
	}
	return ""
}

func (o Options) keysLabel() string {
	if o.Ordered {
		o.Ordered = false
		return strings.Replace(o.keysLabel(), ", limit 1", ", ordered", 1)
	}
	switch {
	case o.HotKey > 0 && o.Keys > 0:
		return fmt.Sprintf("; %.0f%% of the jobs on one hot key, the rest over %d keys, limit %d", 100*o.HotKey, o.Keys, o.keyLimit())
	case o.HotKey > 0:
		return fmt.Sprintf("; %.0f%% of the jobs on one hot key, the rest on keys of their own, limit %d", 100*o.HotKey, o.keyLimit())
	case o.Keys > 0:
		return fmt.Sprintf("; over %d keys, limit %d", o.Keys, o.keyLimit())
	}
	return ""
}

// pullCompleters bounds the completions a puller sends at once: a worker
// that leases a batch works its jobs side by side, and so the server gets
// concurrent completions, which it writes many to a transaction.
const pullCompleters = 32

// pull starts o.Pullers pullers of queue o.Queue: each leases up to
// o.PullMax jobs a request (waiting up to a second), counts each job as
// the worker counts a delivery, and completes them, pullCompleters at a
// time, before it asks again. The returned function stops them and waits
// until they have.
func pull(o Options, c *client, w *worker) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	body := []byte(fmt.Sprintf(`{"max":%d,"wait":1,"lease":60}`, max(o.PullMax, 1)))
	var failed atomic.Int64
	report := func(err error) {
		if ctx.Err() == nil && failed.Add(1) == 1 {
			fmt.Fprintf(os.Stderr, "rowq bench: first puller error: %v\n", err)
		}
	}
	for range max(o.Pullers, 1) {
		wg.Go(func() {
			for ctx.Err() == nil {
				// Only what the puller needs of rowqtype.LeasedJobs.
				var out struct {
					Jobs []struct {
						ID         int64           `json:"id"`
						Payload    json.RawMessage `json:"payload"`
						LeaseToken string          `json:"lease_token"`
					} `json:"jobs"`
				}
				if err := c.call(ctx, "POST", "/queue/"+o.Queue+"/lease", body, &out); err != nil {
					report(err)
					time.Sleep(100 * time.Millisecond)
					continue
				}
				now := time.Now().UnixNano()
				for _, j := range out.Jobs {
					w.receive(j.Payload, now)
				}
				var next atomic.Int64
				var cw sync.WaitGroup
				for range min(len(out.Jobs), pullCompleters) {
					cw.Go(func() {
						var done []byte
						for i := int(next.Add(1)) - 1; i < len(out.Jobs); i = int(next.Add(1)) - 1 {
							j := out.Jobs[i]
							done = append(done[:0], `{"status":"success","lease_token":`...)
							done = strconv.AppendQuote(done, j.LeaseToken)
							done = append(done, '}')
							if err := c.call(ctx, "POST", "/job/"+strconv.FormatInt(j.ID, 10)+"/complete", done, nil); err != nil {
								report(err)
							}
						}
					})
				}
				cw.Wait()
			}
		})
	}
	return func() { cancel(); wg.Wait() }
}

// queueRequest is the bench queue's settings.
func (o Options) queueRequest() *rowqtype.QueueRequest {
	q := &rowqtype.QueueRequest{MaxWorkers: new(o.MaxWorkers)}
	if o.KeepFinished > 0 {
		q.KeepFinished = new(o.KeepFinished)
	}
	return q
}

package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/stats"
	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/web"
)

// setup fills a database of each dialect with what the pages show, and
// returns a dashboard on it.
type bundle struct {
	st  store.Store
	srv *httptest.Server
}

func setup(t *testing.T, dialect string) *bundle { return setupWith(t, dialect, nil) }

// setupWith is setup with the dashboard's configuration changed by tweak
// (which may read the bundle's store).
func setupWith(t *testing.T, dialect string, tweak func(*web.Config, store.Store)) *bundle {
	t.Helper()
	ctx := context.Background()
	st := dbtest.Open(t, dialect)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err := st.QueuePut(ctx, &store.Queue{Name: "mail", PollingInterval: 200, MaxWorkers: 7})
	must(err)
	_, err = st.QueuePut(ctx, &store.Queue{Name: "idle", PollingInterval: 200, MaxWorkers: 1, Delivery: store.DeliveryPull})
	must(err)
	_, err = st.QueueSetPaused(ctx, "idle", true)
	must(err)
	job := func(payload string, after time.Duration) *store.JobInsertParams {
		return &store.JobInsertParams{Queue: "mail", Category: "welcome", URL: "http://127.0.0.1:1/", Payload: json.RawMessage(payload), RunAfter: after}
	}
	_, err = st.JobsInsert(ctx, []*store.JobInsertParams{job(`{"fail":1}`, 0)})
	must(err)
	grabbed, err := st.JobsGrab(ctx, &store.JobsGrabParams{Queue: "mail", Node: "n1", Limit: 1, Lease: time.Minute})
	must(err)
	_, err = st.JobFail(ctx, &store.JobFailParams{ID: grabbed[0].ID, Node: "n1", Status: "permanent-failure", Code: 422, Message: "<script>alert(1)</script>"})
	must(err)
	later := job(`{"later":true}`, time.Hour)
	later.ConcurrencyKey, later.ConcurrencyLimit, later.Ordered = "tenant-1", 1, true
	_, err = st.JobsInsert(ctx, []*store.JobInsertParams{job(`{"to":"ada"}`, 0), later, job(`{"held":1}`, 0)})
	must(err)
	_, err = st.JobsGrab(ctx, &store.JobsGrabParams{Queue: "mail", Node: "n1", Limit: 1, Lease: time.Minute})
	must(err)
	_, err = st.SchedulePut(ctx, &store.Schedule{Name: "nightly", Cron: "0 3 * * *", Timezone: "Europe/Paris", Category: "welcome",
		URL: "http://127.0.0.1:1/", Misfire: store.MisfireOnce, MaxCatchup: 1, Overlap: store.OverlapAllow, NextRunAt: time.Now().Add(time.Hour)})
	must(err)
	_, err = st.LockAcquire(ctx, &store.LockAcquireParams{Name: "deploy", Owner: "ci-7", TTL: time.Minute, Limit: 1})
	must(err)
	must(st.NodeHeartbeat(ctx, &store.NodeHeartbeatParams{ID: "n1", Host: "n1:8080", TTL: time.Minute}))
	must(st.QueuesClaim(ctx, &store.QueuesClaimParams{Node: "n1", Limit: 1}))
	checkName := func(field, v string) error {
		if strings.ContainsAny(v, " <>") {
			return fmt.Errorf("%s: %q: use letters, digits and _ . : - only", field, v)
		}
		return nil
	}
	cfg := web.Config{Store: st, Version: "v9", CheckName: checkName}
	if tweak != nil {
		tweak(&cfg, st)
	}
	srv := httptest.NewServer(web.Handler(cfg))
	t.Cleanup(srv.Close)
	return &bundle{st: st, srv: srv}
}

func (b *bundle) get(t *testing.T, path string, want int) string {
	t.Helper()
	res, err := http.Get(b.srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != want {
		t.Fatalf("GET %s: %d, want %d\n%s", path, res.StatusCode, want, body)
	}
	if ct := res.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Errorf("GET %s: Content-Type %q", path, ct)
	}
	return string(body)
}

func contains(t *testing.T, page, body string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(body, w) {
			t.Errorf("%s lacks %q", page, w)
		}
	}
}

func TestDashboard_ShowsWhatTheDatabaseHolds(t *testing.T) {
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			b := setup(t, dialect)
			body := b.get(t, "/ui", http.StatusOK)
			contains(t, "/ui", body,
				`<a href="/ui/queue/mail">mail</a>`, `no live node`, // no node runs here
				`<td class="n">3</td>`,               // mail's outstanding jobs: waiting, deferred, grabbed
				`<td class="n">0 / 7</td>`,           // busy / max workers
				`<span class="paused">paused</span>`, // idle
				`nightly`, `<code>0 3 * * *</code>`, `Europe/Paris`,
				`deploy`, `ci-7`, `v9`,
				`<tr id="node-n1"><td>n1</td><td>n1:8080</td><td class="n">1</td>`, `2 queues, spread`)
			body = b.get(t, "/ui/queue/mail", http.StatusOK)
			contains(t, "/ui/queue/mail", body,
				`Queue mail`, `<td>7 (0 busy)</td>`, `<tr><th>delivery</th><td>push</td></tr>`,
				`{&#34;to&#34;:&#34;ada&#34;}`, `{&#34;later&#34;:true}`, `{&#34;held&#34;:1}`, `<td>n1</td>`,
				`<td>tenant-1 (ordered)</td>`,
				`permanent-failure`, `<td class="n">422</td>`,
				`&lt;script&gt;alert(1)&lt;/script&gt;`) // escaped
			if strings.Contains(body, "<script>") {
				t.Error("/ui/queue/mail: a failure message reached the page unescaped")
			}
			body = b.get(t, "/ui/queue/idle", http.StatusOK)
			contains(t, "/ui/queue/idle", body, `<th>delivery</th><td>pull: workers lease its jobs`, `<td>1 (leased jobs at most)</td>`)
			b.get(t, "/ui/queue/nope", http.StatusNotFound)
			body = b.get(t, "/ui/queue/a%20b", http.StatusBadRequest)
			contains(t, "/ui/queue/a%20b", body, `name: &#34;a b&#34;: use letters`)
		})
	}
}

// TestDashboard_DatabaseAway: a page that cannot read the database answers
// 503 with a page that says so.
func TestDashboard_DatabaseAway(t *testing.T) {
	b := setup(t, "sqlite")
	b.st.Close()
	body := b.get(t, "/ui", http.StatusServiceUnavailable)
	contains(t, "/ui", body, "the database could not be read")
	b.get(t, "/ui/queue/mail", http.StatusServiceUnavailable)
}

// TestDashboard_Charts: a queue's page draws its history as three inline
// SVG charts (throughput, failures, latency), each a line through a point
// per minute with its value; without history there are none.
func TestDashboard_Charts(t *testing.T) {
	ctx := context.Background()
	now := time.Now().Add(-3 * time.Minute)
	var h *stats.History
	b := setupWith(t, "sqlite", func(cfg *web.Config, st store.Store) {
		h = stats.NewHistory(stats.HistoryConfig{Store: st, Now: func() time.Time { return now }})
		cfg.History = h
	})
	if strings.Contains(b.get(t, "/ui/queue/mail", http.StatusOK), "<svg") {
		t.Error("a chart without any history")
	}
	for i, c := range []store.StatsCounters{{}, {Completes: 120, Failures: 6, Pops: 126, WaitMs: 126 * 40}, {Completes: 60, Pops: 60, WaitMs: 60 * 250}} {
		if i > 0 {
			if err := b.st.StatsAdd(ctx, &store.StatsAddParams{Node: "n1", Deltas: []*store.StatsDelta{{Queue: "mail", StatsCounters: c}}}); err != nil {
				t.Fatal(err)
			}
		}
		if err := h.Sample(ctx); err != nil {
			t.Fatal(err)
		}
		now = now.Add(time.Minute)
	}
	body := b.get(t, "/ui/queue/mail", http.StatusOK)
	for _, id := range []string{"throughput", "failures", "latency"} {
		contains(t, "/ui/queue/mail", body, `<figure id="chart-`+id+`">`, `<path class="line `+id+`" d="M`)
	}
	contains(t, "/ui/queue/mail", body,
		`text-anchor="end">200</text>`, // throughput's axis: 120/min rounded up
		`120 /min</title>`,             // the first minute's point
		`60 /min</title>`,              // the second's
		`6 /min</title>`,               // failures
		`40 ms</title>`, `250 ms`,      // mean waits
		`−60 min`, `now`)
}

// statsAsked is a store that records the queues each StatsGet names.
type statsAsked struct {
	store.Store
	mu    sync.Mutex
	asked [][]string
}

func (s *statsAsked) StatsGet(ctx context.Context, p *store.StatsGetParams) (map[string]*store.QueueStats, error) {
	s.mu.Lock()
	s.asked = append(s.asked, p.Names())
	s.mu.Unlock()
	return s.Store.StatsGet(ctx, p)
}

// take returns the queues each StatsGet named since the last take.
func (s *statsAsked) take() [][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	asked := s.asked
	s.asked = nil
	return asked
}

// TestDashboard_QueuePages: the overview shows 500 queues a page, by name,
// links the next page, and reads the statistics of its page's queues only.
func TestDashboard_QueuePages(t *testing.T) {
	t.Parallel()
	reads := &statsAsked{}
	// Paging is the store's QueueList, tested on every dialect.
	b := setupWith(t, "sqlite", func(cfg *web.Config, st store.Store) {
		reads.Store = st
		cfg.Store = reads
	})
	ctx := context.Background()
	for i := range 520 {
		if _, err := b.st.QueuePut(ctx, &store.Queue{Name: fmt.Sprintf("t%04d", i), PollingInterval: 200, MaxWorkers: 1}); err != nil {
			t.Fatal(err)
		}
	}
	// 522 queues by name: idle, mail, t0000 … t0519.
	body := b.get(t, "/ui", http.StatusOK)
	contains(t, "/ui", body, `id="queue-idle"`, `id="queue-t0497"`, `href="/ui?after=t0497">Next 500 queues`)
	if strings.Contains(body, `id="queue-t0498"`) {
		t.Error("/ui shows more than 500 queues")
	}
	if asked := reads.take(); len(asked) != 1 || len(asked[0]) != 500 || asked[0][0] != "idle" || asked[0][499] != "t0497" {
		t.Errorf("/ui read stats %d times, of %d queues; want once, of idle … t0497", len(asked), len(slices.Concat(asked...)))
	}
	body = b.get(t, "/ui?after=t0497", http.StatusOK)
	contains(t, "/ui?after=t0497", body, `id="queue-t0498"`, `id="queue-t0519"`, `<a href="/ui">First page</a>`)
	if strings.Contains(body, `id="queue-mail"`) || strings.Contains(body, "Next 500") {
		t.Error("/ui?after=t0497: not the last page")
	}
	if asked := reads.take(); len(asked) != 1 || len(asked[0]) != 22 || asked[0][0] != "t0498" {
		t.Errorf("/ui?after=t0497 read the stats of %v, want once, of t0498 … t0519", asked)
	}
	// Past the last queue: no queue, so no read (naming none would read
	// every queue's).
	b.get(t, "/ui?after=zzz", http.StatusOK)
	if asked := reads.take(); len(asked) != 0 {
		t.Errorf("/ui?after=zzz read the stats of %v, want no read", asked)
	}
	body = b.get(t, "/ui?after=a%20b", http.StatusBadRequest)
	contains(t, "/ui?after=a%20b", body, `after: &#34;a b&#34;: use letters`)
}

// TestDashboard_QueueShowsWorkerHostsInTrouble: the queue page lists the
// worker hosts its leader slows down or holds back, as recorded.
func TestDashboard_QueueShowsWorkerHostsInTrouble(t *testing.T) {
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			b := setup(t, dialect)
			ctx := context.Background()
			if err := b.st.QueuesClaim(ctx, &store.QueuesClaimParams{Node: "n1"}); err != nil {
				t.Fatal(err)
			}
			if body := b.get(t, "/ui/queue/mail", http.StatusOK); strings.Contains(body, `id="worker-hosts"`) {
				t.Fatal("the queue page lists worker hosts before any is recorded")
			}
			rate := 2.5
			until := time.Now().Add(time.Minute)
			err := b.st.WorkerHostsSet(ctx, &store.WorkerHostsSetParams{Queue: "mail", Node: "n1", Hosts: []*store.WorkerHost{
				{Host: "slow.example:80", Rate: &rate, Breaker: store.BreakerClosed},
				{Host: "dead.example:443", Breaker: store.BreakerOpen, Failures: 5, OpenUntil: &until},
			}})
			if err != nil {
				t.Fatal(err)
			}
			body := b.get(t, "/ui/queue/mail", http.StatusOK)
			contains(t, "/ui/queue/mail", body, `id="worker-hosts"`,
				`<td>slow.example:80</td><td class="n">2.5</td><td>closed</td>`,
				`<td>dead.example:443</td><td class="n">–</td><td><span class="down">open</span></td><td class="n">5</td>`)
		})
	}
}

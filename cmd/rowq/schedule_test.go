package main_test

// Process-level tests of schedules: several `rowq serve` processes on one
// database fire each tick once, keep their place across a stop of every
// node, and apply the misfire and overlap policies.

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/testworker"
)

// run is one entry of GET /schedule/{name}/runs.
type run struct {
	ID      int64
	Kind    string
	Tick    time.Time
	Node    string
	JobID   int64
	Skipped bool
	Reason  string
}

// runsOf reads a schedule's whole run history, oldest first.
func (p *proc) runsOf(t *testing.T, name string) []run {
	t.Helper()
	var out []run
	cursor := ""
	for {
		path := "/schedule/" + name + "/runs?limit=1000"
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		page := p.mustCall(t, "GET", path, nil)
		for _, x := range page["runs"].([]any) {
			m := x.(map[string]any)
			tick, err := time.Parse(time.RFC3339Nano, m["tick"].(string))
			if err != nil {
				t.Fatal(err)
			}
			r := run{ID: int64(m["id"].(float64)), Kind: m["kind"].(string), Tick: tick, Node: m["node"].(string), Skipped: m["skipped"].(bool)}
			if id, ok := m["job_id"].(float64); ok {
				r.JobID = int64(id)
			}
			r.Reason, _ = m["reason"].(string)
			out = append(out, r)
		}
		next, _ := page["next_cursor"].(string)
		if next == "" {
			break
		}
		cursor = next
	}
	slices.Reverse(out)
	return out
}

// scheduleNodes starts n nodes on dbURL with default queue q.
func scheduleNodes(t *testing.T, dbURL, dir string, n int, extra ...string) []*proc {
	t.Helper()
	nodes := make([]*proc, n)
	var wg sync.WaitGroup
	for i := range nodes {
		wg.Go(func() {
			nodes[i] = serve(t, dir, testEnv(dbURL, append([]string{"ROWQ_QUEUE_DEFAULT=q", fmt.Sprintf("ROWQ_NODE_ID=node-%d", i+1)}, extra...)...)...)
		})
	}
	wg.Wait()
	return nodes
}

// stopAll stops the nodes with SIGTERM and waits for them to exit.
func stopAll(t *testing.T, nodes []*proc) {
	t.Helper()
	for _, p := range nodes {
		p.signal(t, syscall.SIGTERM)
	}
	for _, p := range nodes {
		if code := p.wait(t, 30*time.Second); code != 0 {
			t.Errorf("%s exited with %d", p.name, code)
		}
	}
}

// noErrorLogs fails if a node logged an error, or the schedule loop a
// warning. (The dispatcher may warn of a slow heartbeat on a loaded test
// machine; that is not what these tests are about.)
func noErrorLogs(t *testing.T, nodes []*proc) {
	t.Helper()
	for _, p := range nodes {
		for line := range strings.SplitSeq(p.out.String(), "\n") {
			if strings.Contains(line, "level=ERROR") ||
				(strings.Contains(line, "level=WARN") && strings.Contains(line, "component=schedule")) {
				t.Errorf("%s logged: %s", p.name, line)
			}
		}
	}
}

// firedTicks returns the ticks of the fired runs, checking that each has
// its own job.
func firedTicks(t *testing.T, runs []run) []time.Time {
	t.Helper()
	jobs := map[int64]bool{}
	var ticks []time.Time
	for _, r := range runs {
		if r.Skipped {
			continue
		}
		if r.JobID == 0 || jobs[r.JobID] {
			t.Errorf("run at %v has job %d, missing or shared", r.Tick, r.JobID)
		}
		jobs[r.JobID] = true
		ticks = append(ticks, r.Tick)
	}
	return ticks
}

// gaps returns the whole seconds missing between consecutive ticks.
func gaps(ticks []time.Time) []time.Time {
	var out []time.Time
	for i := 1; i < len(ticks); i++ {
		for t := ticks[i-1].Add(time.Second); t.Before(ticks[i]); t = t.Add(time.Second) {
			out = append(out, t)
		}
	}
	return out
}

func TestSchedule_ThreeNodesFireEachTickOnce(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		w := testworker.New(t, nil)
		dbURL := dbtest.URL(t, dialect)
		nodes := scheduleNodes(t, dbURL, t.TempDir(), 3)
		// misfire all: a node slowed by the loaded test machine beyond the
		// grace still fires every tick, so that "none missing" is about
		// the nodes, not the policy.
		nodes[0].mustCall(t, "PUT", "/schedule/tick", map[string]any{
			"cron": "@every 1s", "category": "cat", "url": w.URL, "payload": "tick", "misfire": "all",
		})
		time.Sleep(30 * time.Second)
		nodes[1].mustCall(t, "POST", "/schedule/tick/pause", nil)
		runs := nodes[2].runsOf(t, "tick")
		ticks := firedTicks(t, runs)
		if len(ticks) < 25 || len(ticks) != len(runs) {
			t.Fatalf("%d runs, %d fired, in 30s of an @every 1s schedule; want about 30, all fired", len(runs), len(ticks))
		}
		if g := gaps(ticks); len(g) > 0 {
			t.Errorf("ticks never fired: %v", g)
		}
		byNode := map[string]int{}
		for i, r := range runs {
			byNode[r.Node]++
			if i > 0 && !r.Tick.After(runs[i-1].Tick) {
				t.Errorf("tick %v fired twice or out of order", r.Tick)
			}
		}
		t.Logf("%d ticks fired, by node: %v", len(ticks), byNode)
		testworker.WaitFor(t, 30*time.Second, "every job delivered", func() bool { return w.Count("tick") >= len(ticks) })
		time.Sleep(time.Second) // a duplicate delivery would show now
		if got := w.Count("tick"); got != len(ticks) {
			t.Errorf("worker got %d deliveries for %d fired ticks", got, len(ticks))
		}
		st := dbtest.OpenURL(t, dbURL)
		for _, r := range runs {
			if !jobGone(t, st, "q", r.JobID) {
				t.Errorf("job %d of tick %v still stored", r.JobID, r.Tick)
			}
		}
		noErrorLogs(t, nodes)
	})
}

func TestSchedule_MisfireAfterEveryNodeStopped(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		w := testworker.New(t, nil)
		dbURL := dbtest.URL(t, dialect)
		dir := t.TempDir()
		// A 2s grace: of the ~10s down, the ticks older than 2s are misfires.
		const grace = "ROWQ_SCHEDULE_MISFIRE_GRACE=2s"
		nodes := scheduleNodes(t, dbURL, dir, 3, grace)
		policies := []string{"skip", "once", "all"}
		for _, m := range policies {
			nodes[0].mustCall(t, "PUT", "/schedule/"+m, map[string]any{
				"cron": "@every 1s", "category": "cat", "url": w.URL, "payload": m, "misfire": m,
			})
		}
		testworker.WaitFor(t, 20*time.Second, "a few ticks of each", func() bool {
			return w.Count("skip") >= 3 && w.Count("once") >= 3 && w.Count("all") >= 3
		})
		stopAll(t, nodes)
		stopped := time.Now()
		time.Sleep(10 * time.Second)
		nodes = scheduleNodes(t, dbURL, dir, 3, grace)
		t.Logf("down for %v", time.Since(stopped).Round(time.Millisecond))
		for _, m := range policies {
			before := len(firedTicks(t, nodes[0].runsOf(t, m)))
			testworker.WaitFor(t, 20*time.Second, m+" fires again", func() bool { return len(firedTicks(t, nodes[0].runsOf(t, m))) >= before+3 })
			nodes[0].mustCall(t, "POST", "/schedule/"+m+"/pause", nil)
		}
		for _, m := range policies {
			runs := nodes[1].runsOf(t, m)
			ticks := firedTicks(t, runs)
			missing := gaps(ticks)
			var notes []run
			for _, r := range runs {
				if strings.HasPrefix(r.Reason, "misfire") {
					notes = append(notes, r)
				}
			}
			if len(notes) > 0 {
				t.Logf("%s: %d runs, %d ticks not fired, %d misfire notes, the first: %s", m, len(runs), len(missing), len(notes), notes[0].Reason)
			}
			switch m {
			case "skip":
				// The ticks missed while down are not run; one skipped
				// run records them.
				if len(notes) != 1 || !notes[0].Skipped || len(missing) < 6 {
					t.Errorf("skip: want one skipped run for the missed ticks and those ticks not fired; got notes %+v, %d not fired", notes, len(missing))
				}
				for _, g := range missing {
					if g.After(notes[0].Tick) {
						t.Errorf("skip: tick %v not fired, after the missed ones", g)
					}
				}
			case "once":
				// One run stands for every missed tick.
				if len(notes) != 1 || notes[0].Skipped || !strings.Contains(notes[0].Reason, "missed tick(s)") || len(missing) < 6 {
					t.Errorf("once: want one fired run for the missed ticks; got notes %+v, %d not fired", notes, len(missing))
				}
			case "all":
				// Every missed tick is caught up.
				if len(missing) > 0 || len(notes) < 6 {
					t.Errorf("all: ticks %v not fired, %d catch-up runs; want none missing and the catch-ups noted", missing, len(notes))
				}
			}
		}
		noErrorLogs(t, nodes)
	})
}

func TestSchedule_OverlapSkipWithSlowWorker(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		var mu sync.Mutex
		maxOpen := 0
		w := testworker.New(t, func(string, int) (int, string, time.Duration) {
			return 200, `{"status":"success"}`, 2500 * time.Millisecond
		})
		w.SetOnDelivery(func(_, open int) {
			mu.Lock()
			maxOpen = max(maxOpen, open)
			mu.Unlock()
		})
		dbURL := dbtest.URL(t, dialect)
		nodes := scheduleNodes(t, dbURL, t.TempDir(), 2)
		nodes[0].mustCall(t, "PUT", "/schedule/slow", map[string]any{
			"cron": "@every 1s", "category": "cat", "url": w.URL, "payload": "slow", "overlap": "skip",
		})
		testworker.WaitFor(t, 30*time.Second, "3 deliveries", func() bool { return w.Count("slow") >= 3 })
		nodes[1].mustCall(t, "POST", "/schedule/slow/pause", nil)
		runs := nodes[0].runsOf(t, "slow")
		skipped := 0
		for _, r := range runs {
			if r.Skipped {
				skipped++
				if !strings.HasPrefix(r.Reason, "overlap: job ") {
					t.Errorf("tick %v skipped for %q, want the overlap reason", r.Tick, r.Reason)
				}
			}
		}
		fired := len(firedTicks(t, runs))
		t.Logf("%d runs: %d fired, %d skipped", len(runs), fired, skipped)
		if skipped < 3 {
			t.Errorf("%d ticks skipped, want the ticks during each 2.5s delivery skipped", skipped)
		}
		mu.Lock()
		defer mu.Unlock()
		if maxOpen > 1 {
			t.Errorf("%d deliveries ran at once, want 1 with overlap skip", maxOpen)
		}
	})
}

// rowq runs a client subcommand against a node and returns its output and
// exit code.
func (p *proc) rowq(t *testing.T, args ...string) (string, int) {
	t.Helper()
	c := start(t, "rowq "+strings.Join(args, " "), t.TempDir(), []string{"ROWQ_SERVER=http://" + p.addr}, args...)
	code := c.wait(t, 30*time.Second)
	return c.out.String(), code
}

func TestScheduleCLI_PutGetRunsTriggerRm(t *testing.T) {
	t.Parallel()
	w := testworker.New(t, nil)
	p := serve(t, t.TempDir(), testEnv("sqlite://"+t.TempDir()+"/rowq.db", "ROWQ_QUEUE_DEFAULT=q")...)
	ok := func(want string, args ...string) string {
		t.Helper()
		out, code := p.rowq(t, args...)
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("rowq %s: exit %d, output:\n%s\nwant it to contain %q", strings.Join(args, " "), code, out, want)
		}
		return out
	}
	ok("Europe/Berlin", "schedule", "put", "nightly", "--cron", "30 2 * * *", "--timezone", "Europe/Berlin",
		"--category", "report", "--url", w.URL, "--payload", `"cli"`, "--misfire", "skip")
	out := ok("next runs", "schedule", "get", "nightly")
	if !strings.Contains(out, "T02:30:00+0") {
		t.Errorf("get shows no 02:30 local next run:\n%s", out)
	}
	ok("nightly", "schedule", "ls")
	// Paging: two schedules, one a page; the table names the next cursor.
	ok("weekly", "schedule", "put", "weekly", "--cron", "@weekly", "--category", "report", "--url", w.URL, "--paused")
	out = ok("more: --cursor ", "schedule", "ls", "--limit", "1")
	cursor := strings.Fields(out[strings.Index(out, "more: --cursor "):])[2]
	if !strings.Contains(out, "nightly") || strings.Contains(out, "weekly") {
		t.Errorf("ls --limit 1, first page:\n%s", out)
	}
	out = ok("weekly", "schedule", "ls", "--limit", "1", "--cursor", cursor)
	if strings.Contains(out, "nightly") || strings.Contains(out, "more:") {
		t.Errorf("ls --limit 1, last page:\n%s", out)
	}
	out = ok(`"next_cursor"`, "schedule", "ls", "--limit", "1", "--json")
	if out, code := p.rowq(t, "schedule", "ls", "--cursor", "nope"); code == 0 || !strings.Contains(out, "cursor:") {
		t.Errorf("ls with a bad cursor: exit %d, output %s; want a non-zero exit naming cursor", code, out)
	}
	ok(`"paused": true`, "schedule", "pause", "nightly", "--json")
	ok("paused", "schedule", "resume", "--json", "nightly")
	ok("trigger", "schedule", "trigger", "nightly")
	testworker.WaitFor(t, 10*time.Second, "the triggered run delivered", func() bool { return w.Count("cli") == 1 })
	ok(`"kind": "trigger"`, "schedule", "runs", "nightly", "--json")
	ok("nightly", "schedule", "rm", "nightly")
	out, code := p.rowq(t, "schedule", "get", "nightly")
	if code == 0 || !strings.Contains(out, "404") {
		t.Errorf("get after rm: exit %d, output %s; want a non-zero exit and the 404", code, out)
	}
	out, code = p.rowq(t, "schedule", "put", "bad", "--cron", "0 0 30 2 *", "--category", "c", "--url", w.URL)
	if code == 0 || !strings.Contains(out, "cron:") {
		t.Errorf("put of a spec that never fires: exit %d, output %s; want a non-zero exit naming cron", code, out)
	}
}

package schedule

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/enqueue"
	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
)

func dummyJob() *store.JobInsertParams { return &store.JobInsertParams{Queue: "q"} }

func TestPlan_Misfire(t *testing.T) {
	t.Parallel()
	now := utc("2026-01-01T12:00:10Z")
	spec, err := Parse("@every 1s", time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	// Down from 12:00:00: ticks 12:00:00..12:00:10 are due; with a 2s
	// grace 12:00:08..10 are on time and 12:00:00..07 are missed.
	for _, tc := range []struct {
		misfire    string
		maxCatchup int
		want       []string // tick:fired|skipped
	}{
		{store.MisfireSkip, 100, []string{"07:skipped", "08:fired", "09:fired", "10:fired"}},
		{store.MisfireOnce, 100, []string{"08:fired", "09:fired", "10:fired"}},
		{store.MisfireAll, 100, []string{"00:fired", "01:fired", "02:fired", "03:fired", "04:fired", "05:fired", "06:fired", "07:fired", "08:fired", "09:fired", "10:fired"}},
		{store.MisfireAll, 3, []string{"04:skipped", "05:fired", "06:fired", "07:fired", "08:fired", "09:fired", "10:fired"}},
	} {
		t.Run(fmt.Sprintf("%s_%d", tc.misfire, tc.maxCatchup), func(t *testing.T) {
			sc := &store.Schedule{Misfire: tc.misfire, MaxCatchup: tc.maxCatchup, NextRunAt: utc("2026-01-01T12:00:00Z")}
			runs, next := plan(sc, spec, now, 2*time.Second, dummyJob)
			var got []string
			for _, r := range runs {
				state := "fired"
				if r.Job == nil {
					state = "skipped"
				}
				got = append(got, r.Tick.Format("05")+":"+state)
			}
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Errorf("runs = %v, want %v", got, tc.want)
			}
			if !next.Equal(utc("2026-01-01T12:00:11Z")) {
				t.Errorf("next = %v, want 12:00:11", next)
			}
			if tc.misfire != store.MisfireAll && !strings.Contains(runs[0].Reason, "8 missed tick(s) from 2026-01-01T12:00:00Z to 2026-01-01T12:00:07Z") {
				t.Errorf("first run's reason %q does not tell the missed ticks", runs[0].Reason)
			}
		})
	}
	t.Run("once_all_missed", func(t *testing.T) {
		sc := &store.Schedule{Misfire: store.MisfireOnce, MaxCatchup: 100, NextRunAt: utc("2026-01-01T11:00:00Z")}
		hourly, _ := Parse("@hourly", time.UTC)
		runs, next := plan(sc, hourly, utc("2026-01-01T15:30:00Z"), 5*time.Second, dummyJob)
		if len(runs) != 1 || runs[0].Job == nil || !runs[0].Tick.Equal(utc("2026-01-01T15:00:00Z")) ||
			!strings.Contains(runs[0].Reason, "one run for 5 missed tick(s)") {
			t.Errorf("runs = %+v, want one fired run for the 5 missed ticks at the newest", runs[0])
		}
		if !next.Equal(utc("2026-01-01T16:00:00Z")) {
			t.Errorf("next = %v", next)
		}
	})
	t.Run("long_downtime_is_bounded", func(t *testing.T) {
		sc := &store.Schedule{Misfire: store.MisfireAll, MaxCatchup: 10, NextRunAt: utc("2025-01-01T00:00:00Z")}
		runs, next := plan(sc, spec, now, 2*time.Second, dummyJob)
		if len(runs) != 4 || runs[0].Job != nil || !strings.Contains(runs[0].Reason, "at least") || !next.Equal(utc("2026-01-01T12:00:11Z")) {
			t.Errorf("after a year down: %d runs, first %q, next %v", len(runs), runs[0].Reason, next)
		}
	})
}

// clock is an injected clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now(context.Context) (time.Time, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now, nil
}

func (c *clock) set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

// TestScheduler_DST runs the loop with an injected clock across the clock
// changes of 2026 in New York and Berlin, stepping the clock to one second
// before and after each next_run_at, and checks the ticks it fired.
func TestScheduler_DST(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, cron, zone, from, until string
		want                          []string
	}{
		{"NY spring 02:30 runs after the gap", "30 2 * * *", "America/New_York", "2026-03-07T12:00:00Z", "2026-03-09T12:00:00Z",
			[]string{"2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z"}},
		{"NY fall 01:30 runs once", "30 1 * * *", "America/New_York", "2026-10-31T12:00:00Z", "2026-11-02T12:00:00Z",
			[]string{"2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"}},
		{"NY fall hourly keeps spacing", "30 * * * *", "America/New_York", "2026-11-01T03:45:00Z", "2026-11-01T07:45:00Z",
			[]string{"2026-11-01T04:30:00Z", "2026-11-01T05:30:00Z", "2026-11-01T06:30:00Z", "2026-11-01T07:30:00Z"}},
		{"Berlin spring hourly keeps spacing", "15 * * * *", "Europe/Berlin", "2026-03-28T23:30:00Z", "2026-03-29T02:30:00Z",
			[]string{"2026-03-29T00:15:00Z", "2026-03-29T01:15:00Z", "2026-03-29T02:15:00Z"}},
		{"Berlin spring 02:30 runs after the gap", "30 2 * * *", "Europe/Berlin", "2026-03-28T12:00:00Z", "2026-03-30T12:00:00Z",
			[]string{"2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"}},
		{"Berlin fall 02:30 runs once", "30 2 * * *", "Europe/Berlin", "2026-10-24T12:00:00Z", "2026-10-26T12:00:00Z",
			[]string{"2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"}},
		{"Berlin fall interval keeps spacing", "@every 45m", "Europe/Berlin", "2026-10-24T23:50:00Z", "2026-10-25T02:00:00Z",
			[]string{"2026-10-25T00:00:00Z", "2026-10-25T00:45:00Z", "2026-10-25T01:30:00Z"}},
	}
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		st := dbtest.Open(t, dialect)
		ctx := context.Background()
		if _, err := st.QueuePut(ctx, &store.Queue{Name: "q", PollingInterval: 200, MaxWorkers: 1}); err != nil {
			t.Fatal(err)
		}
		for i, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				loc := mustLoc(t, tc.zone)
				spec, err := Parse(tc.cron, loc)
				if err != nil {
					t.Fatal(err)
				}
				name := fmt.Sprintf("dst-%d", i)
				clk := &clock{now: utc(tc.from)}
				_, err = st.SchedulePut(ctx, &store.Schedule{
					Name: name, Cron: tc.cron, Timezone: tc.zone, Category: "cat", URL: "http://127.0.0.1:1/",
					Misfire: store.MisfireSkip, MaxCatchup: 100, Overlap: store.OverlapAllow,
					NextRunAt: spec.Next(clk.now),
				})
				if err != nil {
					t.Fatal(err)
				}
				s := New(Config{Store: st, Node: "n", Enqueue: enqueueTo(t, st, "q"), Now: clk.Now})
				for {
					sc, err := st.ScheduleGet(ctx, name)
					if err != nil {
						t.Fatal(err)
					}
					if sc.NextRunAt.After(utc(tc.until)) {
						break
					}
					clk.set(sc.NextRunAt.Add(-time.Second))
					if _, err := s.RunDue(ctx); err != nil {
						t.Fatal(err)
					}
					clk.set(sc.NextRunAt.Add(time.Second))
					if _, err := s.RunDue(ctx); err != nil {
						t.Fatal(err)
					}
				}
				runs, err := st.ScheduleRuns(ctx, &store.ScheduleRunsParams{Name: name, Limit: 100})
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for i := len(runs) - 1; i >= 0; i-- {
					if runs[i].Skipped {
						t.Errorf("run at %v skipped: %s", runs[i].Tick, runs[i].Reason)
					}
					got = append(got, runs[i].Tick.Format(time.RFC3339))
				}
				if strings.Join(got, " ") != strings.Join(tc.want, " ") {
					t.Errorf("fired ticks\n got %v\nwant %v", got, tc.want)
				}
			})
		}
	})
}

// TestScheduler_RacingNodesFireEachTickOnce runs several schedulers on one
// database with one injected clock, all looking at the same moments.
func TestScheduler_RacingNodesFireEachTickOnce(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		st := dbtest.Open(t, dialect)
		ctx := context.Background()
		if _, err := st.QueuePut(ctx, &store.Queue{Name: "q", PollingInterval: 200, MaxWorkers: 1}); err != nil {
			t.Fatal(err)
		}
		start := utc("2026-06-01T00:00:00Z")
		clk := &clock{now: start}
		_, err := st.SchedulePut(ctx, &store.Schedule{
			Name: "s", Cron: "@every 1s", Timezone: "UTC", Category: "cat", URL: "http://127.0.0.1:1/",
			Misfire: store.MisfireAll, MaxCatchup: 100, Overlap: store.OverlapAllow, NextRunAt: start.Add(time.Second),
		})
		if err != nil {
			t.Fatal(err)
		}
		var nodes []*Scheduler
		for i := range 4 {
			nodes = append(nodes, New(Config{Store: st, Node: fmt.Sprint("node-", i), Enqueue: enqueueTo(t, st, "q"), Now: clk.Now}))
		}
		const ticks = 20
		for i := 1; i <= ticks; i++ {
			clk.set(start.Add(time.Duration(i) * time.Second))
			var wg sync.WaitGroup
			for _, n := range nodes {
				wg.Go(func() {
					if _, err := n.RunDue(ctx); err != nil {
						t.Errorf("RunDue: %v", err)
					}
				})
			}
			wg.Wait()
		}
		runs, err := st.ScheduleRuns(ctx, &store.ScheduleRunsParams{Name: "s", Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		if len(runs) != ticks {
			t.Fatalf("%d runs, want %d", len(runs), ticks)
		}
		jobs, err := st.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: "x", Limit: 100, Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if len(jobs) != ticks {
			t.Errorf("%d jobs enqueued, want %d", len(jobs), ticks)
		}
		for i, r := range runs {
			if want := start.Add(time.Duration(ticks-i) * time.Second); !r.Tick.Equal(want) || r.Skipped {
				t.Errorf("run %d: tick %v skipped %t, want %v fired", i, r.Tick, r.Skipped, want)
			}
		}
	})
}

// TestScheduler_UnroutableTickIsRecorded checks that a tick whose category
// has no queue is recorded as skipped with the reason, and that the
// schedule moves on.
func TestScheduler_UnroutableTickIsRecorded(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		st := dbtest.Open(t, dialect)
		ctx := context.Background()
		tick := utc("2026-06-01T00:00:00Z")
		clk := &clock{now: tick.Add(time.Second)}
		_, err := st.SchedulePut(ctx, &store.Schedule{
			Name: "s", Cron: "@hourly", Timezone: "UTC", Category: "nowhere", URL: "http://127.0.0.1:1/",
			Misfire: store.MisfireOnce, MaxCatchup: 100, Overlap: store.OverlapAllow, NextRunAt: tick,
		})
		if err != nil {
			t.Fatal(err)
		}
		s := New(Config{Store: st, Node: "n", Enqueue: enqueueTo(t, st, ""), Now: clk.Now}) // no default queue
		if _, err := s.RunDue(ctx); err != nil {
			t.Fatal(err)
		}
		runs, err := st.ScheduleRuns(ctx, &store.ScheduleRunsParams{Name: "s", Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(runs) != 1 || !runs[0].Skipped || !strings.Contains(runs[0].Reason, `no routing for category "nowhere"`) {
			t.Fatalf("runs = %+v, want one skipped for routing", runs)
		}
		sc, err := st.ScheduleGet(ctx, "s")
		if err != nil {
			t.Fatal(err)
		}
		if want := tick.Add(time.Hour); !sc.NextRunAt.Equal(want) {
			t.Errorf("next_run_at = %v, want %v", sc.NextRunAt, want)
		}
	})
}

func TestScheduler_StopWithoutStart(t *testing.T) {
	t.Parallel()
	s := New(Config{Store: dbtest.Open(t, "sqlite")})
	s.Stop(context.Background())
	s.Stop(context.Background()) // idempotent
	s.Start(context.Background())
}

// TestScheduler_WakeLooksAtOnce runs the loop with a long sleep: a due
// schedule fires only because Wake (as after a PUT) cut the sleep short.
func TestScheduler_WakeLooksAtOnce(t *testing.T) {
	t.Parallel()
	st := dbtest.Open(t, "sqlite")
	ctx := context.Background()
	if _, err := st.QueuePut(ctx, &store.Queue{Name: "q", PollingInterval: 200, MaxWorkers: 1}); err != nil {
		t.Fatal(err)
	}
	s := New(Config{Store: st, Node: "n", Enqueue: enqueueTo(t, st, "q"), MaxSleep: time.Hour})
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer s.Stop(context.Background())
	time.Sleep(100 * time.Millisecond) // let the first look find nothing
	now, err := st.Now(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.SchedulePut(ctx, &store.Schedule{
		Name: "s", Cron: "@daily", Timezone: "UTC", Category: "cat", URL: "http://127.0.0.1:1/",
		Misfire: store.MisfireOnce, MaxCatchup: 100, Overlap: store.OverlapAllow, NextRunAt: now.Truncate(time.Second),
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Wake()
	deadline := time.Now().Add(20 * time.Second)
	for {
		runs, err := st.ScheduleRuns(ctx, &store.ScheduleRunsParams{Name: "s", Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(runs) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the woken loop did not fire the due schedule within 20s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.Stop(context.Background())
}

// syncBuf is a log sink safe for the loop's goroutine.
type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestScheduler_LoopOutlivesDatabaseOutage makes the clock fail for a
// while, as an unreachable database does: the loop warns once, then fires
// the due schedule when the database answers again.
func TestScheduler_LoopOutlivesDatabaseOutage(t *testing.T) {
	t.Parallel()
	st := dbtest.Open(t, "sqlite")
	ctx := context.Background()
	if _, err := st.QueuePut(ctx, &store.Queue{Name: "q", PollingInterval: 200, MaxWorkers: 1}); err != nil {
		t.Fatal(err)
	}
	now, err := st.Now(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.SchedulePut(ctx, &store.Schedule{
		Name: "s", Cron: "@daily", Timezone: "UTC", Category: "cat", URL: "http://127.0.0.1:1/",
		Misfire: store.MisfireOnce, MaxCatchup: 100, Overlap: store.OverlapAllow, NextRunAt: now.Truncate(time.Second),
	})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		fails = 3
		logs  syncBuf
	)
	clk := func(ctx context.Context) (time.Time, error) {
		mu.Lock()
		defer mu.Unlock()
		if fails > 0 {
			fails--
			return time.Time{}, fmt.Errorf("read database clock: %w", store.ErrUnavailable)
		}
		return st.Now(ctx)
	}
	s := New(Config{Store: st, Node: "n", Enqueue: enqueueTo(t, st, "q"), Now: clk, MaxSleep: 50 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	s.Start(ctx)
	defer s.Stop(context.Background())
	deadline := time.Now().Add(20 * time.Second)
	for {
		runs, err := st.ScheduleRuns(ctx, &store.ScheduleRunsParams{Name: "s", Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(runs) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no run 20s after the outage; logs:\n%s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.Stop(context.Background())
	out := logs.String()
	if n := strings.Count(out, "level=WARN"); n != 1 || !strings.Contains(out, "reading due schedules recovered") {
		t.Errorf("logs of a 3-look outage, want one warning and a recovery:\n%s", out)
	}
}

// enqueueTo returns an enqueue service on st whose unrouted categories go
// to defaultQueue ("" for none), as a node's.
func enqueueTo(t *testing.T, st store.Store, defaultQueue string) *enqueue.Service {
	e := enqueue.New(enqueue.Config{Store: st, DefaultQueue: defaultQueue})
	t.Cleanup(func() { e.Stop(context.Background()) })
	return e
}

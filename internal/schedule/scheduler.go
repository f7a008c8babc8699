package schedule

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
	_ "time/tzdata" // time zones work on hosts without a zoneinfo database

	"github.com/rowq/rowq/internal/enqueue"
	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/validate"
)

// Defaults of Config.
const (
	// DefaultMaxSleep is the longest wait between two looks at the due
	// schedules, four fifths of the misfire grace when that is shorter: a
	// tick that no node's look saw coming (its schedule was put on a node
	// that died before it fell due) still fires on time at the next look.
	DefaultMaxSleep     = 4 * time.Second
	DefaultMisfireGrace = 5 * time.Second
	dueBatch            = 100
	// maxTickScan bounds how many missed ticks are walked one by one after
	// a long downtime; beyond it the count in the run history is a floor.
	maxTickScan = 100_000
)

// Store is what the scheduler needs of the database: its schedules and
// clock.
type Store interface {
	store.ScheduleStore
	Now(ctx context.Context) (time.Time, error)
}

// Config configures a Scheduler.
type Config struct {
	Store  Store
	Logger *slog.Logger
	// Node is recorded in the run history as the node that fired.
	Node string
	// Enqueue routes each run's category as for POST /job/{category} (a
	// category it cannot route skips the run) and wakes the queues that
	// got a job.
	Enqueue *enqueue.Service
	// Now is the clock; nil means the database's (Store.Now). Tests inject
	// one to cross clock changes without waiting for them.
	Now func(ctx context.Context) (time.Time, error)
	// MaxSleep bounds the wait between two looks at the due schedules
	// (DefaultMaxSleep when zero). Each look reads the schedules due
	// within MaxSleep, and sleeps until the earliest.
	MaxSleep time.Duration
	// MisfireGrace is how late a tick may fire and still count as on time;
	// an older tick is a misfire, handled by the schedule's policy.
	MisfireGrace time.Duration
}

// Scheduler is the loop every node runs: it fires due schedules. Several
// nodes may run it on one database; each tick fires once.
type Scheduler struct {
	cfg  Config
	log  *slog.Logger
	wake chan struct{}

	startOnce, stopOnce sync.Once
	stop, done          chan struct{}
}

// New returns a scheduler; Start runs it.
func New(cfg Config) *Scheduler {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		st := cfg.Store // looked up when called: New must not need a store
		cfg.Now = func(ctx context.Context) (time.Time, error) { return st.Now(ctx) }
	}
	if cfg.MisfireGrace <= 0 {
		cfg.MisfireGrace = DefaultMisfireGrace
	}
	if cfg.MaxSleep <= 0 {
		cfg.MaxSleep = min(DefaultMaxSleep, cfg.MisfireGrace*4/5)
	}
	return &Scheduler{
		cfg: cfg, log: cfg.Logger.With("component", "schedule"),
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
	}
}

// Start runs the loop in the background until Stop.
func (s *Scheduler) Start(ctx context.Context) error {
	s.startOnce.Do(func() {
		ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		go func() {
			<-s.stop
			cancel()
		}()
		go s.loop(ctx)
	})
	return nil
}

// Stop ends the loop and waits for a firing in progress. It is idempotent
// and safe if Start was never called.
func (s *Scheduler) Stop(context.Context) error {
	s.stopOnce.Do(func() {
		close(s.stop)
		s.startOnce.Do(func() { close(s.done) })
		<-s.done
	})
	return nil
}

// Wake makes the loop look at the due schedules now, e.g. after a
// schedule was put or resumed on this node.
func (s *Scheduler) Wake() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *Scheduler) loop(ctx context.Context) {
	defer close(s.done)
	backoff := s.cfg.MaxSleep
	failing := false
	for {
		sleep, err := s.RunDue(ctx)
		switch {
		case err != nil && ctx.Err() != nil:
			return
		case err != nil:
			// One warning per outage; the ticks it makes late are
			// handled by the misfire policies when it ends.
			if !failing {
				s.log.Warn("read due schedules; retrying", "err", err)
			}
			failing = true
			sleep = backoff
			backoff = min(2*backoff, 5*time.Second)
		case failing:
			s.log.Info("reading due schedules recovered")
			failing = false
			backoff = s.cfg.MaxSleep
		}
		t := time.NewTimer(sleep)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-s.wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// RunDue fires every schedule that is due now and returns how long to wait
// before the next look: until the earliest next_run_at, at most MaxSleep.
// It fails only if the due schedules cannot be read; a schedule that
// cannot be fired is logged and tried again at the next look.
func (s *Scheduler) RunDue(ctx context.Context) (time.Duration, error) {
	now, err := s.cfg.Now(ctx)
	if err != nil {
		return 0, err
	}
	due, err := s.cfg.Store.SchedulesDue(ctx, &store.SchedulesDueParams{Before: now.Add(s.cfg.MaxSleep), Limit: dueBatch})
	if err != nil {
		return 0, err
	}
	sleep := s.cfg.MaxSleep
	fired := 0
	for _, sc := range due {
		if sc.NextRunAt.After(now) {
			sleep = min(sleep, sc.NextRunAt.Sub(now))
			break
		}
		fired++
		// One schedule's failure must not hold up the others: it is
		// logged and tried again at the next look.
		next, err := s.fire(ctx, sc, now)
		if err != nil && ctx.Err() == nil {
			s.log.Warn("fire schedule", "schedule", sc.Name, "tick", sc.NextRunAt, "err", err)
		}
		if !next.IsZero() {
			sleep = min(sleep, max(next.Sub(now), 0))
		}
	}
	if fired == dueBatch {
		sleep = 0 // more may be due
	}
	return sleep, nil
}

// plan decides the runs of a due schedule at now: on-time ticks (at most
// grace late) fire one run each; older ticks are misfires, handled by the
// schedule's policy. job is the job each fired run enqueues.
func plan(sc *store.Schedule, spec Spec, now time.Time, grace time.Duration, job func() *store.JobInsertParams) (runs []*store.ScheduleRunInsert, next time.Time) {
	keep := max(sc.MaxCatchup, 1)
	var (
		missed      []time.Time // the newest missed ticks, at most 2*keep
		nMissed     int
		firstMissed time.Time
		lastMissed  time.Time
		lastDropped time.Time // the newest missed tick no longer in missed
		onTime      []time.Time
		floor       bool // nMissed is a lower bound
	)
	t := sc.NextRunAt
	for scanned := 0; !t.IsZero() && !t.After(now); scanned++ {
		if scanned == maxTickScan {
			// Skip ahead: the ticks in between count as missed, unnamed.
			floor = true
			if len(missed) > 0 {
				lastDropped, missed = missed[len(missed)-1], missed[:0]
			}
			t = spec.Next(now.Add(-grace - time.Second))
			continue
		}
		if now.Sub(t) <= grace {
			onTime = append(onTime, t)
		} else {
			if nMissed == 0 {
				firstMissed = t
			}
			nMissed++
			lastMissed = t
			missed = append(missed, t)
			if len(missed) > 2*keep {
				lastDropped = missed[len(missed)-keep-1]
				missed = append(missed[:0], missed[len(missed)-keep:]...)
			}
		}
		t = spec.Next(t)
	}
	next = t
	if next.IsZero() {
		// No fire time within the search bound: look again in a day.
		next = now.Add(24 * time.Hour).Truncate(time.Second)
	}
	count := fmt.Sprint(nMissed)
	if floor {
		count = "at least " + count
	}
	span := func() string {
		return fmt.Sprintf("%s missed tick(s) from %s to %s", count, firstMissed.Format(time.RFC3339), lastMissed.Format(time.RFC3339))
	}
	if nMissed > 0 {
		switch sc.Misfire {
		case store.MisfireSkip:
			runs = append(runs, &store.ScheduleRunInsert{Tick: lastMissed, Reason: "misfire skip: " + span() + " not run"})
		case store.MisfireAll:
			if len(missed) > keep {
				lastDropped = missed[len(missed)-keep-1]
				missed = missed[len(missed)-keep:]
			}
			if dropped := nMissed - len(missed); dropped > 0 {
				n := fmt.Sprint(dropped)
				if floor {
					n = "at least " + n
				}
				runs = append(runs, &store.ScheduleRunInsert{
					Tick:   lastDropped,
					Reason: fmt.Sprintf("misfire all: %s; the %s oldest not run (max_catchup %d)", span(), n, sc.MaxCatchup),
				})
			}
			for _, m := range missed {
				runs = append(runs, &store.ScheduleRunInsert{Tick: m, Job: job(), Reason: "misfire all: catch-up of a missed tick"})
			}
		default: // once
			if len(onTime) == 0 {
				runs = append(runs, &store.ScheduleRunInsert{Tick: lastMissed, Job: job(), Reason: "misfire once: one run for " + span()})
			} else {
				runs = append(runs, &store.ScheduleRunInsert{Tick: onTime[0], Job: job(), Reason: "misfire once: also stands for " + span()})
				onTime = onTime[1:]
			}
		}
	}
	for _, o := range onTime {
		runs = append(runs, &store.ScheduleRunInsert{Tick: o, Job: job()})
	}
	return runs, next
}

// fire fires one due schedule and returns its next fire time (zero if it
// failed). Losing the race for the tick to another node is not an error.
func (s *Scheduler) fire(ctx context.Context, sc *store.Schedule, now time.Time) (time.Time, error) {
	loc, err := time.LoadLocation(sc.Timezone)
	if err != nil {
		return time.Time{}, fmt.Errorf("schedule %q: load time zone %q: %w", sc.Name, sc.Timezone, err)
	}
	spec, err := Parse(sc.Cron, loc)
	if err != nil {
		return time.Time{}, fmt.Errorf("schedule %q: parse cron %q: %w", sc.Name, sc.Cron, err)
	}
	queue, unroutable, err := s.route(ctx, sc)
	if err != nil {
		return time.Time{}, fmt.Errorf("schedule %q: %w", sc.Name, err)
	}
	runs, next := plan(sc, spec, now, s.cfg.MisfireGrace, func() *store.JobInsertParams { return jobOf(sc, queue) })
	if unroutable != "" {
		for _, r := range runs {
			if r.Job != nil {
				r.Job, r.Reason = nil, unroutable
			}
		}
	}
	fired, err := s.cfg.Store.ScheduleFire(ctx, &store.ScheduleFireParams{
		Name: sc.Name, Expect: sc.NextRunAt, Next: next, Node: s.cfg.Node,
		SkipOverlap: sc.Overlap == store.OverlapSkip, Runs: runs,
	})
	if errors.Is(err, store.ErrNotFound) {
		s.log.Debug("tick fired elsewhere or schedule changed", "schedule", sc.Name, "tick", sc.NextRunAt)
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, err
	}
	woke := false
	for _, r := range fired {
		s.log.Debug("schedule fired", "schedule", sc.Name, "tick", r.Tick, "job_id", r.JobID, "skipped", r.Skipped, "reason", r.Reason)
		if !r.Skipped && !woke {
			s.cfg.Enqueue.Due(r.Queue)
			woke = true
		}
	}
	return next, nil
}

// jobOf is the job a run of the schedule enqueues in queue.
func jobOf(sc *store.Schedule, queue string) *store.JobInsertParams {
	return &store.JobInsertParams{
		Queue: queue, Category: sc.Category, URL: sc.URL, Payload: sc.Payload,
		Timeout: sc.Timeout, MaxRetries: sc.MaxRetries, RetryDelay: sc.RetryDelay,
		JobOptions: store.JobOptions{ConcurrencyKey: sc.ConcurrencyKey, ConcurrencyLimit: sc.ConcurrencyLimit, Ordered: sc.Ordered},
	}
}

// route finds the queue of the schedule's category as POST /job/{category}
// does. When there is none, or the queue cannot take the schedule's job
// (no url on a push queue, a concurrency key on a pull queue:
// validate.JobQueue), it returns why in unroutable, so that the run is
// recorded as skipped with that reason.
func (s *Scheduler) route(ctx context.Context, sc *store.Schedule) (queue, unroutable string, err error) {
	d, err := s.cfg.Enqueue.Route(ctx, sc.Category)
	if ue := (*enqueue.UnroutableError)(nil); errors.As(err, &ue) {
		return "", "routing: " + ue.Error(), nil
	}
	if err == nil {
		if err := validate.JobQueue(sc.URL, sc.ConcurrencyKey, d.Queue, d.Pull); err != nil {
			return "", err.Error(), nil
		}
	}
	return d.Queue, "", err
}

// NextRuns returns the n fire times of spec after t.
func NextRuns(spec Spec, t time.Time, n int) []time.Time {
	var out []time.Time
	for range n {
		t = spec.Next(t)
		if t.IsZero() {
			break
		}
		out = append(out, t)
	}
	return out
}

// ErrUnroutable means a schedule's category has no queue to go to.
var ErrUnroutable = errors.New("unroutable")

// Trigger enqueues one run of the schedule now, outside its ticks. It
// ignores the overlap policy (an operator asked for this run) and fails
// with ErrUnroutable when the category cannot be routed.
func (s *Scheduler) Trigger(ctx context.Context, sc *store.Schedule) (*store.ScheduleRun, error) {
	queue, unroutable, err := s.route(ctx, sc)
	if err != nil {
		return nil, fmt.Errorf("trigger schedule %q: %w", sc.Name, err)
	}
	if unroutable != "" {
		return nil, fmt.Errorf("%w: %s", ErrUnroutable, unroutable)
	}
	r, err := s.cfg.Store.ScheduleTrigger(ctx, &store.ScheduleTriggerParams{Name: sc.Name, Node: s.cfg.Node, Job: jobOf(sc, queue)})
	if err != nil {
		return nil, err
	}
	s.cfg.Enqueue.Due(queue)
	return r, nil
}

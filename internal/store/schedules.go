package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// ScheduleStore is the store's part for cron schedules and their run
// history.
type ScheduleStore interface {
	// SchedulePut creates the schedule or replaces it, and returns it as
	// stored. NextRunAt is stored as given, except that replacing an
	// unpaused schedule with the same Cron and Timezone keeps its
	// next_run_at (decided in the statement, so a tick fired meanwhile is
	// not put back).
	SchedulePut(ctx context.Context, s *Schedule) (*Schedule, error)
	// ScheduleGet returns one schedule or ErrNotFound.
	ScheduleGet(ctx context.Context, name string) (*Schedule, error)
	// ScheduleList returns up to p.Limit schedules named after p.After, by
	// name.
	ScheduleList(ctx context.Context, p *ScheduleListParams) ([]*Schedule, error)
	// ScheduleDelete removes the schedule and its run history and returns
	// the schedule, or ErrNotFound.
	ScheduleDelete(ctx context.Context, name string) (*Schedule, error)
	// SchedulePause sets paused, and when p.NextRunAt is not nil also
	// next_run_at, and returns the schedule, or ErrNotFound.
	SchedulePause(ctx context.Context, p *SchedulePauseParams) (*Schedule, error)
	// SchedulesDue returns up to p.Limit unpaused schedules whose
	// next_run_at is at or before p.Before, earliest first.
	SchedulesDue(ctx context.Context, p *SchedulesDueParams) ([]*Schedule, error)
	// ScheduleFire fires a tick in one transaction: it moves next_run_at
	// from p.Expect to p.Next (a compare-and-set on an unpaused schedule),
	// then inserts p.Runs in order, each with its job. A run whose tick
	// already has a run is left out (its tick fired before). With p.SkipOverlap a
	// run whose previous run's job is still stored (waiting or grabbed) is
	// recorded as skipped instead. It returns the runs as stored, or
	// ErrNotFound if next_run_at was not p.Expect (another node fired the
	// tick, or the schedule changed) or another transaction holds the
	// schedule's row (a node firing the tick, perhaps frozen half-way, or
	// a change in progress): it does not wait for that transaction.
	ScheduleFire(ctx context.Context, p *ScheduleFireParams) ([]*ScheduleRun, error)
	// ScheduleTrigger inserts a run of kind "trigger" at the database's now
	// with its job, outside the ticks; ErrNotFound if the schedule does not
	// exist.
	ScheduleTrigger(ctx context.Context, p *ScheduleTriggerParams) (*ScheduleRun, error)
	// ScheduleRuns returns up to p.Limit runs of the schedule with an id
	// below p.Before (0: from the newest), newest first.
	ScheduleRuns(ctx context.Context, p *ScheduleRunsParams) ([]*ScheduleRun, error)
}

// Misfire policies: what a schedule does with ticks missed while no node
// could fire them.
const (
	MisfireSkip = "skip" // fire none of them
	MisfireOnce = "once" // fire one run for all of them
	MisfireAll  = "all"  // fire each, up to MaxCatchup
)

// Overlap policies.
const (
	OverlapAllow = "allow" // fire whatever the previous run's job does
	OverlapSkip  = "skip"  // skip a tick while the previous run's job is stored
)

// Run kinds.
const (
	RunTick    = "tick"    // a tick of the cron spec
	RunTrigger = "trigger" // an explicit trigger, outside the ticks
)

// Schedule is a stored cron schedule and the job it enqueues.
type Schedule struct {
	Name       string
	Cron       string
	Timezone   string // IANA name
	Category   string
	URL        string
	Payload    json.RawMessage // nil when the job has none
	MaxRetries int
	RetryDelay int // seconds
	Timeout    int // seconds, 0 = none
	// ConcurrencyKey, ConcurrencyLimit and Ordered go to every job the
	// schedule enqueues (store.JobOptions).
	ConcurrencyKey   string
	ConcurrencyLimit int
	Ordered          bool
	Misfire          string
	MaxCatchup       int
	Overlap          string
	Paused           bool
	NextRunAt        time.Time
	CreatedAt        time.Time
	UpdatedAt        time.Time
}

// ScheduleListParams are the arguments of Store.ScheduleList.
type ScheduleListParams struct {
	After string // cursor: the last name of the previous page
	Limit int
}

// SchedulePauseParams are the arguments of Store.SchedulePause.
type SchedulePauseParams struct {
	Name      string
	Paused    bool
	NextRunAt *time.Time // nil: keep
}

// SchedulesDueParams are the arguments of Store.SchedulesDue.
type SchedulesDueParams struct {
	Before time.Time
	Limit  int
}

// ScheduleRunInsert is one run to record when a tick fires.
type ScheduleRunInsert struct {
	Tick time.Time
	// Job is the job to enqueue; nil records a skipped run with Reason.
	Job *JobInsertParams
	// Reason says why the run was skipped, or notes how a run stands for
	// missed ticks.
	Reason string
}

// ScheduleFireParams are the arguments of Store.ScheduleFire.
type ScheduleFireParams struct {
	Name        string
	Expect      time.Time // next_run_at as read
	Next        time.Time // next_run_at to set
	Node        string
	SkipOverlap bool
	Runs        []*ScheduleRunInsert
}

// ScheduleTriggerParams are the arguments of Store.ScheduleTrigger.
type ScheduleTriggerParams struct {
	Name string
	Node string
	Job  *JobInsertParams
}

// ScheduleRunsParams are the arguments of Store.ScheduleRuns.
type ScheduleRunsParams struct {
	Name   string
	Before int64 // cursor: the last id of the previous page; 0 = newest
	Limit  int
}

// ScheduleRun is one entry of a schedule's run history.
type ScheduleRun struct {
	ID       int64
	Schedule string
	Kind     string    // RunTick or RunTrigger
	Tick     time.Time // the tick it stands for; a trigger's is when it fired
	FiredAt  time.Time // database time of the firing transaction
	Node     string
	JobID    int64  // 0 when skipped
	Queue    string // queue of the job, "" when skipped
	Skipped  bool
	Reason   string
}

// ScheduleRunsKept bounds a schedule's run history: firing a tick prunes
// the older runs, so that an @every 1s schedule does not grow its history
// without end.
const ScheduleRunsKept = 1000

// OverlapReason is the reason recorded for a run skipped by overlap skip.
func OverlapReason(jobID int64) string {
	return fmt.Sprintf("overlap: job %d of the previous run is still waiting or running", jobID)
}

package store

import (
	"context"
	"time"
)

// StatsStore keeps queue statistics that are true across every node
// sharing the database and survive restarts, without a write per job: each
// node counts in memory and adds its counts to its own row per queue about
// once a second; a read sums the rows.
type StatsStore interface {
	// StatsAdd adds p.Node's counter deltas to its row of each queue and
	// sets the row's gauges (busy workers, rates) and updated_at to now.
	StatsAdd(ctx context.Context, p *StatsAddParams) error
	// StatsGet returns the statistics of every queue that exists, keyed
	// by queue name; or, when p.Queues is set, of those of them that
	// exist, so that a page of queues reads only its own rows; or, when
	// p.Queue is set, of that queue alone.
	StatsGet(ctx context.Context, p *StatsGetParams) (map[string]*QueueStats, error)
	// StatsFold adds the rows of nodes that are not registered and have
	// not written for p.OlderThan into the queue's node-less row ("") and
	// deletes them, so that restarts do not grow the table without bound.
	// It returns how many rows it folded.
	StatsFold(ctx context.Context, p *StatsFoldParams) (int64, error)
}

// StatsCounters are the monotonic counters of a queue.
type StatsCounters struct {
	Pushes            int64 // jobs accepted by POST /job
	Pops              int64 // jobs grabbed for delivery (each attempt)
	Successes         int64 // deliveries answered "success"
	Failures          int64 // deliveries that did not succeed (retried or not)
	PermanentFailures int64 // jobs moved to the failure log
	Completes         int64 // jobs finished: successes + permanent failures
	ElapsedMs         int64 // time spent in deliveries, milliseconds
	// WaitMs is how long the jobs grabbed (Pops) had waited since they
	// were due (their next_try), summed, in milliseconds: the
	// enqueue→delivery latency of each attempt, whose mean is
	// WaitMs/Pops.
	WaitMs int64
	// Cancels counts jobs cancelled (POST /queue/{name}/job/{id}/cancel).
	Cancels int64
}

// Add adds d to c.
func (c *StatsCounters) Add(d *StatsCounters) {
	c.Pushes += d.Pushes
	c.Pops += d.Pops
	c.Successes += d.Successes
	c.Failures += d.Failures
	c.PermanentFailures += d.PermanentFailures
	c.Completes += d.Completes
	c.ElapsedMs += d.ElapsedMs
	c.WaitMs += d.WaitMs
	c.Cancels += d.Cancels
}

// IsZero reports whether every counter is zero.
func (c *StatsCounters) IsZero() bool { return *c == StatsCounters{} }

// StatsDelta is what one node adds to its row of one queue.
type StatsDelta struct {
	Queue string
	StatsCounters
	// Gauges, set rather than added: deliveries in flight on the node, and
	// its recent rates.
	BusyWorkers     int
	PushesPerSecond float64
	PopsPerSecond   float64
}

// StatsAddParams are the arguments of StatsStore.StatsAdd.
type StatsAddParams struct {
	Node   string
	Deltas []*StatsDelta
}

// StatsGetParams are the arguments of StatsStore.StatsGet.
type StatsGetParams struct {
	Queue string // "" for every queue
	// Queues, when not empty, are the queues to read (and Queue is not
	// looked at): a page's worth, as MySQL and SQLite bind each name.
	Queues []string
	// Fresh is how recently a row must have been written for its gauges to
	// count: a node that stopped writing no longer has busy workers or a
	// rate.
	Fresh time.Duration
}

// Names returns the queues p asks for: Queues, else Queue alone, else
// nil for every queue.
func (p *StatsGetParams) Names() []string {
	switch {
	case len(p.Queues) > 0:
		return p.Queues
	case p.Queue != "":
		return []string{p.Queue}
	}
	return nil
}

// QueueStats are a queue's statistics summed over every node.
type QueueStats struct {
	Queue string
	StatsCounters
	BusyWorkers     int     // over fresh rows
	PushesPerSecond float64 // over fresh rows
	PopsPerSecond   float64 // over fresh rows
	Outstanding     int64   // jobs stored in the queue: waiting, deferred, blocked, grabbed or leased
	MaxWorkers      int
	Active          bool // a live node leads the queue
}

// StatsFoldParams are the arguments of StatsStore.StatsFold.
type StatsFoldParams struct {
	OlderThan time.Duration
}

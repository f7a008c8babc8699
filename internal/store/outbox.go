package store

import (
	"context"
	"time"
)

// OutboxStore serves the transactional outbox: applications INSERT rows
// into rowq_outbox in their own transactions (its columns are a public
// contract: docs/outbox.md), and the one node that moves the outbox turns
// the committed rows into jobs, or into rows of rowq_outbox_rejects when
// they are not valid jobs. A row is moved in the transaction that deletes
// it, so it becomes one job (or one reject) exactly once, whatever
// happens to the node that moves it.
type OutboxStore interface {
	// OutboxInsert inserts the rows (ID and CreatedAt ignored) in one
	// transaction, as an application does with its own INSERT. rowq does
	// not call it; its tests and `rowq bench --outbox` do.
	OutboxInsert(ctx context.Context, rows []*OutboxRow) error
	// OutboxRead returns up to limit rows of the outbox, lowest id first.
	// It reads committed rows only and waits for no transaction: rows of
	// transactions still open are left for a later read, whatever their
	// ids.
	OutboxRead(ctx context.Context, limit int) ([]*OutboxRow, error)
	// OutboxMove moves rows in one transaction: it deletes those of the
	// rows p names that are still in the outbox and that no other
	// transaction holds (a row another mover holds is skipped, not waited
	// for), inserts the jobs of those deleted (as JobsPush does: a unique
	// key held by a pending job stores no job) and their rejects, and
	// commits. Nothing of it is stored if it fails.
	OutboxMove(ctx context.Context, p *OutboxMoveParams) (*OutboxMoved, error)
	// OutboxRejects returns up to p.Limit rejects with ids greater than
	// p.After, by id.
	OutboxRejects(ctx context.Context, p *OutboxRejectsParams) ([]*OutboxReject, error)
	// OutboxRejectsCount returns the number of rejects kept.
	OutboxRejectsCount(ctx context.Context) (int64, error)
	// OutboxListen calls ready once it listens, then fn after each commit
	// of a transaction that inserted into the outbox, on any connection,
	// until ctx ends (nil) or the connection fails. A dialect that cannot
	// announce inserts (MySQL, SQLite: the mover probes) returns
	// errors.ErrUnsupported at once.
	OutboxListen(ctx context.Context, ready func(), fn func()) error
	// OutboxWaiting tells the database whether the moving node waits for
	// OutboxListen's announcement of the next commit. PostgreSQL announces
	// a commit only while it does: each announcement (NOTIFY) serializes
	// the commits that send one on a server-wide lock, which the
	// applications' transactions should pay only while the outbox is
	// idle. A dialect that announces nothing does nothing.
	OutboxWaiting(ctx context.Context, waiting bool) error
}

// OutboxRow is a row of rowq_outbox, as an application wrote it. Every
// column but the id, the category and the insert time may be NULL (nil):
// the job then takes the default of POST /job.
type OutboxRow struct {
	ID         int64
	Category   string
	URL        *string
	Payload    *string // JSON text; a JSON string is sent raw
	RunAfter   *int    // seconds
	MaxRetries *int
	RetryDelay *int // seconds
	Timeout    *int // seconds
	Priority   *int
	UniqueKey  *string
	// TraceParent and TraceState are the job's W3C trace context, as the
	// traceparent and tracestate fields of POST /job take it.
	TraceParent *string
	TraceState  *string
	// ConcurrencyKey, ConcurrencyLimit and Ordered are the job's per-key
	// concurrency, as the fields of POST /job take them.
	ConcurrencyKey   *string
	ConcurrencyLimit *int
	Ordered          *bool
	CreatedAt        time.Time // when the row was inserted (not committed)
}

// OutboxJob is a job made of an outbox row.
type OutboxJob struct {
	OutboxID int64
	Job      *JobInsertParams
}

// OutboxRejectParams is an outbox row refused, and why.
type OutboxRejectParams struct {
	Row    *OutboxRow
	Reason string
}

// OutboxMoveParams are the arguments of OutboxStore.OutboxMove: the
// outbox rows to move, each once, as a job or as a reject.
type OutboxMoveParams struct {
	Jobs    []OutboxJob
	Rejects []OutboxRejectParams
}

// OutboxMoved is the outcome of OutboxStore.OutboxMove.
type OutboxMoved struct {
	// Jobs are the jobs of the rows it deleted, in the order given, and
	// Pushed each one's outcome, as JobsPush reports it.
	Jobs   []*JobInsertParams
	Pushed []JobPushed
	// Rejected counts the rejects it stored.
	Rejected int
}

// OutboxReject is a row of rowq_outbox_rejects: an outbox row that is not
// a valid job, as it was, and why.
type OutboxReject struct {
	ID         int64
	Row        OutboxRow // Row.ID is the row's id in the outbox
	Reason     string
	RejectedAt time.Time
}

// OutboxRejectsParams are the arguments of OutboxStore.OutboxRejects.
type OutboxRejectsParams struct {
	After int64 // ids greater than this; 0 for the first page
	Limit int
}

// OutboxIDs returns the outbox ids p names, jobs first.
func (p *OutboxMoveParams) OutboxIDs() []int64 {
	ids := make([]int64, 0, len(p.Jobs)+len(p.Rejects))
	for _, j := range p.Jobs {
		ids = append(ids, j.OutboxID)
	}
	for _, r := range p.Rejects {
		ids = append(ids, r.Row.ID)
	}
	return ids
}

// OutboxReasonMax bounds the length of a reject's reason, in bytes.
const OutboxReasonMax = 1000

// OutboxHeld returns the jobs and rejects of p whose outbox rows are in
// held (the rows a move holds), in the order p gives them. Dialects move
// these.
func OutboxHeld(p *OutboxMoveParams, held []int64) ([]*JobInsertParams, []OutboxRejectParams) {
	in := make(map[int64]bool, len(held))
	for _, id := range held {
		in[id] = true
	}
	var jobs []*JobInsertParams
	for _, j := range p.Jobs {
		if in[j.OutboxID] {
			jobs = append(jobs, j.Job)
		}
	}
	var rejects []OutboxRejectParams
	for _, r := range p.Rejects {
		if in[r.Row.ID] {
			rejects = append(rejects, r)
		}
	}
	return jobs, rejects
}

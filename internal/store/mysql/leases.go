package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/sqldb"
)

// heldBy is the condition that the grab a lease token names still holds
// the job: delivered (grabbed) or accepted (leased). Arguments: id, grabs.
const heldBy = `id = ? AND grabs = ? AND state IN ('grabbed', 'leased')`

// leaseExpired is heldBy for a lease that has run out.
const leaseExpired = `id = ? AND grabs = ? AND state = 'leased' AND grabbed_until < NOW(6)`

// JobLease moves a job held by grab p.Grabs to leased until NOW(6) +
// p.Lease, in one short transaction that reads the expiry it wrote.
func (s *Store) JobLease(ctx context.Context, p *store.JobLeaseParams) (time.Time, error) {
	var until time.Time
	err := retry(ctx, func() error {
		return s.inTx(ctx, func(tx *sql.Tx) error {
			n, err := sqldb.Affected(tx.ExecContext(ctx, `/* rowq:jobs.lease */ UPDATE jobs FORCE INDEX (PRIMARY)
				SET state = 'leased', grabbed_until = NOW(6) + INTERVAL ? MICROSECOND,
					progress = COALESCE(?, progress), progress_message = COALESCE(?, progress_message)
				WHERE `+heldBy, p.Lease.Microseconds(), p.Progress, p.Message, p.ID, p.Grabs))
			if err != nil {
				return err
			}
			if n == 0 {
				return store.ErrNotFound
			}
			return tx.QueryRowContext(ctx, `/* rowq:jobs.lease */ SELECT grabbed_until FROM jobs WHERE id = ?`, p.ID).Scan(&until)
		})
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("lease job %d for grab %d: %w", p.ID, p.Grabs, mapErr(err))
	}
	return until, nil
}

// JobHeld returns the job if grab grabs holds it.
func (s *Store) JobHeld(ctx context.Context, id int64, grabs int) (*store.Job, error) {
	var j *store.Job
	err := retry(ctx, func() (err error) {
		j, err = scanJob(s.db.QueryRowContext(ctx, `/* rowq:jobs.held */ SELECT `+jobCols+` FROM jobs WHERE `+heldBy, id, grabs))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("get job %d held by grab %d: %w", id, grabs, mapErr(err))
	}
	return j, nil
}

// JobFinish locks the job if grab p.Grabs holds it, writes the outcome and
// records the result, in one short transaction; a job with a flow that
// ends (deleted or failed) has its flow applied there too.
func (s *Store) JobFinish(ctx context.Context, p *store.JobFinishParams) (string, error) {
	guard := heldBy
	if p.Expired {
		guard = leaseExpired
	}
	var (
		queue string
		done  store.FlowDone
	)
	err := retry(ctx, func() error {
		done = store.FlowDone{}
		return s.inTx(ctx, func(tx *sql.Tx) error {
			var (
				now  time.Time
				keep sql.NullInt64
			)
			j, err := scanJob(tx.QueryRowContext(ctx, `/* rowq:jobs.finish */ SELECT `+jobCols+`, NOW(6), `+keepOf+`
				FROM jobs WHERE `+guard+` FOR UPDATE`, p.ID, p.Grabs), &now, &keep)
			if err != nil {
				return err
			}
			queue = j.Queue
			end := finishEnded(j, p)
			if keep.Int64 > 0 && end != nil {
				if err := insertFinished(ctx, tx, store.FinishedOf(j, end.Status, p.Message, p.Result, now)); err != nil {
					return err
				}
			}
			switch p.Outcome {
			case store.FinishDelete:
				_, err = tx.ExecContext(ctx, `/* rowq:jobs.finish */ DELETE FROM jobs WHERE id = ?`, p.ID)
				if err == nil && j.Ordered {
					err = forgetOrdered(ctx, tx, p.ID)
				}
			case store.FinishRetry:
				_, err = tx.ExecContext(ctx, `/* rowq:jobs.finish */ UPDATE jobs SET state = 'waiting', fail_count = fail_count + 1,
					next_try = NOW(6) + INTERVAL ? MICROSECOND, grabbed_by = '', progress = NULL, progress_message = NULL
					WHERE id = ?`, p.Delay.Microseconds(), p.ID)
			case store.FinishFail:
				_, err = moveToFailed(ctx, tx, j, now, p.Status, p.Code, p.Message)
			default:
				err = fmt.Errorf("unknown outcome %q", p.Outcome)
			}
			if err == nil && end != nil {
				done, err = s.endFlows(ctx, tx, *end)
			}
			if err != nil || p.Expired {
				return err
			}
			_, err = tx.ExecContext(ctx, `/* rowq:jobs.finish */ INSERT INTO job_results (job_id, grabs, status, created_at)
				VALUES (?, ?, ?, NOW(6)) ON DUPLICATE KEY UPDATE status = VALUES(status), created_at = VALUES(created_at)`,
				p.ID, p.Grabs, p.Status)
			return err
		})
	})
	if err != nil {
		return "", fmt.Errorf("finish job %d of grab %d: %w", p.ID, p.Grabs, mapErr(err))
	}
	s.FlowHook.Done(done)
	return queue, nil
}

// finishEnded is how JobFinish ends j: nil for a retry, which is no end.
func finishEnded(j *store.Job, p *store.JobFinishParams) *store.FlowEnded {
	switch p.Outcome {
	case store.FinishDelete:
		return &store.FlowEnded{Job: j, Status: store.FinishedSucceeded, Message: p.Message, Result: p.Result}
	case store.FinishFail:
		return &store.FlowEnded{Job: j, Status: store.FinishedFailed, Message: p.Message}
	}
	return nil
}

// JobResult returns the result recorded for the job's grab.
func (s *Store) JobResult(ctx context.Context, id int64, grabs int) (string, error) {
	var status string
	err := retry(ctx, func() error {
		return s.db.QueryRowContext(ctx, `/* rowq:jobs.result */ SELECT status FROM job_results WHERE job_id = ? AND grabs = ?`, id, grabs).Scan(&status)
	})
	if err != nil {
		return "", fmt.Errorf("get result of job %d, grab %d: %w", id, grabs, mapErr(err))
	}
	return status, nil
}

// JobResultsPurge deletes the results recorded more than age ago.
func (s *Store) JobResultsPurge(ctx context.Context, age time.Duration) (int64, error) {
	var n int64
	err := retry(ctx, func() (err error) {
		n, err = sqldb.Affected(s.db.ExecContext(ctx, `/* rowq:jobs.results_purge */ DELETE FROM job_results
			WHERE created_at < NOW(6) - INTERVAL ? MICROSECOND`, age.Microseconds()))
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("purge job results: %w", mapErr(err))
	}
	return n, nil
}

// JobsLeaseExpired returns jobs of p.Queue whose lease has run out, from
// the queue's leased range of jobs_fetch, with a plain read.
func (s *Store) JobsLeaseExpired(ctx context.Context, p *store.JobsLeaseExpiredParams) ([]*store.Job, error) {
	var jobs []*store.Job
	err := retry(ctx, func() (err error) {
		jobs, err = sqldb.QueryAll(ctx, s.db, func(sc sqldb.Scanner) (*store.Job, error) { return scanJob(sc) },
			`/* rowq:jobs.lease_expired */ SELECT `+jobCols+` FROM jobs FORCE INDEX (jobs_fetch)
			WHERE queue_name = ? AND state = 'leased' AND grabbed_until < NOW(6) LIMIT ?`, p.Queue, p.Limit)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("find expired leases of queue %q: %w", p.Queue, mapErr(err))
	}
	return jobs, nil
}

// JobsLeased returns the id and grab count of every leased job of queue,
// from the queue's leased range of jobs_fetch, with a plain read.
func (s *Store) JobsLeased(ctx context.Context, queue string) ([]store.JobGrab, error) {
	var out []store.JobGrab
	err := retry(ctx, func() (err error) {
		out, err = sqldb.QueryAll(ctx, s.db, scanJobGrab, `/* rowq:jobs.leased */ SELECT id, grabs FROM jobs FORCE INDEX (jobs_fetch)
			WHERE queue_name = ? AND state = 'leased'`, queue)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list leased jobs of queue %q: %w", queue, mapErr(err))
	}
	return out, nil
}

func scanJobGrab(sc sqldb.Scanner) (store.JobGrab, error) {
	var g store.JobGrab
	err := sc.Scan(&g.ID, &g.Grabs)
	return g, err
}

// JobCancel removes a job of the queue and, if it was grabbed or leased,
// records its grab's result as cancelled, in one short transaction; a job
// with a flow has it applied there too (cancelled).
func (s *Store) JobCancel(ctx context.Context, queue string, id int64) (*store.Job, error) {
	var (
		j    *store.Job
		done store.FlowDone
	)
	err := retry(ctx, func() error {
		done = store.FlowDone{}
		return s.inTx(ctx, func(tx *sql.Tx) error {
			var (
				err error
				now time.Time
			)
			j, err = scanJob(tx.QueryRowContext(ctx, `/* rowq:jobs.cancel */ SELECT `+jobCols+`, NOW(6)
				FROM jobs WHERE id = ? AND queue_name = ? FOR UPDATE`, id, queue), &now)
			if err != nil {
				return err
			}
			keep, err := keepFinished(ctx, tx, queue)
			if err == nil && keep {
				err = insertFinished(ctx, tx, store.FinishedOf(j, store.FinishedCancelled, store.ResultCancelled, nil, now))
			}
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `/* rowq:jobs.cancel */ DELETE FROM jobs WHERE id = ?`, id); err != nil {
				return err
			}
			if j.Ordered {
				if err := forgetOrdered(ctx, tx, id); err != nil {
					return err
				}
			}
			done, err = s.endFlows(ctx, tx, store.FlowEnded{Job: j, Status: store.FinishedCancelled, Message: store.ResultCancelled})
			if err != nil || j.State == store.StateWaiting || j.State == store.StateBlocked {
				return err
			}
			_, err = tx.ExecContext(ctx, `/* rowq:jobs.cancel */ INSERT INTO job_results (job_id, grabs, status, created_at)
				VALUES (?, ?, ?, NOW(6)) ON DUPLICATE KEY UPDATE status = VALUES(status), created_at = VALUES(created_at)`,
				id, j.Grabs, store.ResultCancelled)
			return err
		})
	})
	if err != nil {
		return nil, fmt.Errorf("cancel job %d of queue %q: %w", id, queue, mapErr(err))
	}
	s.FlowHook.Done(done)
	return j, nil
}

// JobsSucceed locks the jobs the grabs hold by primary key, deletes them
// and records their results, in one short transaction of three
// statements; the jobs with a flow are left by the DELETE (flow = 0) and
// ended through succeedFlow.
func (s *Store) JobsSucceed(ctx context.Context, p *store.JobsSucceedParams) ([]string, error) {
	if len(p.Grabs) == 0 {
		return nil, nil
	}
	ids := make([]int64, len(p.Grabs))
	for i, g := range p.Grabs {
		ids[i] = g.ID
	}
	var (
		out  []string
		done store.FlowDone
	)
	err := retry(ctx, func() error {
		out = make([]string, len(p.Grabs))
		done = store.FlowDone{}
		return s.inTx(ctx, func(tx *sql.Tx) error {
			found, err := succeedLock(ctx, tx, ids)
			if err != nil {
				return err
			}
			var (
				del, results []any
				ordered      []int64
				kept         = map[int64]store.FinishNote{}
				notes        = map[int64]store.FinishNote{}
			)
			for i, g := range p.Grabs {
				if h, ok := found[g.ID]; ok && h.grabs == g.Grabs {
					out[i] = h.queue
					if h.ordered {
						ordered = append(ordered, g.ID)
					}
					note := store.FinishNote{ID: g.ID}
					if p.Notes != nil {
						note = p.Notes[i]
					}
					notes[g.ID] = note
					if h.keep {
						kept[g.ID] = note
					}
					delete(found, g.ID) // the same grab twice: once
					del = append(del, g.ID)
					results = append(results, g.ID, g.Grabs, p.Status)
				}
			}
			if len(del) == 0 {
				return nil
			}
			if err := succeedKept(ctx, tx, kept); err != nil {
				return err
			}
			if done, err = s.succeedDelete(ctx, tx, del, notes); err != nil {
				return err
			}
			if err := forgetOrdered(ctx, tx, ordered...); err != nil {
				return err
			}
			_, err = tx.ExecContext(ctx, `/* rowq:jobs.succeed */ INSERT INTO job_results (job_id, grabs, status, created_at) VALUES `+
				strings.TrimSuffix(strings.Repeat("(?, ?, ?, NOW(6)), ", len(del)), ", ")+
				` ON DUPLICATE KEY UPDATE status = VALUES(status), created_at = VALUES(created_at)`, results...)
			return err
		})
	})
	if err != nil {
		return nil, fmt.Errorf("complete %d leased jobs: %w", len(p.Grabs), mapErr(err))
	}
	s.FlowHook.Done(done)
	return out, nil
}

// succeedHeld is a job JobsSucceed locked.
type succeedHeld struct {
	grabs   int
	queue   string
	ordered bool
	keep    bool
}

// succeedLock locks those of ids that are grabbed or leased.
func succeedLock(ctx context.Context, tx *sql.Tx, ids []int64) (map[int64]succeedHeld, error) {
	found := map[int64]succeedHeld{}
	rows, err := tx.QueryContext(ctx, `/* rowq:jobs.succeed */ SELECT id, grabs, queue_name, ordered, `+keepOf+` FROM jobs FORCE INDEX (PRIMARY)
		WHERE id IN (`+sqldb.Placeholders(len(ids))+`) AND state IN ('grabbed', 'leased') FOR UPDATE`, idArgs(ids)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var h succeedHeld
		var keep sql.NullInt64
		if err := rows.Scan(&id, &h.grabs, &h.queue, &h.ordered, &keep); err != nil {
			return nil, err
		}
		h.keep = keep.Int64 > 0
		found[id] = h
	}
	return found, rows.Err()
}

// succeedDelete deletes the jobs del, which tx holds: those without a
// flow by one DELETE, as ever, and, when it left some, the others, whose
// flows it applies with their notes.
func (s *Store) succeedDelete(ctx context.Context, tx *sql.Tx, del []any, notes map[int64]store.FinishNote) (store.FlowDone, error) {
	n, err := sqldb.Affected(tx.ExecContext(ctx, `/* rowq:jobs.succeed */ DELETE jobs FROM jobs FORCE INDEX (PRIMARY) WHERE id IN (`+
		sqldb.Placeholders(len(del))+`) AND flow = 0`, del...))
	if err != nil || n == int64(len(del)) {
		return store.FlowDone{}, err
	}
	jobs, err := sqldb.QueryAll(ctx, tx, func(sc sqldb.Scanner) (*store.Job, error) { return scanJob(sc) },
		`/* rowq:jobs.succeed_flow */ SELECT `+jobCols+` FROM jobs FORCE INDEX (PRIMARY)
		WHERE id IN (`+sqldb.Placeholders(len(del))+`) AND flow <> 0 ORDER BY id FOR UPDATE`, del...)
	if err != nil || len(jobs) == 0 {
		return store.FlowDone{}, err
	}
	ended := make([]store.FlowEnded, len(jobs))
	for i, j := range jobs {
		note := notes[j.ID]
		ended[i] = store.FlowEnded{Job: j, Status: store.FinishedSucceeded, Message: note.Message, Result: note.Result}
	}
	if err := deleteJobs(ctx, tx, jobs); err != nil {
		return store.FlowDone{}, err
	}
	return s.endFlows(ctx, tx, ended...)
}

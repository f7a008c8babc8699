package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/sqldb"
)

const finishedCols = "id, queue_name, category, url, payload, status, attempts, created_at, started_at, finished_at, message, result"

func scanFinished(sc sqldb.Scanner) (*store.FinishedJob, error) {
	var (
		f               store.FinishedJob
		payload, result []byte
		started         sql.NullTime
	)
	if err := sc.Scan(&f.ID, &f.Queue, &f.Category, &f.URL, &payload, &f.Status, &f.Attempts,
		&f.CreatedAt, &started, &f.FinishedAt, &f.Message, &result); err != nil {
		return nil, err
	}
	f.Payload, f.Result = payload, result
	if started.Valid {
		f.StartedAt = &started.Time
	}
	return &f, nil
}

// insertFinishedSQL writes n history rows; a job retried from the failure
// log keeps its id, and its later outcome replaces its row.
func insertFinishedSQL(n int) string {
	return `/* rowq:finished.insert */ INSERT INTO finished_jobs (` + finishedCols + `) VALUES ` +
		strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?), ", n), ", ") +
		` ON DUPLICATE KEY UPDATE queue_name = VALUES(queue_name), category = VALUES(category), url = VALUES(url),
		payload = VALUES(payload), status = VALUES(status), attempts = VALUES(attempts), created_at = VALUES(created_at),
		started_at = VALUES(started_at), finished_at = VALUES(finished_at), message = VALUES(message), result = VALUES(result)`
}

// insertFinished writes the history rows fs in tx.
func insertFinished(ctx context.Context, tx *sql.Tx, fs ...*store.FinishedJob) error {
	if len(fs) == 0 {
		return nil
	}
	args := make([]any, 0, 12*len(fs))
	for _, f := range fs {
		args = append(args, f.ID, f.Queue, f.Category, f.URL, nullBytes(f.Payload), f.Status, f.Attempts,
			f.CreatedAt, f.StartedAt, f.FinishedAt, f.Message, nullBytes(f.Result))
	}
	_, err := tx.ExecContext(ctx, insertFinishedSQL(len(fs)), args...)
	return err
}

// nullBytes stores nil or empty bytes as NULL, others as text.
func nullBytes(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return string(b)
}

// completeKept is JobsComplete for a batch of which some jobs keep their
// history: in one transaction it copies the held rows of those jobs into
// the history (INSERT … SELECT: the rows do not travel to rowq and back),
// writes the notes that have a message or a result, and deletes the batch
// with JobsComplete's statement.
func (s *Store) completeKept(ctx context.Context, p *store.JobsCompleteParams) (int64, store.FlowDone, error) {
	keep := make([]int64, 0, len(p.Keep))
	written := make(map[int64]bool, len(p.Keep))
	var noted []store.FinishNote
	for _, k := range p.Keep {
		keep = append(keep, k.ID)
		written[k.ID] = true
		if k.Message != "" || len(k.Result) > 0 {
			noted = append(noted, k)
		}
	}
	var (
		n    int64
		done store.FlowDone
	)
	err := retry(ctx, func() error {
		done = store.FlowDone{}
		return s.inTx(ctx, func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, copySucceededSQL(len(keep)), append(idArgs(keep), p.Node)...); err != nil {
				return err
			}
			if len(noted) > 0 {
				q, args := notesSQL(noted)
				if _, err := tx.ExecContext(ctx, q, args...); err != nil {
					return err
				}
			}
			var err error
			n, err = sqldb.Affected(tx.ExecContext(ctx, completeHeldSQL(len(p.IDs)),
				append(idArgs(p.IDs), store.StateGrabbed, p.Node)...))
			if err != nil || n >= int64(len(p.IDs)) {
				return err
			}
			m, d, err := s.completeFlow(ctx, tx, p, written)
			n, done = n+m, d
			return err
		})
	})
	return n, done, mapErr(err)
}

// copySucceededSQL copies n jobs, where the node (the last argument)
// still holds them, into the history as succeeded now, as
// store.FinishedOf writes a held job: attempts fail_count + 1, started at
// its next_try, no message or result yet (notesSQL).
func copySucceededSQL(n int) string {
	return `/* rowq:jobs.complete */ INSERT INTO finished_jobs (` + finishedCols + `)
		SELECT id, queue_name, category, url, payload, 'succeeded', fail_count + 1, created_at, next_try, NOW(6), '', NULL
		FROM jobs FORCE INDEX (PRIMARY) WHERE id IN (` + sqldb.Placeholders(n) + `) AND state = 'grabbed' AND grabbed_by = ?
		ON DUPLICATE KEY UPDATE queue_name = VALUES(queue_name), category = VALUES(category), url = VALUES(url),
		payload = VALUES(payload), status = VALUES(status), attempts = VALUES(attempts), created_at = VALUES(created_at),
		started_at = VALUES(started_at), finished_at = VALUES(finished_at), message = VALUES(message), result = VALUES(result)`
}

// notesSQL writes the message and result of each of notes into its
// history row, in one statement.
func notesSQL(notes []store.FinishNote) (string, []any) {
	var msg, res strings.Builder
	args := make([]any, 0, 5*len(notes))
	for _, nt := range notes {
		msg.WriteString(" WHEN ? THEN ?")
		args = append(args, nt.ID, nt.Message)
	}
	for _, nt := range notes {
		res.WriteString(" WHEN ? THEN ?")
		args = append(args, nt.ID, nullBytes(nt.Result))
	}
	for _, nt := range notes {
		args = append(args, nt.ID)
	}
	return `/* rowq:jobs.complete */ UPDATE finished_jobs FORCE INDEX (PRIMARY)
		SET message = CASE id` + msg.String() + ` END, result = CASE id` + res.String() + ` END
		WHERE id IN (` + sqldb.Placeholders(len(notes)) + `)`, args
}

// completeFlow ends, in tx, those of p.IDs that p.Node still holds and
// that have a flow, whatever p.Flow says (a dependent may have been added
// to a job after its grab): it locks them, writes their history where
// their queue keeps it (but for those of written), deletes them and
// applies their flows (store.FlowEnd), with their notes of p.Flow or
// p.Keep.
func (s *Store) completeFlow(ctx context.Context, tx *sql.Tx, p *store.JobsCompleteParams, written map[int64]bool) (int64, store.FlowDone, error) {
	q, err := s.causal(ctx, `/* rowq:jobs.complete_flow */ SELECT `+jobCols+`, NOW(6), `+keepOf+` FROM jobs FORCE INDEX (PRIMARY)
		WHERE id IN (`+sqldb.Placeholders(len(p.IDs))+`) AND state = 'grabbed' AND grabbed_by = ? AND flow <> 0 ORDER BY id FOR UPDATE`)
	if err != nil {
		return 0, store.FlowDone{}, err
	}
	var now time.Time
	keep := map[int64]bool{}
	jobs, err := sqldb.QueryAll(ctx, tx, func(sc sqldb.Scanner) (*store.Job, error) {
		var k sql.NullInt64
		j, err := scanJob(sc, &now, &k)
		if err == nil {
			keep[j.ID] = k.Int64 > 0
		}
		return j, err
	}, q, append(idArgs(p.IDs), p.Node)...)
	if err != nil || len(jobs) == 0 {
		return 0, store.FlowDone{}, err
	}
	notes := make(map[int64]store.FinishNote, len(p.Flow)+len(p.Keep))
	for _, k := range slices.Concat(p.Keep, p.Flow) {
		notes[k.ID] = k
	}
	var (
		fs    []*store.FinishedJob
		ended = make([]store.FlowEnded, len(jobs))
	)
	for i, j := range jobs {
		note := notes[j.ID]
		if keep[j.ID] && !written[j.ID] {
			fs = append(fs, store.FinishedOf(j, store.FinishedSucceeded, note.Message, note.Result, now))
		}
		ended[i] = store.FlowEnded{Job: j, Status: store.FinishedSucceeded, Message: note.Message, Result: note.Result}
	}
	if err := insertFinished(ctx, tx, fs...); err != nil {
		return 0, store.FlowDone{}, err
	}
	if err := deleteJobs(ctx, tx, jobs); err != nil {
		return 0, store.FlowDone{}, err
	}
	done, err := s.endFlows(ctx, tx, ended...)
	return int64(len(jobs)), done, err
}

// deleteJobs deletes jobs, which tx holds, and their ordered_jobs rows.
func deleteJobs(ctx context.Context, tx *sql.Tx, jobs []*store.Job) error {
	ids := make([]int64, len(jobs))
	var ordered []int64
	for i, j := range jobs {
		ids[i] = j.ID
		if j.Ordered {
			ordered = append(ordered, j.ID)
		}
	}
	if _, err := tx.ExecContext(ctx, `/* rowq:jobs.delete_held */ DELETE jobs FROM jobs FORCE INDEX (PRIMARY)
		WHERE id IN (`+sqldb.Placeholders(len(ids))+`)`, idArgs(ids)...); err != nil {
		return err
	}
	return forgetOrdered(ctx, tx, ordered...)
}

// FinishedGet returns the history row of job id of queue.
func (s *Store) FinishedGet(ctx context.Context, queue string, id int64) (*store.FinishedJob, error) {
	f, err := scanFinished(s.db.QueryRowContext(ctx, `/* rowq:finished.get */ SELECT `+finishedCols+`
		FROM finished_jobs WHERE id = ? AND queue_name = ?`, id, queue))
	if err != nil {
		return nil, fmt.Errorf("get finished job %d of queue %q: %w", id, queue, mapErr(err))
	}
	return f, nil
}

// FinishedList returns a page of the queue's history, newest first, from
// finished_jobs_queue; the filters on status and category are applied to
// the rows the index walks.
func (s *Store) FinishedList(ctx context.Context, p *store.FinishedListParams) ([]*store.FinishedJob, error) {
	var (
		where strings.Builder
		args  = []any{p.Queue}
	)
	where.WriteString(`queue_name = ?`)
	if p.Status != "" {
		where.WriteString(` AND status = ?`)
		args = append(args, p.Status)
	}
	if p.Category != "" {
		where.WriteString(` AND category = ?`)
		args = append(args, p.Category)
	}
	if !p.Since.IsZero() {
		where.WriteString(` AND finished_at >= ?`)
		args = append(args, p.Since)
	}
	if !p.Until.IsZero() {
		where.WriteString(` AND finished_at < ?`)
		args = append(args, p.Until)
	}
	if p.Before != nil {
		where.WriteString(` AND (finished_at, id) < (?, ?)`)
		args = append(args, p.Before.FinishedAt, p.Before.ID)
	}
	args = append(args, p.Limit)
	fs, err := sqldb.QueryAll(ctx, s.db, scanFinished, finishedListSQL(where.String()), args...)
	if err != nil {
		return nil, fmt.Errorf("list finished jobs of queue %q: %w", p.Queue, mapErr(err))
	}
	return fs, nil
}

// finishedPruneFindSQL selects the ids of the oldest rows of a queue
// (its first argument) older than the second (µs), at most the third:
// a walk of finished_jobs_queue from the queue's oldest row.
const finishedPruneFindSQL = `/* rowq:finished.prune */ SELECT id
	FROM finished_jobs FORCE INDEX (finished_jobs_queue)
	WHERE queue_name = ? AND finished_at < NOW(6) - INTERVAL ? MICROSECOND
	ORDER BY finished_at, id LIMIT ?`

// finishedListSQL is FinishedList's SELECT for the conditions where.
func finishedListSQL(where string) string {
	return `/* rowq:finished.list */ SELECT ` + finishedCols + `
		FROM finished_jobs FORCE INDEX (finished_jobs_queue) WHERE ` + where + `
		ORDER BY finished_at DESC, id DESC LIMIT ?`
}

// FinishedPrune selects up to p.Limit ids of rows older than p.Age, oldest
// first, and deletes them by id, in one short transaction.
func (s *Store) FinishedPrune(ctx context.Context, p *store.FinishedPruneParams) (int64, error) {
	var n int64
	err := retry(ctx, func() error {
		n = 0
		return s.inTx(ctx, func(tx *sql.Tx) error {
			ids, err := sqldb.QueryAll(ctx, tx, sqldb.ScanInt64, finishedPruneFindSQL, p.Queue, p.Age.Microseconds(), p.Limit)
			if err != nil || len(ids) == 0 {
				return err
			}
			n, err = sqldb.Affected(tx.ExecContext(ctx, `/* rowq:finished.prune */ DELETE FROM finished_jobs
				WHERE id IN (`+sqldb.Placeholders(len(ids))+`)`, idArgs(ids)...))
			return err
		})
	})
	if err != nil {
		return 0, fmt.Errorf("prune finished jobs of queue %q: %w", p.Queue, mapErr(err))
	}
	return n, nil
}

// keepFinished reports whether queue keeps its finished jobs, read in tx
// (JobCancel, which is no hot path, decides itself).
func keepFinished(ctx context.Context, tx *sql.Tx, queue string) (bool, error) {
	var keep int
	err := tx.QueryRowContext(ctx, `/* rowq:queues.keep */ SELECT keep_finished FROM queues WHERE name = ?`, queue).Scan(&keep)
	if err == sql.ErrNoRows {
		return false, nil
	}
	return keep > 0, err
}

// keepOf is a column of a statement on jobs: the keep_finished of the
// row's queue (NULL for a queue deleted since). A subquery, so that a
// locking read of jobs locks no row of queues: MySQL and MariaDB lock the
// rows of a subquery only when it has its own locking clause.
const keepOf = `(SELECT keep_finished FROM queues WHERE queues.name = jobs.queue_name)`

// succeedKept writes the history of the jobs of kept, which tx holds
// locked, as succeeded with their notes.
func succeedKept(ctx context.Context, tx *sql.Tx, kept map[int64]store.FinishNote) error {
	if len(kept) == 0 {
		return nil
	}
	ids := make([]int64, 0, len(kept))
	for id := range kept {
		ids = append(ids, id)
	}
	var now time.Time
	jobs, err := sqldb.QueryAll(ctx, tx, func(sc sqldb.Scanner) (*store.Job, error) { return scanJob(sc, &now) },
		`/* rowq:jobs.succeed */ SELECT `+jobCols+`, NOW(6) FROM jobs FORCE INDEX (PRIMARY) WHERE id IN (`+sqldb.Placeholders(len(ids))+`)`,
		idArgs(ids)...)
	if err != nil {
		return err
	}
	fs := make([]*store.FinishedJob, len(jobs))
	for i, j := range jobs {
		note := kept[j.ID]
		fs[i] = store.FinishedOf(j, store.FinishedSucceeded, note.Message, note.Result, now)
	}
	return insertFinished(ctx, tx, fs...)
}

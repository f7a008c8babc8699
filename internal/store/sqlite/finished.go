package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/sqldb"
)

const finishedCols = `id, queue_name, category, url, payload, status, attempts, created_at, started_at, finished_at, message, result`

func scanFinished(row sqldb.Scanner) (*store.FinishedJob, error) {
	var (
		f                 store.FinishedJob
		payload, result   sql.NullString
		created, finished int64
		started           sql.NullInt64
	)
	if err := row.Scan(&f.ID, &f.Queue, &f.Category, &f.URL, &payload, &f.Status, &f.Attempts,
		&created, &started, &finished, &f.Message, &result); err != nil {
		return nil, err
	}
	if payload.Valid {
		f.Payload = []byte(payload.String)
	}
	if result.Valid {
		f.Result = []byte(result.String)
	}
	f.CreatedAt, f.FinishedAt = fromMicros(created), fromMicros(finished)
	if started.Valid {
		t := fromMicros(started.Int64)
		f.StartedAt = &t
	}
	return &f, nil
}

// insertFinished writes the history rows fs in tx; a job retried from the
// failure log keeps its id, and its later outcome replaces its row.
func insertFinished(ctx context.Context, tx *sql.Tx, fs ...*store.FinishedJob) error {
	if len(fs) == 0 {
		return nil
	}
	args := make([]any, 0, 12*len(fs))
	for _, f := range fs {
		var started any
		if f.StartedAt != nil {
			started = f.StartedAt.UnixMicro()
		}
		var result any
		if len(f.Result) > 0 {
			result = string(f.Result)
		}
		args = append(args, f.ID, f.Queue, f.Category, f.URL, nullPayload(f.Payload), f.Status, f.Attempts,
			f.CreatedAt.UnixMicro(), started, f.FinishedAt.UnixMicro(), f.Message, result)
	}
	_, err := tx.ExecContext(ctx, `/* rowq:finished.insert */ INSERT INTO finished_jobs (`+finishedCols+`) VALUES `+
		strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?), ", len(fs)), ", ")+`
		ON CONFLICT (id) DO UPDATE SET queue_name = excluded.queue_name, category = excluded.category,
			url = excluded.url, payload = excluded.payload, status = excluded.status, attempts = excluded.attempts,
			created_at = excluded.created_at, started_at = excluded.started_at, finished_at = excluded.finished_at,
			message = excluded.message, result = excluded.result`, args...)
	return err
}

// completeKept is JobsComplete for a batch of which some jobs keep their
// history: in one transaction it deletes the held jobs without a flow,
// returning them, and writes the history of those in p.Keep.
func (s *Store) completeKept(ctx context.Context, p *store.JobsCompleteParams) (int64, error) {
	notes := make(map[int64]store.FinishNote, len(p.Keep))
	for _, k := range p.Keep {
		notes[k.ID] = k
	}
	args := make([]any, 0, len(p.IDs)+2)
	args = append(args, store.StateGrabbed, p.Node)
	for _, id := range p.IDs {
		args = append(args, id)
	}
	var n int64
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		jobs, err := sqldb.QueryAll(ctx, tx, scanJob, `/* rowq:jobs.complete */ DELETE FROM jobs
			WHERE state = ? AND grabbed_by = ? AND id IN (`+sqldb.Placeholders(len(p.IDs))+`) AND flow = 0 RETURNING `+jobCols, args...)
		if err != nil {
			return err
		}
		n = int64(len(jobs))
		now := fromMicros(s.micros())
		var fs []*store.FinishedJob
		for _, j := range jobs {
			if note, ok := notes[j.ID]; ok {
				fs = append(fs, store.FinishedOf(j, store.FinishedSucceeded, note.Message, note.Result, now))
			}
		}
		return insertFinished(ctx, tx, fs...)
	})
	return n, err
}

// keepFinished reports whether queue keeps its finished jobs, read in tx.
func keepFinished(ctx context.Context, tx *sql.Tx, queue string) (bool, error) {
	var keep int
	err := tx.QueryRowContext(ctx, `/* rowq:queues.keep */ SELECT keep_finished FROM queues WHERE name = ?`, queue).Scan(&keep)
	if err == sql.ErrNoRows {
		return false, nil
	}
	return keep > 0, err
}

// FinishedGet returns the history row of job id of queue.
func (s *Store) FinishedGet(ctx context.Context, queue string, id int64) (*store.FinishedJob, error) {
	f, err := scanFinished(s.r.QueryRowContext(ctx, `/* rowq:finished.get */ SELECT `+finishedCols+`
		FROM finished_jobs WHERE id = ? AND queue_name = ?`, id, queue))
	if err != nil {
		return nil, fmt.Errorf("get finished job %d of queue %q: %w", id, queue, mapErr(err))
	}
	return f, nil
}

// FinishedList returns a page of the queue's history, newest first, from
// finished_jobs_queue.
func (s *Store) FinishedList(ctx context.Context, p *store.FinishedListParams) ([]*store.FinishedJob, error) {
	var where strings.Builder
	args := []any{p.Queue}
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
		args = append(args, p.Since.UnixMicro())
	}
	if !p.Until.IsZero() {
		where.WriteString(` AND finished_at < ?`)
		args = append(args, p.Until.UnixMicro())
	}
	if p.Before != nil {
		where.WriteString(` AND (finished_at, id) < (?, ?)`)
		args = append(args, p.Before.FinishedAt.UnixMicro(), p.Before.ID)
	}
	args = append(args, p.Limit)
	fs, err := sqldb.QueryAll(ctx, s.r, scanFinished, `/* rowq:finished.list */ SELECT `+finishedCols+`
		FROM finished_jobs WHERE `+where.String()+` ORDER BY finished_at DESC, id DESC LIMIT ?`, args...)
	if err != nil {
		return nil, fmt.Errorf("list finished jobs of queue %q: %w", p.Queue, mapErr(err))
	}
	return fs, nil
}

// FinishedPrune deletes up to p.Limit rows older than p.Age, oldest first,
// selected by id in the statement that deletes them.
func (s *Store) FinishedPrune(ctx context.Context, p *store.FinishedPruneParams) (int64, error) {
	cutoff := s.now().Add(-p.Age).UnixMicro()
	n, err := affected(s.w.ExecContext(ctx, `/* rowq:finished.prune */ DELETE FROM finished_jobs WHERE id IN (
		SELECT id FROM finished_jobs WHERE queue_name = ? AND finished_at < ? ORDER BY finished_at, id LIMIT ?)`,
		p.Queue, cutoff, p.Limit))
	if err != nil {
		return 0, fmt.Errorf("prune finished jobs of queue %q: %w", p.Queue, err)
	}
	return n, nil
}

// keepOf is a column of a statement on jobs: the keep_finished of the
// row's queue (NULL for a queue deleted since).
const keepOf = `(SELECT keep_finished FROM queues WHERE queues.name = jobs.queue_name)`

// withExtra scans a row's columns into the destinations asked for, then
// into extra: scanJob with more columns after jobCols.
func withExtra(sc sqldb.Scanner, extra ...any) sqldb.Scanner { return extraScanner{sc, extra} }

type extraScanner struct {
	sc    sqldb.Scanner
	extra []any
}

func (e extraScanner) Scan(dest ...any) error { return e.sc.Scan(append(dest, e.extra...)...) }

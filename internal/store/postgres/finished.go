package postgres

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/rowq/rowq/internal/store"
)

const finishedCols = `id, queue_name, category, url, payload, status, attempts, created_at, started_at, finished_at, message, result`

// finishedUpsert ends an INSERT INTO finished_jobs: a job retried from the
// failure log keeps its id, and its later outcome replaces its row.
const finishedUpsert = `ON CONFLICT (id) DO UPDATE SET queue_name = excluded.queue_name, category = excluded.category,
	url = excluded.url, payload = excluded.payload, status = excluded.status, attempts = excluded.attempts,
	created_at = excluded.created_at, started_at = excluded.started_at, finished_at = excluded.finished_at,
	message = excluded.message, result = excluded.result`

func scanFinished(row pgx.CollectableRow) (*store.FinishedJob, error) {
	var (
		f               store.FinishedJob
		payload, result *string
	)
	err := row.Scan(&f.ID, &f.Queue, &f.Category, &f.URL, &payload, &f.Status, &f.Attempts,
		&f.CreatedAt, &f.StartedAt, &f.FinishedAt, &f.Message, &result)
	if payload != nil {
		f.Payload = []byte(*payload)
	}
	if result != nil {
		f.Result = []byte(*result)
	}
	f.CreatedAt, f.FinishedAt = f.CreatedAt.UTC(), f.FinishedAt.UTC()
	if f.StartedAt != nil {
		t := f.StartedAt.UTC()
		f.StartedAt = &t
	}
	return &f, err
}

// completeKeptSQL is JobsComplete for a batch of which some jobs keep
// their history: one statement deletes the held jobs ($1, node $2) and
// writes the history of those named in $3 with their messages ($4) and
// results ($5). Its one row is the count deleted.
const completeKeptSQL = `/* rowq:jobs.complete */ WITH d AS (
		DELETE FROM jobs WHERE id = ANY($1) AND state = 'grabbed' AND grabbed_by = $2` + noFlow + `
		RETURNING id, queue_name, category, url, payload, fail_count, created_at, next_try),
	k AS (
		INSERT INTO finished_jobs (` + finishedCols + `)
		SELECT d.id, d.queue_name, d.category, d.url, d.payload, 'succeeded', d.fail_count + 1, d.created_at, d.next_try, now(), n.message, n.result
		FROM d JOIN unnest($3::bigint[], $4::text[], $5::text[]) AS n(id, message, result) ON n.id = d.id
		` + finishedUpsert + `)
	SELECT count(*) FROM d`

func (s *Store) completeKept(ctx context.Context, p *store.JobsCompleteParams) (int64, error) {
	ids, msgs, results := make([]int64, len(p.Keep)), make([]string, len(p.Keep)), make([]*string, len(p.Keep))
	for i, k := range p.Keep {
		ids[i], msgs[i] = k.ID, k.Message
		if len(k.Result) > 0 {
			r := string(k.Result)
			results[i] = &r
		}
	}
	return queryOne(ctx, s, pgx.RowTo[int64], completeKeptSQL, p.IDs, p.Node, ids, msgs, results)
}

// failKeptSQL is JobFail's statement for a queue that keeps its finished
// jobs: it writes the job's history too.
const failKeptSQL = `/* rowq:jobs.fail */
	WITH d AS (
		DELETE FROM jobs WHERE id = $1 AND state = 'grabbed' AND grabbed_by = $2` + noFlow + `
		RETURNING id, queue_name, category, url, payload, fail_count, created_at, grabs, next_try,
			timeout, max_retries, retry_delay, priority, retry_backoff, retry_delay_max, retry_jitter, concurrency_key, concurrency_limit, ordered),
	k AS (
		INSERT INTO finished_jobs (` + finishedCols + `)
		SELECT id, queue_name, category, url, payload, 'failed', fail_count + 1, created_at, next_try, now(), $5, NULL FROM d
		` + finishedUpsert + `)
	INSERT INTO failed_jobs (job_id, queue_name, category, url, payload, status, code, message, fail_count, failed_at, created_at, grabs,
		timeout, max_retries, retry_delay, priority, retry_backoff, retry_delay_max, retry_jitter, concurrency_key, concurrency_limit, ordered)
	SELECT id, queue_name, category, url, payload, $3, $4, $5, fail_count + 1, now(), created_at, grabs,
		timeout, max_retries, retry_delay, priority, retry_backoff, retry_delay_max, retry_jitter, concurrency_key, concurrency_limit, ordered FROM d
	RETURNING ` + failedJobCols

// FinishedGet returns the history row of job id of queue.
func (s *Store) FinishedGet(ctx context.Context, queue string, id int64) (*store.FinishedJob, error) {
	f, err := queryOne(ctx, s, scanFinished, `/* rowq:finished.get */ SELECT `+finishedCols+`
		FROM finished_jobs WHERE id = $1 AND queue_name = $2`, id, queue)
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
	arg := func(cond string, v ...any) {
		args = append(args, v...)
		where.WriteString(" AND " + cond)
	}
	n := func(i int) string { return "$" + strconv.Itoa(len(args)+i) }
	where.WriteString("queue_name = $1")
	if p.Status != "" {
		arg("status = "+n(1), p.Status)
	}
	if p.Category != "" {
		arg("category = "+n(1), p.Category)
	}
	if !p.Since.IsZero() {
		arg("finished_at >= "+n(1), p.Since)
	}
	if !p.Until.IsZero() {
		arg("finished_at < "+n(1), p.Until)
	}
	if p.Before != nil {
		arg("(finished_at, id) < ("+n(1)+", "+n(2)+")", p.Before.FinishedAt, p.Before.ID)
	}
	limit := n(1)
	args = append(args, p.Limit)
	fs, err := queryAll(ctx, s, scanFinished, `/* rowq:finished.list */ SELECT `+finishedCols+`
		FROM finished_jobs WHERE `+where.String()+` ORDER BY finished_at DESC, id DESC LIMIT `+limit, args...)
	if err != nil {
		return nil, fmt.Errorf("list finished jobs of queue %q: %w", p.Queue, mapErr(err))
	}
	return fs, nil
}

// FinishedPrune deletes up to p.Limit rows older than p.Age, oldest first,
// selected by id in the statement that deletes them.
func (s *Store) FinishedPrune(ctx context.Context, p *store.FinishedPruneParams) (int64, error) {
	n, err := s.exec(ctx, `/* rowq:finished.prune */ DELETE FROM finished_jobs WHERE id IN (
		SELECT id FROM finished_jobs WHERE queue_name = $1 AND finished_at < now() - make_interval(secs => $2)
		ORDER BY finished_at, id LIMIT $3)`, p.Queue, p.Age.Seconds(), p.Limit)
	if err != nil {
		return 0, fmt.Errorf("prune finished jobs of queue %q: %w", p.Queue, mapErr(err))
	}
	return n, nil
}

// nullJSON is b as text, NULL when empty.
func nullJSON(b []byte) *string {
	if len(b) == 0 {
		return nil
	}
	t := string(b)
	return &t
}

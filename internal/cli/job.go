package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/rowq/rowq/rowqtype"
)

// Verbs for rowq's additions to Fireworq's queues (docs/jobs.md):
// pausing queues, batch enqueue, and bulk retry and purge of the failure
// log. They are listed in queueSubs, jobSubs and failedSubs.

// stdin is where push-batch reads --file -; a variable for tests.
var stdin io.Reader = os.Stdin

// queuePauseVerb is `rowq queue pause|resume NAME`.
func queuePauseVerb(pause bool) func(s *session, args []string) error {
	return func(s *session, args []string) error {
		pos, err := s.parse(args, 1, "NAME")
		if err != nil {
			return err
		}
		ctx, cancel := s.r.context()
		defer cancel()
		c, err := s.r.client()
		if err != nil {
			return err
		}
		var q *rowqtype.Queue
		if pause {
			q, err = c.PauseQueue(ctx, pos[0])
		} else {
			q, err = c.ResumeQueue(ctx, pos[0])
		}
		if err != nil {
			return err
		}
		return s.r.print(s.stdout, q, queueTable(q))
	}
}

// jobPushBatch is `rowq job push-batch --file F`.
func jobPushBatch(s *session, args []string) error {
	file := s.fs.String("file", "", `JSON file holding {"jobs": [...]} as POST /jobs takes; - for stdin (required)`)
	if _, err := s.parse(args, 0, "no arguments"); err != nil {
		return err
	}
	var in io.Reader
	switch *file {
	case "":
		return errors.New("--file: required: a JSON file, or - for stdin")
	case "-":
		in = stdin
	default:
		f, err := os.Open(*file)
		if err != nil {
			return fmt.Errorf("--file: %w", err)
		}
		defer f.Close()
		in = f
	}
	jobs, err := readBatch(in)
	if err != nil {
		return fmt.Errorf("--file %s: %w", *file, err)
	}
	ctx, cancel := s.r.context()
	defer cancel()
	c, err := s.r.client()
	if err != nil {
		return err
	}
	pushed, err := c.PushJobs(ctx, jobs)
	if err != nil {
		return err
	}
	return s.r.print(s.stdout, map[string]any{"jobs": pushed}, func(w io.Writer) {
		fmt.Fprintln(w, "ID\tQUEUE\tCATEGORY\tPRIORITY\tEXISTING\tURL")
		for _, j := range pushed {
			fmt.Fprintf(w, "%d\t%s\t%s\t%d\t%t\t%s\n", j.ID, j.QueueName, j.Category, j.Priority, existing(j), j.URL)
		}
	})
}

// readBatch decodes {"jobs": [...]}. Unknown fields are refused here,
// since encoding rowqtype.BatchJob again would drop them silently (a
// misspelt "priority" would enqueue jobs without one).
func readBatch(r io.Reader) ([]*rowqtype.BatchJob, error) {
	var body rowqtype.JobsRequest
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		return nil, fmt.Errorf(`want one JSON object {"jobs": [...]}: %w`, err)
	}
	if dec.More() {
		return nil, errors.New(`want one JSON object {"jobs": [...]}, found more after it`)
	}
	if len(body.Jobs) == 0 {
		return nil, errors.New(`jobs: want at least one job in {"jobs": [...]}`)
	}
	for i, j := range body.Jobs {
		if j == nil {
			return nil, fmt.Errorf("jobs[%d]: want a job object, got null", i)
		}
	}
	return body.Jobs, nil
}

// failedBulkVerb is `rowq failed retry|purge QUEUE [ID…|--all]`: the
// entries named, or every entry with --all. Purging needs one or the
// other, so that a forgotten ID never empties a log; retrying does too,
// for symmetry. It fails (after printing the count) when some named
// entries were not in the log.
func failedBulkVerb(retry bool) func(s *session, args []string) error {
	return func(s *session, args []string) error {
		all := s.fs.Bool("all", false, "every entry of the queue's failure log")
		pos, err := s.parseRange(args, 1, 1+maxCLIBulkIDs, "QUEUE and IDs, or QUEUE --all")
		if err != nil {
			return err
		}
		queue, rest := pos[0], pos[1:]
		verb := "purge"
		if retry {
			verb = "retry"
		}
		switch {
		case *all && len(rest) > 0:
			return fmt.Errorf("failed %s: give IDs or --all, not both", verb)
		case !*all && len(rest) == 0:
			return fmt.Errorf("failed %s: name the entries (IDs from rowq failed ls) or pass --all for every entry of %q", verb, queue)
		}
		var ids []int64
		seen := map[int64]bool{}
		for _, a := range rest {
			id, err := parseID(a)
			if err != nil {
				return err
			}
			if !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
		ctx, cancel := s.r.context()
		defer cancel()
		c, err := s.r.client()
		if err != nil {
			return err
		}
		var n int
		key := "deleted"
		if retry {
			key = "retried"
			n, err = c.RetryFailedJobs(ctx, queue, ids)
		} else {
			n, err = c.DeleteFailedJobs(ctx, queue, ids)
		}
		if err != nil {
			return err
		}
		if err := s.r.print(s.stdout, map[string]int{key: n}, func(w io.Writer) {
			fmt.Fprintf(w, "%s %d failure log entries of queue %s\n", key, n, queue)
		}); err != nil {
			return err
		}
		if ids != nil && n < len(ids) {
			return fmt.Errorf("failed %s: %d of the %d entries named were not in the failure log of queue %q", verb, len(ids)-n, len(ids), queue)
		}
		return nil
	}
}

// maxCLIBulkIDs is the server's bound on ids in one bulk request.
const maxCLIBulkIDs = 10_000

// jobOptionFlags adds the flags of rowq's job fields to push; the function
// it returns sets them on a job once the flags are parsed.
func jobOptionFlags(s *session) func(job *rowqtype.JobRequest) {
	priority := s.fs.Int("priority", 0, "-1000..1000: due jobs of a queue go out highest priority first")
	uniqueKey := s.fs.String("unique-key", "", "while a job of the queue with this key is pending, pushing again returns that job")
	backoff := s.fs.String("retry-backoff", "", "fixed (default: every retry waits --retry-delay) or exponential")
	delayMax := s.fs.Int("retry-delay-max", 0, "seconds: the cap of an exponential delay (0: the server's, 30 days)")
	jitter := s.fs.Float64("retry-jitter", 0, "0..1: spread each retry delay by up to ± this fraction")
	ckey := s.fs.String("concurrency-key", "", "at most --concurrency-limit jobs of the queue with this key are in delivery at once")
	climit := s.fs.Int("concurrency-limit", 0, "1..10000, with --concurrency-key (0: the server's, 1)")
	ordered := s.fs.Bool("ordered", false, "with --concurrency-key: the key's jobs go one at a time, in enqueue order")
	return func(job *rowqtype.JobRequest) {
		job.Priority, job.UniqueKey, job.RetryBackoff = nonZero(*priority), nonZero(*uniqueKey), nonZero(*backoff)
		job.RetryDelayMax, job.RetryJitter = nonZero(*delayMax), nonZero(*jitter)
		job.ConcurrencyKey, job.ConcurrencyLimit, job.Ordered = nonZero(*ckey), nonZero(*climit), nonZero(*ordered)
	}
}

// existing reports whether a push returned a pending job that held its
// unique key instead of a new one.
func existing(j *rowqtype.PushedJob) bool { return j.Existing != nil && *j.Existing }

// existingNote says that a push returned a pending job instead of a new one.
func existingNote(w io.Writer, j *rowqtype.PushedJob) {
	if existing(j) {
		fmt.Fprintf(w, "existing: job %s of queue %s already holds unique key %s\n", strconv.FormatInt(j.ID, 10), j.QueueName, strconv.Quote(j.UniqueKey))
	}
}

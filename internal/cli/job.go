package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/rowq/rowq/client"
	"github.com/rowq/rowq/rowqtype"
)

// jobCmd is `rowq job`.
func jobCmd(args []string, stdout, stderr io.Writer) error {
	return dispatchSub("job", jobSubs, args, stdout, stderr)
}

func jobTable(js ...*rowqtype.Job) func(w io.Writer) {
	return func(w io.Writer) {
		fmt.Fprintln(w, "ID\tSTATUS\tCATEGORY\tNEXT_TRY\tFAILS\tURL")
		for _, j := range js {
			fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%d/%d\t%s\n", j.ID, j.Status, j.Category, since(j.NextTry), j.FailCount, j.MaxRetries, j.URL)
		}
	}
}

var jobSubs = []subcommand{
	{"push", "CATEGORY --url URL [flags]", "enqueue a job", func(s *session, args []string) error {
		u := s.fs.String("url", "", "worker URL (required)")
		payload := s.fs.String("payload", "", "payload, as JSON")
		runAfter := s.fs.Int("run-after", 0, "seconds before the first delivery")
		retries := s.fs.Int("max-retries", 0, "retries after a failure")
		delay := s.fs.Int("retry-delay", 0, "seconds between retries")
		timeout := s.fs.Int("timeout", 0, "seconds a delivery may take (0: none)")
		options := jobOptionFlags(s)
		pos, err := s.parse(args, 1, "CATEGORY")
		if err != nil {
			return err
		}
		job := &rowqtype.JobRequest{URL: *u, RunAfter: nonZero(*runAfter), MaxRetries: nonZero(*retries),
			RetryDelay: nonZero(*delay), Timeout: nonZero(*timeout)}
		options(job)
		if *payload != "" {
			if !json.Valid([]byte(*payload)) {
				return fmt.Errorf("--payload: not JSON: %q (a string needs quotes: '\"text\"')", *payload)
			}
			job.Payload = json.RawMessage(*payload)
		}
		return s.call(func(ctx context.Context, c *client.Client) (any, func(io.Writer), error) {
			j, err := c.PushJob(ctx, pos[0], job)
			return j, func(w io.Writer) {
				fmt.Fprintln(w, "ID\tQUEUE\tCATEGORY\tPRIORITY\tURL")
				fmt.Fprintf(w, "%d\t%s\t%s\t%d\t%s\n", j.ID, j.QueueName, j.Category, j.Priority, j.URL)
				existingNote(w, j)
			}, err
		})
	}},
	{"push-batch", "--file F|-", `enqueue {"jobs": [...]} in one transaction (POST /jobs)`, jobPushBatch},
	{"ls", "QUEUE [--state waiting|deferred|grabbed] [flags]", "list jobs of a queue", func(s *session, args []string) error {
		state := s.fs.String("state", client.JobsWaiting, "waiting (due now), deferred (due later) or grabbed (being delivered)")
		opts := listFlags(s.fs, "desc (latest next_try first) or asc")
		all := s.fs.Bool("all", false, "follow the pages to the end")
		pos, err := s.parse(args, 1, "QUEUE")
		if err != nil {
			return err
		}
		return s.call(func(ctx context.Context, c *client.Client) (any, func(io.Writer), error) {
			page, err := c.ListJobs(ctx, pos[0], *state, opts)
			for err == nil && *all && page.NextCursor != "" {
				opts.Cursor = page.NextCursor
				var next *rowqtype.JobPage
				if next, err = c.ListJobs(ctx, pos[0], *state, opts); err == nil {
					page.Jobs, page.NextCursor = append(page.Jobs, next.Jobs...), next.NextCursor
				}
			}
			return page, func(w io.Writer) {
				jobTable(page.Jobs...)(w)
				if page.NextCursor != "" {
					fmt.Fprintf(w, "more: --cursor %s\n", page.NextCursor)
				}
			}, err
		})
	}},
	{"get", "QUEUE ID", "show a job", oneJob((*client.Client).Job)},
	{"rm", "QUEUE ID", "delete a job, whatever its state", oneJob((*client.Client).DeleteJob)},
}

// oneJob is the run of a verb that takes QUEUE ID and makes one call.
func oneJob(op func(*client.Client, context.Context, string, int64) (*rowqtype.Job, error)) func(*session, []string) error {
	return simple(2, "QUEUE ID", func(ctx context.Context, c *client.Client, pos []string) (any, func(io.Writer), error) {
		id, err := parseID(pos[1])
		if err != nil {
			return nil, nil, err
		}
		j, err := op(c, ctx, pos[0], id)
		return j, func(w io.Writer) {
			jobTable(j)(w)
			if len(j.Payload) > 0 {
				fmt.Fprintf(w, "payload: %s\n", j.Payload)
			}
		}, err
	})
}

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

// jobPushBatch is `rowq job push-batch --file F`.
func jobPushBatch(s *session, args []string) error {
	file := s.fs.String("file", "", `JSON file holding {"jobs": [...]}, and "batch" if any, as POST /jobs takes; - for stdin (required)`)
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
	body, err := readBatch(in)
	if err != nil {
		return fmt.Errorf("--file %s: %w", *file, err)
	}
	return s.call(func(ctx context.Context, c *client.Client) (any, func(io.Writer), error) {
		res := &rowqtype.PushedJobs{}
		if body.Batch != nil {
			// The jobs make a batch (docs/lifecycle.md).
			if res, err = c.PushBatch(ctx, body.Batch, body.Jobs); res == nil {
				res = &rowqtype.PushedJobs{}
			}
		} else {
			res.Jobs, err = c.PushJobs(ctx, body.Jobs)
		}
		pushed := res.Jobs
		return res, func(w io.Writer) {
			if res.BatchID != 0 {
				fmt.Fprintf(w, "batch %d\n", res.BatchID)
			}
			fmt.Fprintln(w, "ID\tQUEUE\tCATEGORY\tPRIORITY\tEXISTING\tURL")
			for _, j := range pushed {
				fmt.Fprintf(w, "%d\t%s\t%s\t%d\t%t\t%s\n", j.ID, j.QueueName, j.Category, j.Priority, existing(j), j.URL)
			}
		}, err
	})
}

// readBatch decodes {"jobs": [...]} and its batch, if any. Unknown fields
// are refused here, since encoding rowqtype.BatchJob again would drop them
// silently (a misspelt "priority" would enqueue jobs without one).
func readBatch(r io.Reader) (*rowqtype.JobsRequest, error) {
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
	return &body, nil
}

// stdin is where push-batch reads --file -; a variable for tests.
var stdin io.Reader = os.Stdin

// existing reports whether a push returned a pending job that held its
// unique key instead of a new one.
func existing(j *rowqtype.PushedJob) bool { return j.Existing != nil && *j.Existing }

// existingNote says that a push returned a pending job instead of a new one.
func existingNote(w io.Writer, j *rowqtype.PushedJob) {
	if existing(j) {
		fmt.Fprintf(w, "existing: job %s of queue %s already holds unique key %s\n", strconv.FormatInt(j.ID, 10), j.QueueName, strconv.Quote(j.UniqueKey))
	}
}

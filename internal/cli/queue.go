package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rowq/rowq/client"
	"github.com/rowq/rowq/rowqtype"
)

// subcommand is one verb of a command that talks to a running server, such
// as "queue ls".
type subcommand struct {
	name, args, summary string
	run                 func(s *session, args []string) error
}

// session is what a subcommand needs: its flags, the remote flags and the
// output.
type session struct {
	fs     *flag.FlagSet
	r      *remote
	stdout io.Writer
}

// dispatchSub runs the verb args[0] of the command name.
func dispatchSub(name string, subs []subcommand, args []string, stdout, stderr io.Writer) error {
	help := func() string {
		var b strings.Builder
		fmt.Fprintf(&b, "Usage:\n")
		for _, s := range subs {
			fmt.Fprintf(&b, "  %-44s %s\n", "rowq "+name+" "+s.name+" "+s.args, s.summary)
		}
		b.WriteString("Each takes --server (env ROWQ_SERVER), --ca-file (env ROWQ_CA_FILE), --token (env ROWQ_TOKEN) and --json; -h lists a verb's flags.\n")
		return b.String()
	}
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(stdout, help())
		if len(args) == 0 {
			return fmt.Errorf("%s: want a verb", name)
		}
		return nil
	}
	i := slices.IndexFunc(subs, func(s subcommand) bool { return s.name == args[0] })
	if i < 0 {
		fmt.Fprint(stderr, help())
		return fmt.Errorf("%s: unknown verb %q", name, args[0])
	}
	fs := newFlagSet(name+" "+subs[i].name, stderr)
	s := &session{fs: fs, r: remoteFlags(fs), stdout: stdout}
	return subs[i].run(s, args[1:])
}

// parse parses flags anywhere among args (flag stops at the first
// simple is the run of a verb that takes n positional arguments, makes one
// client call with them and prints its answer: fn returns the answer and
// its table.
func simple(n int, names string, fn func(ctx context.Context, c *client.Client, pos []string) (any, func(io.Writer), error)) func(*session, []string) error {
	return func(s *session, args []string) error {
		pos, err := s.parse(args, n, names)
		if err != nil {
			return err
		}
		ctx, cancel := s.r.context()
		defer cancel()
		c, err := s.r.client()
		if err != nil {
			return err
		}
		v, table, err := fn(ctx, c, pos)
		if err != nil {
			return err
		}
		return s.r.print(s.stdout, v, table)
	}
}

// positional argument) and checks that there are n positional arguments.
func (s *session) parse(args []string, n int, names string) ([]string, error) {
	return s.parseRange(args, n, n, names)
}

// parseRange is parse for lo..hi positional arguments.
func (s *session) parseRange(args []string, lo, hi int, names string) ([]string, error) {
	var pos []string
	for {
		if err := s.fs.Parse(args); err != nil {
			return nil, err
		}
		args = s.fs.Args()
		if len(args) == 0 {
			break
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
	if len(pos) < lo || len(pos) > hi {
		return nil, fmt.Errorf("%s: want %s, got %d argument(s)", s.fs.Name(), names, len(pos))
	}
	return pos, nil
}

func parseID(s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id < 1 {
		return 0, fmt.Errorf("id: want a positive integer, got %q", s)
	}
	return id, nil
}

func since(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05")
}

func optFloat(v *float64) string {
	if v == nil {
		return "-"
	}
	return strconv.FormatFloat(*v, 'g', -1, 64)
}

func optInt(v *int) string {
	if v == nil {
		return "-"
	}
	return strconv.Itoa(*v)
}

// queueCmd is `rowq queue`.
func queueCmd(args []string, stdout, stderr io.Writer) error {
	return dispatchSub("queue", queueSubs, args, stdout, stderr)
}

var queueSubs = []subcommand{
	{"ls", "", "list queues", func(s *session, args []string) error {
		if _, err := s.parse(args, 0, "no arguments"); err != nil {
			return err
		}
		ctx, cancel := s.r.context()
		defer cancel()
		c, err := s.r.client()
		if err != nil {
			return err
		}
		qs, err := c.Queues(ctx)
		if err != nil {
			return err
		}
		return s.r.print(s.stdout, qs, func(w io.Writer) {
			fmt.Fprintln(w, "NAME\tPOLLING_MS\tMAX_WORKERS\tDISPATCHES/S\tBURST\tPAUSED")
			for _, q := range qs {
				fmt.Fprintf(w, "%s\t%d\t%d\t%s\t%s\t%t\n", q.Name, q.PollingInterval, q.MaxWorkers, optFloat(q.MaxDispatchesPerSecond), optInt(q.MaxBurstSize), q.Paused)
			}
		})
	}},
	{"get", "NAME", "show a queue", simple(1, "NAME", func(ctx context.Context, c *client.Client, pos []string) (any, func(io.Writer), error) {
		q, err := c.Queue(ctx, pos[0])
		return q, queueTable(q), err
	})},
	{"put", "NAME [flags]", "create or replace a queue", func(s *session, args []string) error {
		polling := s.fs.Int("polling-interval", 0, "milliseconds between polls (0: the server's default)")
		workers := s.fs.Int("max-workers", 0, "deliveries in flight (0: the server's default)")
		rate := s.fs.Float64("max-dispatches-per-second", 0, "throttle (0: none)")
		burst := s.fs.Int("max-burst-size", 0, "throttle's burst (0: one second's worth)")
		paused := s.fs.Bool("paused", false, "pause the queue (without it, a paused queue stays paused)")
		pos, err := s.parse(args, 1, "NAME")
		if err != nil {
			return err
		}
		in := &rowqtype.QueueRequest{PollingInterval: nonZero(*polling), MaxWorkers: nonZero(*workers),
			MaxDispatchesPerSecond: nonZero(*rate), MaxBurstSize: nonZero(*burst), Paused: nonZero(*paused)}
		ctx, cancel := s.r.context()
		defer cancel()
		c, err := s.r.client()
		if err != nil {
			return err
		}
		q, err := c.PutQueue(ctx, pos[0], in)
		if err != nil {
			return err
		}
		return s.r.print(s.stdout, q, queueTable(q))
	}},
	{"rm", "NAME", "delete a queue (its jobs stay stored)", simple(1, "NAME", func(ctx context.Context, c *client.Client, pos []string) (any, func(io.Writer), error) {
		q, err := c.DeleteQueue(ctx, pos[0])
		return q, queueTable(q), err
	})},
	{"node", "NAME", "show the node dispatching a queue", func(s *session, args []string) error {
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
		n, err := c.QueueNode(ctx, pos[0])
		if err != nil {
			return err
		}
		return s.r.print(s.stdout, n, func(w io.Writer) {
			fmt.Fprintln(w, "ID\tHOST")
			fmt.Fprintf(w, "%s\t%s\n", n.ID, n.Host)
		})
	}},
	{"nodes", "", "list the live nodes and how many queues each dispatches", simple(0, "no arguments", func(ctx context.Context, c *client.Client, _ []string) (any, func(io.Writer), error) {
		ns, err := c.Nodes(ctx)
		if err != nil {
			return nil, nil, err
		}
		return ns, func(w io.Writer) {
			fmt.Fprintln(w, "ID\tHOST\tQUEUES\tSTARTED")
			for _, n := range ns.Nodes {
				fmt.Fprintf(w, "%s\t%s\t%d\t%s\n", n.ID, n.Host, n.Queues, n.StartedAt.UTC().Format(time.RFC3339))
			}
		}, nil
	})},
	{"pause", "NAME", "stop dispatching a queue's jobs (it still accepts jobs)", queuePauseVerb(true)},
	{"resume", "NAME", "dispatch a paused queue's jobs again", queuePauseVerb(false)},
	{"stats", "[NAME]", "show statistics of one queue or all", func(s *session, args []string) error {
		pos, err := s.parseRange(args, 0, 1, "at most one NAME")
		if err != nil {
			return err
		}
		ctx, cancel := s.r.context()
		defer cancel()
		c, err := s.r.client()
		if err != nil {
			return err
		}
		all := map[string]*rowqtype.QueueStats{}
		var v any = all
		if len(pos) == 1 {
			st, err := c.QueueStats(ctx, pos[0])
			if err != nil {
				return err
			}
			all[pos[0]], v = st, st
		} else if all, err = c.AllQueueStats(ctx); err != nil {
			return err
		} else {
			v = all
		}
		names := make([]string, 0, len(all))
		for n := range all {
			names = append(names, n)
		}
		sort.Strings(names)
		return s.r.print(s.stdout, v, func(w io.Writer) {
			fmt.Fprintln(w, "QUEUE\tPUSHES\tPOPS\tSUCCESSES\tFAILURES\tPERMANENT\tCOMPLETES\tELAPSED_MS\tPUSH/S\tPOP/S\tOUTSTANDING\tWORKERS\tIDLE\tNODES")
			for _, n := range names {
				st := all[n]
				fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%.1f\t%.1f\t%d\t%d\t%d\t%d\n", n, st.TotalPushes, st.TotalPops,
					st.TotalSuccesses, st.TotalFailures, st.TotalPermanentFailures, st.TotalCompletes, st.TotalElapsed,
					st.PushesPerSecond, st.PopsPerSecond, st.OutstandingJobs, st.TotalWorkers, st.IdleWorkers, st.ActiveNodes)
			}
		})
	}},
}

func queueTable(q *rowqtype.Queue) func(w io.Writer) {
	return func(w io.Writer) {
		fmt.Fprintln(w, "NAME\tPOLLING_MS\tMAX_WORKERS\tDISPATCHES/S\tBURST\tPAUSED")
		fmt.Fprintf(w, "%s\t%d\t%d\t%s\t%s\t%t\n", q.Name, q.PollingInterval, q.MaxWorkers, optFloat(q.MaxDispatchesPerSecond), optInt(q.MaxBurstSize), q.Paused)
	}
}

// statsCmd is `rowq stats [QUEUE]`, short for `rowq queue stats`.
// nodesCmd is `rowq nodes`, short for `rowq queue nodes`.
func nodesCmd(args []string, stdout, stderr io.Writer) error {
	return dispatchSub("queue", queueSubs, append([]string{"nodes"}, args...), stdout, stderr)
}

func statsCmd(args []string, stdout, stderr io.Writer) error {
	return dispatchSub("queue", queueSubs, append([]string{"stats"}, args...), stdout, stderr)
}

// routingCmd is `rowq routing`.
func routingCmd(args []string, stdout, stderr io.Writer) error {
	return dispatchSub("routing", routingSubs, args, stdout, stderr)
}

func routingTable(rs ...*rowqtype.Routing) func(w io.Writer) {
	return func(w io.Writer) {
		fmt.Fprintln(w, "CATEGORY\tQUEUE")
		for _, r := range rs {
			fmt.Fprintf(w, "%s\t%s\n", r.JobCategory, r.QueueName)
		}
	}
}

var routingSubs = []subcommand{
	{"ls", "", "list routings", func(s *session, args []string) error {
		if _, err := s.parse(args, 0, "no arguments"); err != nil {
			return err
		}
		ctx, cancel := s.r.context()
		defer cancel()
		c, err := s.r.client()
		if err != nil {
			return err
		}
		rs, err := c.Routings(ctx)
		if err != nil {
			return err
		}
		return s.r.print(s.stdout, rs, routingTable(rs...))
	}},
	{"get", "CATEGORY", "show a routing", simple(1, "CATEGORY", func(ctx context.Context, c *client.Client, pos []string) (any, func(io.Writer), error) {
		r, err := c.Routing(ctx, pos[0])
		return r, routingTable(r), err
	})},
	{"put", "CATEGORY QUEUE", "route a category to a queue", simple(2, "CATEGORY QUEUE", func(ctx context.Context, c *client.Client, pos []string) (any, func(io.Writer), error) {
		r, err := c.PutRouting(ctx, pos[0], pos[1])
		return r, routingTable(r), err
	})},
	{"rm", "CATEGORY", "delete a routing", simple(1, "CATEGORY", func(ctx context.Context, c *client.Client, pos []string) (any, func(io.Writer), error) {
		r, err := c.DeleteRouting(ctx, pos[0])
		return r, routingTable(r), err
	})},
}

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
		ctx, cancel := s.r.context()
		defer cancel()
		c, err := s.r.client()
		if err != nil {
			return err
		}
		j, err := c.PushJob(ctx, pos[0], job)
		if err != nil {
			return err
		}
		return s.r.print(s.stdout, j, func(w io.Writer) {
			fmt.Fprintln(w, "ID\tQUEUE\tCATEGORY\tPRIORITY\tURL")
			fmt.Fprintf(w, "%d\t%s\t%s\t%d\t%s\n", j.ID, j.QueueName, j.Category, j.Priority, j.URL)
			existingNote(w, j)
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
		ctx, cancel := s.r.context()
		defer cancel()
		c, err := s.r.client()
		if err != nil {
			return err
		}
		page, err := c.ListJobs(ctx, pos[0], *state, opts)
		for err == nil && *all && page.NextCursor != "" {
			opts.Cursor = page.NextCursor
			var next *rowqtype.JobPage
			if next, err = c.ListJobs(ctx, pos[0], *state, opts); err == nil {
				page.Jobs, page.NextCursor = append(page.Jobs, next.Jobs...), next.NextCursor
			}
		}
		if err != nil {
			return err
		}
		return s.r.print(s.stdout, page, func(w io.Writer) {
			jobTable(page.Jobs...)(w)
			if page.NextCursor != "" {
				fmt.Fprintf(w, "more: --cursor %s\n", page.NextCursor)
			}
		})
	}},
	{"get", "QUEUE ID", "show a job", oneJob((*client.Client).Job)},
	{"rm", "QUEUE ID", "delete a job, whatever its state", oneJob((*client.Client).DeleteJob)},
}

// listFlags adds --limit, --order and --cursor.
func listFlags(fs *flag.FlagSet, orders string) *client.ListOptions {
	o := &client.ListOptions{}
	fs.IntVar(&o.Limit, "limit", 0, "jobs per page, 1..1000 (0: the server's default, 100)")
	fs.StringVar(&o.Order, "order", "", orders)
	fs.StringVar(&o.Cursor, "cursor", "", "the cursor a previous page printed")
	return o
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

// failedCmd is `rowq failed`.
func failedCmd(args []string, stdout, stderr io.Writer) error {
	return dispatchSub("failed", failedSubs, args, stdout, stderr)
}

func failedTable(fs ...*rowqtype.FailedJob) func(w io.Writer) {
	return func(w io.Writer) {
		fmt.Fprintln(w, "ID\tJOB\tCATEGORY\tFAILED_AT\tFAILS\tSTATUS\tCODE\tMESSAGE")
		for _, f := range fs {
			msg := strings.Join(strings.Fields(f.Result.Message), " ")
			if len(msg) > 60 {
				msg = msg[:57] + "..."
			}
			fmt.Fprintf(w, "%d\t%d\t%s\t%s\t%d\t%s\t%d\t%s\n", f.ID, f.JobID, f.Category, since(f.FailedAt), f.FailCount, f.Result.Status, f.Result.Code, msg)
		}
	}
}

var failedSubs = []subcommand{
	{"ls", "QUEUE [flags]", "list a queue's failure log, newest first", func(s *session, args []string) error {
		opts := listFlags(s.fs, "failed (by time of failure) or created (by the job's creation)")
		pos, err := s.parse(args, 1, "QUEUE")
		if err != nil {
			return err
		}
		ctx, cancel := s.r.context()
		defer cancel()
		c, err := s.r.client()
		if err != nil {
			return err
		}
		page, err := c.FailedJobs(ctx, pos[0], opts)
		if err != nil {
			return err
		}
		return s.r.print(s.stdout, page, func(w io.Writer) {
			failedTable(page.FailedJobs...)(w)
			if page.NextCursor != "" {
				fmt.Fprintf(w, "more: --cursor %s\n", page.NextCursor)
			}
		})
	}},
	{"get", "QUEUE ID", "show a failure log entry", oneFailed((*client.Client).FailedJob)},
	{"rm", "QUEUE ID", "delete a failure log entry", oneFailed((*client.Client).DeleteFailedJob)},
	{"retry", "QUEUE ID…|--all", "put entries back in the queue as jobs due now", failedBulkVerb(true)},
	{"purge", "QUEUE ID…|--all", "delete entries; every entry only with --all", failedBulkVerb(false)},
}

// oneFailed is the run of a verb that takes QUEUE ID and makes one call.
func oneFailed(op func(*client.Client, context.Context, string, int64) (*rowqtype.FailedJob, error)) func(*session, []string) error {
	return simple(2, "QUEUE ID", func(ctx context.Context, c *client.Client, pos []string) (any, func(io.Writer), error) {
		id, err := parseID(pos[1])
		if err != nil {
			return nil, nil, err
		}
		f, err := op(c, ctx, pos[0], id)
		return f, func(w io.Writer) {
			failedTable(f)(w)
			if len(f.Payload) > 0 {
				fmt.Fprintf(w, "payload: %s\n", f.Payload)
			}
			fmt.Fprintf(w, "message: %s\n", f.Result.Message)
		}, err
	})
}

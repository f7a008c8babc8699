package cli

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"time"

	"github.com/rowq/rowq/client"
	"github.com/rowq/rowq/rowqtype"
)

// queueCmd is `rowq queue`.
func queueCmd(args []string, stdout, stderr io.Writer) error {
	return dispatchSub("queue", queueSubs, args, stdout, stderr)
}

var queueSubs = []subcommand{
	{"ls", "", "list queues", simple(0, "no arguments", func(ctx context.Context, c *client.Client, _ []string) (any, func(io.Writer), error) {
		qs, err := c.Queues(ctx)
		return qs, queueTable(qs...), err
	})},
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
		keep := s.fs.Int("keep-finished", 0, "seconds to keep each finished job queryable, with its result (0: none)")
		pos, err := s.parse(args, 1, "NAME")
		if err != nil {
			return err
		}
		in := &rowqtype.QueueRequest{PollingInterval: nonZero(*polling), MaxWorkers: nonZero(*workers),
			MaxDispatchesPerSecond: nonZero(*rate), MaxBurstSize: nonZero(*burst), Paused: nonZero(*paused), KeepFinished: nonZero(*keep)}
		return s.call(func(ctx context.Context, c *client.Client) (any, func(io.Writer), error) {
			q, err := c.PutQueue(ctx, pos[0], in)
			return q, queueTable(q), err
		})
	}},
	{"rm", "NAME", "delete a queue (its jobs stay stored)", simple(1, "NAME", func(ctx context.Context, c *client.Client, pos []string) (any, func(io.Writer), error) {
		q, err := c.DeleteQueue(ctx, pos[0])
		return q, queueTable(q), err
	})},
	{"node", "NAME", "show the node dispatching a queue", simple(1, "NAME", func(ctx context.Context, c *client.Client, pos []string) (any, func(io.Writer), error) {
		n, err := c.QueueNode(ctx, pos[0])
		return n, func(w io.Writer) {
			fmt.Fprintln(w, "ID\tHOST")
			fmt.Fprintf(w, "%s\t%s\n", n.ID, n.Host)
		}, err
	})},
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
		return s.call(func(ctx context.Context, c *client.Client) (any, func(io.Writer), error) {
			all := map[string]*rowqtype.QueueStats{}
			var v any
			if len(pos) == 1 {
				st, err := c.QueueStats(ctx, pos[0])
				if err != nil {
					return nil, nil, err
				}
				all[pos[0]], v = st, st
			} else {
				var err error
				if all, err = c.AllQueueStats(ctx); err != nil {
					return nil, nil, err
				}
				v = all
			}
			names := make([]string, 0, len(all))
			for n := range all {
				names = append(names, n)
			}
			sort.Strings(names)
			return v, func(w io.Writer) {
				fmt.Fprintln(w, "QUEUE\tPUSHES\tPOPS\tSUCCESSES\tFAILURES\tPERMANENT\tCOMPLETES\tELAPSED_MS\tPUSH/S\tPOP/S\tOUTSTANDING\tWORKERS\tIDLE\tNODES")
				for _, n := range names {
					st := all[n]
					fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%.1f\t%.1f\t%d\t%d\t%d\t%d\n", n, st.TotalPushes, st.TotalPops,
						st.TotalSuccesses, st.TotalFailures, st.TotalPermanentFailures, st.TotalCompletes, st.TotalElapsed,
						st.PushesPerSecond, st.PopsPerSecond, st.OutstandingJobs, st.TotalWorkers, st.IdleWorkers, st.ActiveNodes)
				}
			}, nil
		})
	}},
}

func queueTable(qs ...*rowqtype.Queue) func(w io.Writer) {
	return func(w io.Writer) {
		fmt.Fprintln(w, "NAME\tPOLLING_MS\tMAX_WORKERS\tDISPATCHES/S\tBURST\tPAUSED\tKEEP_FINISHED_S")
		for _, q := range qs {
			fmt.Fprintf(w, "%s\t%d\t%d\t%s\t%s\t%t\t%d\n", q.Name, q.PollingInterval, q.MaxWorkers, optFloat(q.MaxDispatchesPerSecond), optInt(q.MaxBurstSize), q.Paused, q.KeepFinished)
		}
	}
}

// queuePauseVerb is `rowq queue pause|resume NAME`.
func queuePauseVerb(pause bool) func(s *session, args []string) error {
	return simple(1, "NAME", func(ctx context.Context, c *client.Client, pos []string) (any, func(io.Writer), error) {
		var q *rowqtype.Queue
		var err error
		if pause {
			q, err = c.PauseQueue(ctx, pos[0])
		} else {
			q, err = c.ResumeQueue(ctx, pos[0])
		}
		return q, queueTable(q), err
	})
}

// statsCmd is `rowq stats [QUEUE]`, short for `rowq queue stats`.
func statsCmd(args []string, stdout, stderr io.Writer) error {
	return dispatchSub("queue", queueSubs, append([]string{"stats"}, args...), stdout, stderr)
}

// nodesCmd is `rowq nodes`, short for `rowq queue nodes`.
func nodesCmd(args []string, stdout, stderr io.Writer) error {
	return dispatchSub("queue", queueSubs, append([]string{"nodes"}, args...), stdout, stderr)
}

// optFloat formats an optional number for a table, "-" when it is not set.
func optFloat(v *float64) string {
	if v == nil {
		return "-"
	}
	return strconv.FormatFloat(*v, 'g', -1, 64)
}

// optInt formats an optional number for a table, "-" when it is not set.
func optInt(v *int) string {
	if v == nil {
		return "-"
	}
	return strconv.Itoa(*v)
}

package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/rowq/rowq/client"
	"github.com/rowq/rowq/rowqtype"
)

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
		return s.call(func(ctx context.Context, c *client.Client) (any, func(io.Writer), error) {
			page, err := c.FailedJobs(ctx, pos[0], opts)
			return page, func(w io.Writer) {
				failedTable(page.FailedJobs...)(w)
				if page.NextCursor != "" {
					fmt.Fprintf(w, "more: --cursor %s\n", page.NextCursor)
				}
			}, err
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
		key := "deleted"
		if retry {
			key = "retried"
		}
		var n int
		if err := s.call(func(ctx context.Context, c *client.Client) (any, func(io.Writer), error) {
			var err error
			if retry {
				n, err = c.RetryFailedJobs(ctx, queue, ids)
			} else {
				n, err = c.DeleteFailedJobs(ctx, queue, ids)
			}
			return map[string]int{key: n}, func(w io.Writer) {
				fmt.Fprintf(w, "%s %d failure log entries of queue %s\n", key, n, queue)
			}, err
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

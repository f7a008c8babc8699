package cli

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/rowq/rowq/client"
	"github.com/rowq/rowq/rowqtype"
)

const scheduleUsage = `Usage: rowq schedule COMMAND [NAME] [flags]

Commands:
  ls                  list schedules (--limit N, --cursor C)
  get NAME            show a schedule and its next runs
  put NAME --cron SPEC --category C --url URL [flags]
                      create or replace a schedule (put NAME -h lists flags)
  rm NAME             delete a schedule and its run history
  pause NAME          stop firing ticks
  resume NAME         fire again from the next tick after now
  trigger NAME        enqueue one run now, outside the ticks
  runs NAME           show the run history, newest first (--limit N, --cursor C)

Every command takes --server (env ROWQ_SERVER), --ca-file (env ROWQ_CA_FILE),
--token (env ROWQ_TOKEN) and --json.
`

// scheduleCmd is `rowq schedule`.
func scheduleCmd(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stderr, scheduleUsage)
		if len(args) == 0 {
			return fmt.Errorf("schedule: want a command")
		}
		return flag.ErrHelp
	}
	sub, args := args[0], args[1:]
	fs := newFlagSet("schedule "+sub, stderr)
	r := remoteFlags(fs)
	ctx, cancel := r.context()
	defer cancel()
	c, err := r.client()
	if err != nil {
		return err
	}
	printSchedule := func(s *rowqtype.Schedule) error {
		return r.print(stdout, s, func(w io.Writer) { scheduleTable(w, s) })
	}
	switch sub {
	case "ls":
		opts := pageFlags(fs, "schedules")
		if err := parseNamed(fs, args, 0); err != nil {
			return err
		}
		page, err := c.Schedules(ctx, opts)
		if err != nil {
			return err
		}
		return r.print(stdout, page, func(w io.Writer) {
			fmt.Fprintln(w, "NAME\tCRON\tTIMEZONE\tCATEGORY\tNEXT RUN\tPAUSED")
			for _, s := range page.Schedules {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%t\n", s.Name, s.Cron, s.Timezone, s.Category, nextRunText(s), s.Paused)
			}
			if page.NextCursor != "" {
				fmt.Fprintf(w, "more: --cursor %s\n", page.NextCursor)
			}
		})
	case "get", "rm", "pause", "resume":
		if err := parseNamed(fs, args, 1); err != nil {
			return err
		}
		name := fs.Arg(0)
		var s *rowqtype.Schedule
		var err error
		switch sub {
		case "get":
			s, err = c.Schedule(ctx, name)
		case "rm":
			s, err = c.DeleteSchedule(ctx, name)
		case "pause":
			s, err = c.PauseSchedule(ctx, name)
		case "resume":
			s, err = c.ResumeSchedule(ctx, name)
		}
		if err != nil {
			return err
		}
		return printSchedule(s)
	case "put":
		var ns rowqtype.ScheduleRequest
		var payload string
		var retries, delay, timeout, catchup int
		fs.StringVar(&ns.Cron, "cron", "", `cron spec: 5 fields, 6 with seconds first, @daily…, "@every 30s" (required)`)
		fs.StringVar(&ns.Timezone, "timezone", "", "IANA time zone of the spec (default UTC)")
		fs.StringVar(&ns.Category, "category", "", "job category, routed like POST /job/{category} (required)")
		fs.StringVar(&ns.URL, "url", "", "worker URL (required)")
		fs.StringVar(&payload, "payload", "", "job payload, JSON")
		fs.IntVar(&retries, "max-retries", 0, "retries of each job")
		fs.IntVar(&delay, "retry-delay", 0, "seconds between retries")
		fs.IntVar(&timeout, "timeout", 0, "seconds a delivery may take (0: none)")
		fs.StringVar(&ns.Misfire, "misfire", "", "ticks missed while no node ran: skip, once (default) or all")
		fs.IntVar(&catchup, "max-catchup", 0, "most missed ticks run with --misfire all (default 100)")
		fs.StringVar(&ns.Overlap, "overlap", "", "allow (default) or skip: skip a tick while the previous run's job waits or runs")
		fs.BoolVar(&ns.Paused, "paused", false, "create the schedule paused")
		if err := parseNamed(fs, args, 1); err != nil {
			return err
		}
		ns.MaxRetries, ns.RetryDelay, ns.Timeout, ns.MaxCatchup = nonZero(retries), nonZero(delay), nonZero(timeout), nonZero(catchup)
		if payload != "" {
			if !json.Valid([]byte(payload)) {
				return fmt.Errorf("--payload: not valid JSON: %s", payload)
			}
			ns.Payload = json.RawMessage(payload)
		}
		s, err := c.PutSchedule(ctx, fs.Arg(0), &ns)
		if err != nil {
			return err
		}
		return printSchedule(s)
	case "trigger":
		if err := parseNamed(fs, args, 1); err != nil {
			return err
		}
		run, err := c.TriggerSchedule(ctx, fs.Arg(0))
		if err != nil {
			return err
		}
		return r.print(stdout, run, func(w io.Writer) { runsTable(w, []*rowqtype.ScheduleRun{run}) })
	case "runs":
		opts := pageFlags(fs, "runs")
		if err := parseNamed(fs, args, 1); err != nil {
			return err
		}
		page, err := c.ScheduleRuns(ctx, fs.Arg(0), opts)
		if err != nil {
			return err
		}
		return r.print(stdout, page, func(w io.Writer) {
			runsTable(w, page.Runs)
			if page.NextCursor != "" {
				fmt.Fprintf(w, "more: --cursor %s\n", page.NextCursor)
			}
		})
	default:
		fmt.Fprint(stderr, scheduleUsage)
		return fmt.Errorf("schedule: unknown command %q", sub)
	}
}

// pageFlags adds --limit and --cursor for a listing of what.
func pageFlags(fs *flag.FlagSet, what string) *client.ListOptions {
	o := &client.ListOptions{}
	fs.IntVar(&o.Limit, "limit", 0, what+" per page, 1..1000 (0: the server's default, 100)")
	fs.StringVar(&o.Cursor, "cursor", "", "the cursor a previous page printed")
	return o
}

// parseNamed parses flags given before or after the n positional
// arguments (rowq schedule get NAME --json works as --json NAME does).
func parseNamed(fs *flag.FlagSet, args []string, n int) error {
	var pos []string
	for len(args) > 0 {
		if err := fs.Parse(args); err != nil {
			return err
		}
		args = fs.Args()
		if len(args) > 0 {
			pos = append(pos, args[0])
			args = args[1:]
		}
	}
	if len(pos) != n {
		return fmt.Errorf("%s: want %d argument(s) (NAME), got %d: %s", fs.Name(), n, len(pos), strings.Join(pos, " "))
	}
	return fs.Parse(pos) // leaves them as fs.Args()
}

func nextRunText(s *rowqtype.Schedule) string {
	if len(s.NextRuns) == 0 {
		return "-"
	}
	return s.NextRuns[0].Local
}

func scheduleTable(w io.Writer, s *rowqtype.Schedule) {
	fmt.Fprintf(w, "name\t%s\n", s.Name)
	fmt.Fprintf(w, "cron\t%s\n", s.Cron)
	fmt.Fprintf(w, "timezone\t%s\n", s.Timezone)
	fmt.Fprintf(w, "category\t%s\n", s.Category)
	fmt.Fprintf(w, "url\t%s\n", s.URL)
	if len(s.Payload) > 0 {
		fmt.Fprintf(w, "payload\t%s\n", s.Payload)
	}
	fmt.Fprintf(w, "retries\t%d every %ds, timeout %ds\n", s.MaxRetries, s.RetryDelay, s.Timeout)
	fmt.Fprintf(w, "misfire\t%s (max_catchup %d)\n", s.Misfire, s.MaxCatchup)
	fmt.Fprintf(w, "overlap\t%s\n", s.Overlap)
	fmt.Fprintf(w, "paused\t%t\n", s.Paused)
	for i, nr := range s.NextRuns {
		label := ""
		if i == 0 {
			label = "next runs"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\n", label, nr.Local, nr.UTC)
	}
}

func runsTable(w io.Writer, runs []*rowqtype.ScheduleRun) {
	fmt.Fprintln(w, "ID\tKIND\tTICK\tFIRED AT\tNODE\tJOB\tNOTE")
	for _, r := range runs {
		job := "skipped"
		if r.JobID != nil {
			job = fmt.Sprint(*r.JobID)
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Kind, r.Tick.Format(time.RFC3339), r.FiredAt.Format(time.RFC3339), r.Node, job, r.Reason)
	}
}

package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/rowq/rowq/internal/chaos"
)

// chaosCmd runs the chaos suite: nodes of this executable on one database,
// a steady load, faults on a schedule, and one JSON line of results.
func chaosCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("rowq chaos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o chaos.Options
	faults := fs.String("faults", "kill", "faults taking turns, comma-separated: kill, stop, worker, db (db-restart: its older name); \"\" for none")
	dir := fs.String("dir", "", "keep node logs (and the default SQLite file) here; default: a temporary directory, removed unless the run failed")
	quiet := fs.Bool("quiet", false, "no progress lines on stderr")
	fs.StringVar(&o.DatabaseURL, "database-url", "", "the nodes' database, and the one the run reads (default: the first --node-database-url, else a fresh SQLite file in --dir); use a fresh database")
	fs.Func("node-database-url", "a node's own database URL, repeatable: node i uses the i-th, cycling if fewer, and a replacement its victim's (e.g. one Galera member each); default: --database-url for all", func(s string) error {
		o.NodeDatabaseURLs = append(o.NodeDatabaseURLs, s)
		return nil
	})
	fs.IntVar(&o.Nodes, "nodes", 3, "rowq serve processes kept up")
	fs.Float64Var(&o.Rate, "rate", 300, "jobs per second offered, spread over the nodes (POST /job)")
	fs.DurationVar(&o.Duration, "duration", 60*time.Second, "how long the load and the faults last")
	fs.IntVar(&o.MaxWorkers, "max-workers", 50, "max_workers of the load's queue")
	fs.IntVar(&o.Keys, "keys", 0, "spread the jobs over this many concurrency keys (concurrency_key), each with --key-limit; 0: no keys")
	fs.IntVar(&o.KeyLimit, "key-limit", 2, "concurrency_limit of the jobs' keys, with --keys")
	fs.DurationVar(&o.Every, "every", 4*time.Second, "one fault this often")
	fs.DurationVar(&o.StopFor, "stop-for", 5*time.Second, "how long a stop fault keeps the leader SIGSTOPped")
	fs.DurationVar(&o.WorkerFaultFor, "worker-fault-for", 2*time.Second, "how long a worker fault lasts (every third delivery: hang past the timeout, garbage, 500, slow, reset)")
	fs.StringVar(&o.DBFaultCmd, "db-fault-cmd", "", "shell command run by sh -c for the db fault, ending when the fault is over (e.g. 'scripts/galera.sh kill 3; sleep 5; scripts/galera.sh restart 3', 'scripts/pg-ha.sh failover')")
	fs.StringVar(&o.DBFaultCmd, "db-restart-cmd", "", "the older name of --db-fault-cmd")
	fs.DurationVar(&o.NodeTTL, "node-ttl", 3*time.Second, "the nodes' --node-ttl; 0: the server's default")
	fs.DurationVar(&o.GrabLease, "grab-lease", 5*time.Second, "the nodes' --grab-lease")
	fs.DurationVar(&o.RefreshInterval, "refresh-interval", 500*time.Millisecond, "the nodes' --config-refresh-interval")
	fs.DurationVar(&o.RescueInterval, "rescue-interval", time.Second, "the nodes' --rescue-interval")
	fs.StringVar(&o.NodeLogLevel, "node-log-level", "info", "the nodes' --log-level (their logs go to --dir)")
	fs.DurationVar(&o.JobTimeout, "job-timeout", 2*time.Second, "the jobs' timeout (whole seconds)")
	fs.DurationVar(&o.WorkTime, "work-time", 10*time.Millisecond, "how long the worker takes over a delivery")
	fs.IntVar(&o.LockClients, "lock-clients", 3, "clients taking one lock through different nodes; 0: no lock check")
	fs.BoolVar(&o.Schedule, "schedule", true, "run a schedule every second and count its runs per tick")
	fs.DurationVar(&o.DrainTimeout, "drain-timeout", 2*time.Minute, "how long to wait after the load for every accepted job")
	fs.DurationVar(&o.Settle, "settle", 2*time.Second, "wait after the drain, for late duplicates to show")
	fs.DurationVar(&o.Sample, "sample", 0, "a soak: this often, read each node's memory and goroutines, the tables' sizes and the deliveries' latency (0: none)")
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: rowq chaos [flags]

Starts --nodes rowq serve processes on one database (or each on its own
--node-database-url), offers --rate jobs/s through all of them to a
checking worker for --duration, injects one fault every --every (kill,
stop, worker, or db: --db-fault-cmd), waits for the queue to drain and
prints one JSON line: accepted, delivered, lost, duplicates,
id_mismatches, in_flight_at_kills, failover_ms, redelivery_ms,
db_resume_ms, db_gap_ms, reaps (killed, stopped, cut_off, live), lock and
schedule checks, and with --sample a soak's samples (docs/reliability.md).
Exits 1 when a job was lost or delivered under another id than the one
answered, a live node was reaped, an enqueue refused without Retry-After,
a lock held twice or its token not increasing, or a schedule tick lost or
doubled.

Flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	for f := range strings.SplitSeq(*faults, ",") {
		if f = strings.TrimSpace(f); f != "" {
			o.Faults = append(o.Faults, f)
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find the rowq executable: %w", err)
	}
	o.Exe = exe
	if o.DatabaseURL == "" && len(o.NodeDatabaseURLs) > 0 {
		o.DatabaseURL = o.NodeDatabaseURLs[0]
	}
	if o.DatabaseURL == "" {
		o.DatabaseURL = "sqlite://" // checked by Validate; the file is made below
	}
	if err := o.Validate(); err != nil {
		return err
	}
	keep := *dir != ""
	if !keep {
		if *dir, err = chaos.DefaultDir(); err != nil {
			return err
		}
	} else if err := os.MkdirAll(*dir, 0o755); err != nil {
		return err
	}
	o.Dir = *dir
	if o.DatabaseURL == "sqlite://" {
		o.DatabaseURL = chaos.SQLiteURL(o.Dir)
	}
	level := slog.LevelInfo
	if *quiet {
		level = slog.LevelError
	}
	o.Log = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := chaos.Run(ctx, o)
	if res != nil {
		b, _ := json.Marshal(res)
		fmt.Fprintf(stdout, "%s\n", b)
	}
	failed := err
	if err == nil {
		failed = res.Failed()
	}
	if failed != nil {
		keep = true
	}
	if keep {
		fmt.Fprintf(stderr, "rowq chaos: node logs in %s\n", o.Dir)
	} else {
		os.RemoveAll(o.Dir)
	}
	if err != nil {
		return err
	}
	if failed != nil {
		return &exitError{code: 1, msg: "chaos: " + failed.Error()}
	}
	return nil
}

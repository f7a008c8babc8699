package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"time"

	"github.com/rowq/rowq/internal/auth"
	"github.com/rowq/rowq/internal/bench"
	"github.com/rowq/rowq/internal/config"
	"github.com/rowq/rowq/internal/gctune"
	"github.com/rowq/rowq/internal/server"
	"github.com/rowq/rowq/internal/store"
)

// benchCmd runs the benchmark against --server, or against a node it starts
// in this process on --database-url.
func benchCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("rowq bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		o       bench.Options
		dbURL   = fs.String("database-url", "", "start a node in this process on this database (default: sqlite in a temp dir)")
		target  = fs.String("server", "", "base URL of a running rowq to drive instead, e.g. http://127.0.0.1:8080")
		runs    = fs.Int("runs", 3, "runs; the report gives each and the median")
		handoff = fs.Bool("handoff", true, "let the in-process node hand jobs straight to its dispatcher (local hand-off)")
		prof    = fs.String("cpuprofile", "", "write a CPU profile of the whole bench process (clients, worker and, without --server, the node) to this file")
		queue   = fs.String("queue", "", "use this queue in every run (it may already exist and be led by another node than --server); default: a new queue per run")
		secret  = fs.String("signing-secret", os.Getenv("ROWQ_SIGNING_SECRET"), "let the in-process node sign its deliveries with these secrets (env ROWQ_SIGNING_SECRET)")
		authOn  = fs.Bool("auth", false, "run the in-process node with authentication on, the clients sending a token made for the run")
	)
	fs.StringVar(&o.Token, "token", os.Getenv("ROWQ_TOKEN"), "API token to send to --server (env ROWQ_TOKEN)")
	fs.IntVar(&o.Jobs, "jobs", 10000, "jobs per run")
	fs.IntVar(&o.Clients, "clients", 16, "concurrent HTTP clients")
	fs.IntVar(&o.MaxWorkers, "max-workers", 100, "max_workers of the bench queue (with --pull: --pullers × --pull-max unless given)")
	fs.IntVar(&o.KeepFinished, "keep-finished", 0, "keep_finished of the bench queue, in seconds: keep every job's history (0: none)")
	fs.Float64Var(&o.Rate, "rate", 0, "offer this many jobs/s in total (latency mode); 0 = as fast as possible")
	fs.IntVar(&o.Batch, "batch", 0, "enqueue with POST /jobs, this many jobs a request; 0 = POST /job/{category}, one job a request")
	backlog := fs.Int("backlog", 0, "write this many jobs into the database before their queue exists, then create it and measure the drain (needs --database-url, also with --server)")
	fs.BoolVar(&o.Outbox, "outbox", false, "write the jobs as rows of the transactional outbox (rowq_outbox) from --clients concurrent transactions, and measure rows moved/s and commit→worker latency (needs --database-url with --server)")
	fs.IntVar(&o.OutboxRows, "outbox-rows", 1, "rows per outbox transaction, with --outbox")
	fs.BoolVar(&o.Pull, "pull", false, "make the bench queue a pull queue and work it with --pullers pullers (POST /queue/{name}/lease, then a completion per job) instead of a worker")
	fs.IntVar(&o.Pullers, "pullers", 16, "concurrent pullers, with --pull")
	fs.IntVar(&o.PullMax, "pull-max", 100, "jobs a lease request asks for, 1..100, with --pull")
	fs.IntVar(&o.Keys, "keys", 0, "spread the jobs over this many concurrency keys (concurrency_key), each with --key-limit")
	fs.IntVar(&o.KeyLimit, "key-limit", 1, "concurrency_limit of the jobs' keys, with --keys or --hot-key")
	fs.Float64Var(&o.HotKey, "hot-key", 0, "put this fraction (0..1) of the jobs on one concurrency key, the rest on keys of their own (or over --keys), and report the rate of the cold jobs too")
	fs.BoolVar(&o.Ordered, "ordered", false, "make the keys of --keys or --hot-key ordered (ordered: true; limit 1)")
	fs.DurationVar(&o.Settle, "settle", time.Second, "wait after the last delivery, for duplicates to show")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *runs < 1 {
		return fmt.Errorf("runs: must be at least 1")
	}
	if *backlog < 0 || o.Batch < 0 {
		return fmt.Errorf("backlog, batch: must not be negative")
	}
	switch {
	case o.Keys < 0:
		return fmt.Errorf("keys: must not be negative")
	case o.KeyLimit < 1 || o.KeyLimit > 10000:
		return fmt.Errorf("key-limit: must be 1..10000")
	case o.HotKey < 0 || o.HotKey >= 1:
		return fmt.Errorf("hot-key: must be 0..1 (a fraction of the jobs), less than 1")
	case o.Ordered && o.Keys == 0 && o.HotKey == 0:
		return fmt.Errorf("ordered: only with --keys or --hot-key")
	case o.Ordered && o.KeyLimit != 1:
		return fmt.Errorf("ordered: only with --key-limit 1 (an ordered key's jobs go one at a time)")
	case (o.Keys > 0 || o.HotKey > 0) && (o.Pull || o.Outbox):
		return fmt.Errorf("keys, hot-key: not with --pull or --outbox")
	}
	if o.Pull {
		maxSet := false
		fs.Visit(func(f *flag.Flag) { maxSet = maxSet || f.Name == "max-workers" })
		if !maxSet {
			// Room for every puller's full ask: max_workers bounds the
			// leased jobs of a pull queue.
			o.MaxWorkers = o.Pullers * o.PullMax
			if o.MaxWorkers > 10000 {
				return fmt.Errorf("pullers × pull-max: at most 10000 (a queue's max_workers), got %d; set --max-workers", o.MaxWorkers)
			}
		}
		switch {
		case *backlog > 0 || o.Outbox:
			return fmt.Errorf("pull: not with --backlog or --outbox")
		case o.Pullers < 1:
			return fmt.Errorf("pullers: must be at least 1")
		case o.PullMax < 1 || o.PullMax > 100:
			return fmt.Errorf("pull-max: must be 1..100")
		}
	}
	if o.Outbox {
		if *backlog > 0 || o.Batch > 0 {
			return fmt.Errorf("outbox: not with --backlog or --batch")
		}
		if *target != "" && *dbURL == "" {
			return fmt.Errorf("outbox: needs --database-url, the database of the --server node")
		}
		if o.OutboxRows < 1 {
			return fmt.Errorf("outbox-rows: must be at least 1")
		}
	}
	if *backlog > 0 {
		if *target != "" && *dbURL == "" {
			return fmt.Errorf("backlog: needs --database-url, the database of the --server node")
		}
		if *queue != "" {
			return fmt.Errorf("backlog: needs a new queue per run; leave out --queue")
		}
		o.Backlog, o.Jobs = true, *backlog
	}
	if *prof != "" {
		f, err := os.Create(*prof)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	ctx := context.Background()
	o.Server = *target
	if o.Server == "" {
		gctune.Floor(gctune.DefaultFloor) // the node in this process, as rowq serve
		if *dbURL == "" {
			dir, err := os.MkdirTemp("", "rowq-bench")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			*dbURL = "sqlite://" + dir + "/bench.db"
		}
		cfg := config.Default()
		cfg.Bind = "127.0.0.1:0"
		cfg.DatabaseURL = *dbURL
		cfg.QueueDefault = ""
		cfg.DispatchHandoff = *handoff
		cfg.SigningSecret = *secret
		if *authOn {
			cfg.Auth = auth.ModeOn
			token, err := benchToken(*dbURL)
			if err != nil {
				return err
			}
			o.Token = token
		}
		s, err := server.New(ctx, cfg, slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
		if err != nil {
			return err
		}
		if err := s.Start(ctx); err != nil {
			return err
		}
		defer s.Stop(nil)
		o.Server = "http://" + s.Addr()
	}
	o.DatabaseURL = *dbURL
	signed := ""
	if *target == "" && *secret != "" {
		signed = "; deliveries signed"
	}
	fmt.Fprintf(stdout, "rowq bench: %s; server %s%s; GOMAXPROCS %d\n", o.Label(), o.Server, signed, runtime.GOMAXPROCS(0))
	var e2e, enq, cold []float64
	var p50, p99 []time.Duration
	bad := false
	for i := range *runs {
		o.Queue = *queue
		if o.Queue == "" {
			o.Queue = fmt.Sprintf("bench%d_%d", time.Now().Unix(), i)
		}
		res, err := bench.Run(ctx, o)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "\nrun %d:\n%s\n", i+1, res)
		e2e, enq = append(e2e, res.EndToEndRate()), append(enq, res.EnqueueRate())
		if res.ColdTime > 0 {
			cold = append(cold, res.ColdRate())
		}
		p50, p99 = append(p50, res.P50), append(p99, res.P99)
		bad = bad || res.Lost > 0 || res.Duplicates > 0 || res.EnqueueErrors > 0
	}
	fmt.Fprintf(stdout, "\nmedian of %d runs: end to end %.0f jobs/s, enqueue %.0f jobs/s, p50 %v, p99 %v\n",
		*runs, median(e2e), median(enq), median(p50).Round(10*time.Microsecond), median(p99).Round(10*time.Microsecond))
	if len(cold) > 0 {
		fmt.Fprintf(stdout, "median of %d runs: cold jobs (not on the hot key) %.0f jobs/s\n", len(cold), median(cold))
	}
	if bad {
		return fmt.Errorf("jobs were lost, delivered twice, or refused at enqueue")
	}
	return nil
}

// benchToken stores an admin token for this run in the database and
// returns it.
func benchToken(databaseURL string) (string, error) {
	var token string
	err := withStore(databaseURL, io.Discard, func(ctx context.Context, st store.Store) error {
		var hash string
		token, hash = auth.NewToken()
		_, err := st.TokenCreate(ctx, &store.TokenCreateParams{Name: "bench-" + hash[:12], Hash: hash, Scopes: []string{string(auth.Admin)}})
		return err
	})
	return token, err
}

func median[T float64 | time.Duration](xs []T) T {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

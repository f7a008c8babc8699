// Package cli implements the rowq command's subcommands. Each command is
// in the file named for it (queue.go is `rowq queue` and its verbs, with
// `rowq stats` and `rowq nodes`, short for two of them; echo-worker is in
// worker.go); the commands that talk to a running server share
// subcommand.go (their verbs, flags and arguments) and remote.go (the
// --server, --ca-file, --token and --json flags, the client and the output).
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"

	"github.com/rowq/rowq/internal/config"
	"github.com/rowq/rowq/internal/server"
)

// command is one rowq subcommand.
type command struct {
	name, args, summary string
	run                 func(args []string, stdout, stderr io.Writer) error
}

// commands lists the subcommands in the order `rowq help` shows them.
var commands = []command{
	{"serve", "[flags]", "run a node: HTTP API and dispatcher (rowq serve -h lists flags)", serveCmd},
	{"migrate", "[flags]", "apply the database schema and exit", migrateCmd},
	{"echo-worker", "[flags]", "a worker for trying rowq out: prints jobs, answers success", echoWorker},
	{"worker", "--queue Q -- CMD", "work a pull queue: run CMD for each job (rowq worker -h)", workerCmd},
	{"bench", "[flags]", "measure throughput and latency (rowq bench -h lists flags)", benchCmd},
	{"chaos", "[flags]", "kill, stop and starve nodes under load; count lost and doubled jobs (rowq chaos -h)", chaosCmd},
	{"queue", "VERB", "queues on a server: ls get put rm pause resume node nodes stats", queueCmd},
	{"routing", "VERB", "routings on a server: ls get put rm", routingCmd},
	{"job", "VERB", "jobs on a server: push push-batch ls get rm", jobCmd},
	{"failed", "VERB", "a queue's failure log on a server: ls get rm retry purge", failedCmd},
	{"lock", "run|get|ls|release", "hold a lock around a command; show and release locks", lockCmd},
	{"schedule", "COMMAND [NAME]", "cron schedules: ls, get, put, rm, pause, resume, trigger, runs", scheduleCmd},
	{"stats", "[QUEUE]", "queue statistics on a server (rowq queue stats)", statsCmd},
	{"nodes", "", "the live nodes and how many queues each dispatches (rowq queue nodes)", nodesCmd},
	{"token", "create|ls|revoke", "API tokens, in the database (no server needed)", tokenCmd},
}

func usage() string {
	var b strings.Builder
	b.WriteString("rowq: jobs, schedules and locks in rows of your database.\n\nUsage:\n")
	for _, c := range commands {
		fmt.Fprintf(&b, "  %-28s %s\n", "rowq "+c.name+" "+c.args, c.summary)
	}
	fmt.Fprintf(&b, "  %-28s %s\n", "rowq version", "print the version")
	b.WriteString(`
With no flags, rowq serve keeps its data in ./rowq.db (SQLite) and listens on
127.0.0.1:8080. Choose a database with --database-url or ROWQ_DATABASE_URL:
  mysql://user:pass@host:3306/db   postgres://user:pass@host:5432/db   sqlite://path
Commands that talk to a running server take --server (env ROWQ_SERVER,
default http://127.0.0.1:8080; https:// for a server run with --tls-cert),
--ca-file (env ROWQ_CA_FILE: trust this private CA), --token (env ROWQ_TOKEN)
and --json.
`)
	return b.String()
}

// Main runs the command with args (without the program name) and returns
// the exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage())
		return 2
	}
	var err error
	switch args[0] {
	case "version", "--version", "-version":
		fmt.Fprintln(stdout, "rowq", server.Version)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage())
	default:
		i := slices.IndexFunc(commands, func(c command) bool { return c.name == args[0] })
		if i < 0 {
			fmt.Fprintf(stderr, "rowq: unknown command %q\n\n%s", args[0], usage())
			return 2
		}
		err = commands[i].run(args[1:], stdout, stderr)
	}
	var exit *exitError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &exit):
		if exit.msg != "" {
			fmt.Fprintln(stderr, "rowq:", exit.msg)
		}
		return exit.code
	default:
		fmt.Fprintln(stderr, "rowq:", err)
		return 1
	}
}

// load reads the configuration of the commands that run on the database
// (serve and migrate) from flags and environment, and makes their logger.
func load(name string, args []string, stderr io.Writer) (config.Config, *slog.Logger, error) {
	fs := flag.NewFlagSet("rowq "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg, err := config.Load(fs, args, config.FromEnv)
	if err != nil {
		return cfg, nil, err
	}
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.LogLevel))
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler = slog.NewTextHandler(stderr, opts)
	if cfg.LogFormat == "json" {
		h = slog.NewJSONHandler(stderr, opts)
	}
	return cfg, slog.New(h), nil
}

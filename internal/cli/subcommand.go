package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rowq/rowq/client"
)

// The machinery of the commands that talk to a running server (queue,
// routing, job, failed): a command is a list of verbs, dispatchSub picks
// one, and each verb parses its flags and arguments through its session.

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

// simple is the run of a verb that takes n positional arguments, makes one
// client call with them and prints its answer: fn returns the answer and
// its table.
func simple(n int, names string, fn func(ctx context.Context, c *client.Client, pos []string) (any, func(io.Writer), error)) func(*session, []string) error {
	return func(s *session, args []string) error {
		pos, err := s.parse(args, n, names)
		if err != nil {
			return err
		}
		return s.call(func(ctx context.Context, c *client.Client) (any, func(io.Writer), error) {
			return fn(ctx, c, pos)
		})
	}
}

// call makes a verb's client calls, once its flags and arguments are
// parsed, and prints the answer: fn returns the answer and its table. Its
// context ends at SIGINT or SIGTERM.
func (s *session) call(fn func(ctx context.Context, c *client.Client) (any, func(io.Writer), error)) error {
	ctx, cancel := s.r.context()
	defer cancel()
	c, err := s.r.client()
	if err != nil {
		return err
	}
	v, table, err := fn(ctx, c)
	if err != nil {
		return err
	}
	return s.r.print(s.stdout, v, table)
}

// parse parses flags anywhere among args (flag stops at the first
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

// parseID parses the id of a job or of a failure log entry.
func parseID(s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id < 1 {
		return 0, fmt.Errorf("id: want a positive integer, got %q", s)
	}
	return id, nil
}

// since formats a time for a table, "-" when it is not set.
func since(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05")
}

// listFlags adds --limit, --order and --cursor.
func listFlags(fs *flag.FlagSet, orders string) *client.ListOptions {
	o := &client.ListOptions{}
	fs.IntVar(&o.Limit, "limit", 0, "jobs per page, 1..1000 (0: the server's default, 100)")
	fs.StringVar(&o.Order, "order", "", orders)
	fs.StringVar(&o.Cursor, "cursor", "", "the cursor a previous page printed")
	return o
}

package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"

	"github.com/rowq/rowq/client"
)

// remote holds the flags every command that talks to a running server
// takes: --server, --ca-file, --token and --json.
type remote struct {
	server string
	caFile string
	token  string
	json   bool
}

// remoteFlags adds --server, --ca-file, --token and --json to fs.
func remoteFlags(fs *flag.FlagSet) *remote {
	r := &remote{}
	def := os.Getenv("ROWQ_SERVER")
	if def == "" {
		def = client.DefaultServer
	}
	fs.StringVar(&r.server, "server", def, "rowq server to talk to, http:// or https:// (env ROWQ_SERVER)")
	fs.StringVar(&r.caFile, "ca-file", os.Getenv("ROWQ_CA_FILE"),
		"PEM file of the certificate authorities to trust for an https:// server instead of the system's (env ROWQ_CA_FILE)")
	fs.StringVar(&r.token, "token", os.Getenv("ROWQ_TOKEN"), "API token, when the server needs one (env ROWQ_TOKEN, which keeps it out of process lists)")
	fs.BoolVar(&r.json, "json", false, "print the server's answer as JSON, for scripts")
	return r
}

// client returns a client of the server named by --server, trusting the
// authorities of --ca-file if given.
func (r *remote) client() (*client.Client, error) {
	hc, err := client.HTTPClient(r.caFile)
	if err != nil {
		return nil, err
	}
	return client.New(r.server, hc, client.WithToken(r.token)), nil
}

// context is cancelled by SIGINT or SIGTERM.
func (r *remote) context() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// print writes v as indented JSON with --json, else calls table with a
// tab-aligned writer for people.
func (r *remote) print(stdout io.Writer, v any, table func(w io.Writer)) error {
	if r.json || table == nil {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		return enc.Encode(v)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	table(tw)
	return tw.Flush()
}

// nonZero returns &v, or nil when v is its type's zero value: a flag left
// at its zero default leaves its field out of the request, for the
// server's default.
func nonZero[T comparable](v T) *T {
	var zero T
	if v == zero {
		return nil
	}
	return &v
}

// newFlagSet returns a flag set for a subcommand that reports errors on
// stderr and returns them instead of exiting.
func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("rowq "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// needArgs checks the positional arguments left after the flags.
func needArgs(fs *flag.FlagSet, n int, names string) error {
	if fs.NArg() != n {
		return fmt.Errorf("%s: want %s, got %d argument(s)", fs.Name(), names, fs.NArg())
	}
	return nil
}

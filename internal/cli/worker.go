package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rowq/rowq/client"
	"github.com/rowq/rowq/internal/signing"
	"github.com/rowq/rowq/rowqtype"
)

// echoWorker is a worker for trying rowq out: it prints every job it gets
// and answers with the status given by --status. With --signing-secret it
// verifies each delivery's signature first.
func echoWorker(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("rowq echo-worker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:9000", "address to listen on")
	status := fs.String("status", "success", "status to answer: success, failure or permanent-failure")
	secret := fs.String("signing-secret", os.Getenv("ROWQ_SIGNING_SECRET"),
		"verify deliveries signed with any of these secrets (comma-separated, whsec_…) and answer 401 to others (env ROWQ_SIGNING_SECRET)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch *status {
	case "success", "failure", "permanent-failure":
	default:
		return fmt.Errorf("status: want success, failure or permanent-failure, got %q", *status)
	}
	keys, err := signing.ParseSecrets(*secret)
	if err != nil {
		return fmt.Errorf("signing-secret: %w", err)
	}
	verifying := ""
	if len(keys) > 0 {
		verifying = fmt.Sprintf(", verifying signatures with %d secret(s)", len(keys))
	}
	fmt.Fprintf(stderr, "rowq echo-worker listening on http://%s, answering %s%s\n", *listen, *status, verifying)
	srv := &http.Server{Addr: *listen, ReadHeaderTimeout: 10 * time.Second, Handler: echoHandler(*status, keys, stdout, time.Now)}
	return srv.ListenAndServe()
}

// echoHandler prints each delivery to out and answers status. With keys,
// a delivery whose Standard Webhooks signature matches none of them, or
// whose timestamp is more than 5 minutes off now(), is printed as refused
// and answered 401 with a failure (rowq retries it, and its failure log
// tells why).
func echoHandler(status string, keys [][]byte, out io.Writer, now func() time.Time) http.Handler {
	answer := fmt.Sprintf(`{"status":%q,"message":"answered by rowq echo-worker"}`, status)
	var mu sync.Mutex // one line at a time
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		w.Header().Set("Content-Type", "application/json")
		if len(keys) > 0 {
			if err := signing.Verify(keys, r.Header.Get, body, now()); err != nil {
				mu.Lock()
				fmt.Fprintf(out, "refused %s %s: %v\n", r.Method, r.URL.Path, err)
				mu.Unlock()
				w.WriteHeader(http.StatusUnauthorized)
				fmt.Fprintf(w, `{"status":"failure","message":%q}`, "rowq echo-worker: "+err.Error())
				return
			}
		}
		mu.Lock()
		fmt.Fprintf(out, "%s %s %s\n", r.Method, r.URL.Path, body)
		mu.Unlock()
		io.WriteString(w, answer)
	})
}

// exitRetry is the exit code with which a worker command asks for its job
// to be retried (EX_TEMPFAIL); any other code but 0 fails it for good.
const exitRetry = 75

// stderrTail bounds the tail of a command's stderr kept as its job's
// failure message.
const stderrTail = 2048

// workerCmd is rowq worker: it pulls the jobs of a pull queue and runs a
// command for each (docs/workers.md), until SIGINT or SIGTERM.
func workerCmd(args []string, stdout, stderr io.Writer) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return work(ctx, args, stdout, stderr)
}

// work is rowq worker until ctx ends.
func work(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("rowq worker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: rowq worker --queue Q [flags] -- COMMAND [ARG...]

Pulls the jobs of pull queue Q and runs COMMAND for each: the job's payload
on its stdin (a JSON string's text, other JSON as it is), ROWQ_JOB_ID,
ROWQ_ATTEMPT, ROWQ_QUEUE and ROWQ_CATEGORY in its environment. The job's
lease is renewed while it runs. Exit code 0 completes the job; 75 fails it,
retried by its policy; any other fails it for good. The tail of its stderr
is the failure's message. SIGINT or SIGTERM stops pulling and waits for the
commands running.

Flags:
`)
		fs.PrintDefaults()
	}
	r := remoteFlags(fs)
	queue := fs.String("queue", "", "the pull queue to work (required)")
	concurrency := fs.Int("concurrency", 1, "commands run at once, 1..1000")
	lease := fs.Float64("lease", 60, "seconds each job is leased, renewed every third of it while its command runs: 1..86400")
	if err := fs.Parse(args); err != nil {
		return err
	}
	argv := fs.Args()
	switch {
	case *queue == "":
		return errors.New("--queue: required")
	case *concurrency < 1 || *concurrency > 1000:
		return fmt.Errorf("--concurrency: must be 1..1000, got %d", *concurrency)
	case !(*lease >= 1 && *lease <= 86400):
		return fmt.Errorf("--lease: must be 1..86400 seconds, got %v", *lease)
	case len(argv) == 0:
		return errors.New("a command to run is required after --")
	}
	c, err := r.client()
	if err != nil {
		return err
	}
	out, errOut := &lockedWriter{w: stdout}, &lockedWriter{w: stderr}
	log := slog.New(slog.NewTextHandler(errOut, nil))
	log.Info("rowq worker pulling", "queue", *queue, "server", c.Base(), "concurrency", *concurrency, "command", argv[0])
	w := &client.Worker{
		Client:      c,
		Queue:       *queue,
		Concurrency: *concurrency,
		Lease:       time.Duration(*lease * float64(time.Second)),
		Handler:     commandHandler(argv, out, errOut),
		Logger:      log,
	}
	if err := w.Run(ctx); !errors.Is(err, context.Canceled) {
		return err
	}
	log.Info("rowq worker stopped; the commands that were running finished")
	return nil
}

// commandHandler runs argv for each job, with the job on its stdin and in
// its environment, and maps its exit code to the job's result.
func commandHandler(argv []string, stdout, stderr io.Writer) client.Handler {
	return func(ctx context.Context, j *rowqtype.LeasedJob) error {
		if j.Timeout > 0 {
			// As a push delivery's timeout: a failure, retried.
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, time.Duration(j.Timeout)*time.Second)
			defer cancel()
		}
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Stdin = bytes.NewReader(payloadBody(j.Payload))
		cmd.Env = append(os.Environ(),
			"ROWQ_JOB_ID="+strconv.FormatInt(j.ID, 10),
			"ROWQ_ATTEMPT="+strconv.Itoa(j.Attempt),
			"ROWQ_QUEUE="+j.QueueName,
			"ROWQ_CATEGORY="+j.Category)
		tail := &tailWriter{max: stderrTail}
		cmd.Stdout = stdout
		cmd.Stderr = io.MultiWriter(stderr, tail)
		err := cmd.Run()
		var exit *exec.ExitError
		switch {
		case err == nil:
			return nil
		case ctx.Err() == context.DeadlineExceeded:
			return fmt.Errorf("timed out after %d s: %s", j.Timeout, tail.message(err))
		case errors.As(err, &exit) && exit.ExitCode() == exitRetry:
			return errors.New(tail.message(err))
		default:
			return client.Permanent(errors.New(tail.message(err)))
		}
	}
}

// payloadBody is what a command reads on stdin: what a push worker's
// request body holds, a JSON string's text and other JSON as it is.
func payloadBody(p json.RawMessage) []byte {
	var s string
	if len(p) > 0 && p[0] == '"' && json.Unmarshal(p, &s) == nil {
		return []byte(s)
	}
	return p
}

// tailWriter keeps the last max bytes written to it.
type tailWriter struct {
	max int
	buf []byte
}

func (t *tailWriter) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

// message is the failure message of a command that ended with err: the
// tail of its stderr, or err when it wrote none.
func (t *tailWriter) message(err error) string {
	msg := strings.TrimSpace(strings.ToValidUTF8(string(t.buf), ""))
	if msg == "" {
		return err.Error()
	}
	return msg
}

// lockedWriter serializes the writes of concurrent commands.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

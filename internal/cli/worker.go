package cli

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/rowq/rowq/internal/signing"
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
